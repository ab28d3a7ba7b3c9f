"""How long a test waits on another process, a server or a thread before calling it hung.

Only a hang guard, never a timing assertion: it turns a process that will never answer into
a failure with a message instead of a stalled run. It is generous on purpose, so that a
loaded 2-core machine running the suite on two workers never trips it.
"""

HUNG = 900.0
