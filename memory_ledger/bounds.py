"""The bounds of requests and schedules, in one place with no imports: the modules that
enforce them (retrieval/context.py, feed/subscribers.py, jobs/projection_catchup.py,
jobs/runs.py) take them from here, and so do the CLI's options, which state them in
`--help` without loading the service stack (a fast `memory-ledger --help`)."""

from __future__ import annotations

# The two read requests (memory_ledger/retrieval/context.py), for the API and the CLI.
ITEM_OVERHEAD_TOKENS = 8  # the label and separators each item costs in the rendering
MIN_TOKEN_BUDGET = ITEM_OVERHEAD_TOKENS + 1
MAX_TOKEN_BUDGET = 200_000
MAX_CONTEXT_LIMIT = 200
MAX_RECALL_LIMIT = 10_000  # MemoryLedger.recall; consolidation reads turns with it

# A subscriber's acknowledgement deadline, in hours (memory_ledger/feed/subscribers.py).
DEFAULT_DEADLINE_HOURS = 24
MAX_DEADLINE_HOURS = 24 * 366

# The schedule's bounds, in seconds (jobs/projection_catchup.py). A negative or zero
# interval made the scheduler spin (and grow) without end; every bound here is checked
# before anything starts.
MIN_INTERVAL = 0.05
MAX_INTERVAL = 3600.0
MAX_DURATION = 30 * 24 * 3600.0  # without a duration, run until stopped
MIN_CONSOLIDATE_EVERY = 1.0
MAX_CONSOLIDATE_EVERY = 24 * 3600.0

#: Run records kept per job (jobs/runs.py): a catch-up every second would otherwise grow
#: without end.
RUNS_KEPT = 100

#: The largest ledger seq, and so the largest `after` cursor or tree size a caller may
#: name: the largest integer SQLite and PostgreSQL's bigint hold. A larger one given to
#: a query overflows the driver (a 500), where it should be refused (422).
MAX_SEQ = 2**63 - 1

# What an adapter may ask the service's embedder for at once (MemoryLedger.embed): a
# batch of an index's items, each at most a turn's size.
MAX_EMBED_TEXTS = 10_000
MAX_EMBED_CHARS = 64 * 1024
