"""How wide a plan made from words may be before it becomes a question.

A request in words names something ("the Sunbeam callback line"); the reader finds the
places where it is said. When what it found is a large part of the memory, the reader
has almost certainly matched a description, a name or a location phrase instead of a
value, and executing it would erase what the user never meant. Such a plan is asked
about (with counts and a few example places), never made. The numbers are here, named,
so a deployment that wants another trade-off changes them in one place.
"""

from __future__ import annotations

#: A piece said in more places than this is too wide, however large the namespace: a
#: value a user asks to forget is repeated a handful of times, not dozens (the outside
#: set's widest real value is said in 13 places; the wrong plans it exposed touched
#: 18 to 207).
MAX_PLACES = 40

#: Above this share of the namespace's items a piece is too wide ...
MAX_SHARE = 0.25

#: ... once it has at least this many places (in a small memory, two of eight items is
#: a quarter and is still a specific value).
SHARE_FROM = 12

#: How many example places a question about a too-wide piece shows.
MAX_EXAMPLES = 8


def too_wide(places: int, namespace_items: int) -> bool:
    """Whether `places` places are too many for one thing a request names, in a
    namespace of `namespace_items` items."""
    if places > MAX_PLACES:
        return True
    if places < SHARE_FROM or namespace_items <= 0:
        return False
    return places / namespace_items > MAX_SHARE


def share(items: int, namespace_items: int) -> float:
    """The share of the namespace's items a plan touches (0 for an empty namespace),
    rounded for display."""
    if namespace_items <= 0:
        return 0.0
    return round(min(items, namespace_items) / namespace_items, 4)
