"""Services subscribe: the change feed (feed.py) and the subscribers that keep copies
and acknowledge erasures (subscribers.py)."""
