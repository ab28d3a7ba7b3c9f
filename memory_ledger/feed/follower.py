"""A server process follows the log for erasures made by other processes (PostgreSQL).

Several `memory-ledger serve` processes and projection runners share one PostgreSQL,
each with a data directory of its own: its vector index and search codes
(projections/vector_index.py, vector_codes.py), its recall state files and built
contexts (memory_ledger/retrieval/context_cache.py). None of these copies is ever
served stale: a built context is kept for one log position only, a recall state is
brought to the log's position before use, and whatever is shown is opened with the
item's key, destroyed (in PostgreSQL, shared) by the forget that committed. So a read
that starts after another process's forget returned never holds the erased value,
whether or not this process has caught up.

What is still this process's to do is to drop its copies at rest, and to say so: the
forget in another process cannot reach this machine's files, and the request stays
`partial` until this host acknowledges (memory_ledger/feed/hosts.py). That is what the
follower does, from the log: it waits on the change feed's LISTEN/NOTIFY
(`ChangeFeed.wait`), reads the new events' notifications (their topics and item ids
only: nothing is decoded or opened, and nothing is kept per item), and for every
erasure (a forget or an expiry) or redaction it

- catches this host's vector index up past the tombstones (removing the rows) and
  acknowledges the requests waiting for it, registering the host first if its index
  holds vectors;
- evicts the items from the built contexts and the recall states, removing every state
  file and every search-codes file (they are written again on the next recall).

A request becomes `partial` only after its fan-out, which can end after this process
has already applied its tombstones; while one may still wait for this host, the
follower tries again, after `RETRY_SECONDS` and then twice as long each time (up to
`IDLE_SECONDS`). It starts from the vector index's own position (in its manifest, on
disk), so a process killed with SIGKILL and started again handles, before anything
else, every erasure committed while it was down; a host whose index is empty holds
nothing derived from the log yet and starts at the log's head.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from memory_ledger.event_log import EventLog
from memory_ledger.feed.feed import ChangeFeed

log = logging.getLogger("memory_ledger.feed")

#: The events after which a copy must be dropped: its item's content is gone or changed
#: (an expiry is an `Erased` event too, with its basis as reason).
DROPS = frozenset({"Erased", "Redacted"})
#: While a request may still wait for this host's acknowledgement: the first pause before
#: trying again, doubled at each try that leaves one waiting (up to IDLE_SECONDS), so a
#: request whose fan-out died with its process costs little until it is resumed.
RETRY_SECONDS = 0.25
#: The longest wait for a notification before looking again (so a stop is seen).
IDLE_SECONDS = 5.0
#: How long to pause after a failure (a dropped connection) before reading again.
FAILURE_SECONDS = 1.0
#: Notifications read at a time.
PAGE = 1000


class ErasureFollower:
    """A daemon thread following the log for one process's local copies. Given what it
    calls, never the service (the composition root, memory_ledger/api.py, wires it):

    - `log`: the event log, whose notifications it reads;
    - `feed`: a change feed of its own, to wait on (its LISTEN connection is this
      thread's);
    - `start`: the log position this host's copies have applied (its vector index's;
      0 when it holds none);
    - `catch_up`: catches this host's vector index up and acknowledges what that allows
      (`hosts.catch_up_vectors`);
    - `awaited`: how many requests still wait for this host's acknowledgement;
    - `registered`: whether this host is a registered subscriber; until it is, every new
      event leads to a catch-up, which registers it once its index holds vectors (so
      the next request waits for it);
    - `evict`: drops items from the process's caches and removes the local files
      derived from them (recall states, search codes).
    """

    def __init__(
        self,
        log: EventLog,
        feed: ChangeFeed,
        start: Callable[[], int],
        catch_up: Callable[[], object],
        awaited: Callable[[], int],
        registered: Callable[[], bool],
        evict: Callable[[Sequence[str]], object],
    ) -> None:
        self.log = log
        self.feed = feed
        self._start = start
        self._catch_up = catch_up
        self._awaited = awaited
        self._registered = registered
        self._known = False  # seen registered: then only erasures lead to a catch-up
        self._evict = evict
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The log position read up to (None until the thread started).
        self.position: int | None = None
        #: Counts, for tests and logs: items evicted, failures logged.
        self.evicted = self.failures = 0

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="erasure-follower", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread, waking it from its wait, and wait for it to end (it closes
        its own LISTEN connection), so nothing it uses is closed under it."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            self.feed.wake()
        except Exception as exc:  # the database is gone: the wait ends at its timeout
            log.warning("erasure follower: could not wake it to stop: %s", exc)
        thread.join()

    def _run(self) -> None:
        retry: float | None = RETRY_SECONDS  # at start: what was filed while it was down
        try:
            while not self._stop.is_set():
                try:
                    retry = self._step(retry)
                except Exception as exc:  # a dropped connection, a restarting database:
                    self.failures += 1  # never silent, never the end of the thread
                    log.warning(
                        "erasure follower: %s: %s; reading the log again shortly",
                        type(exc).__name__,
                        exc,
                    )
                    self._stop.wait(FAILURE_SECONDS)
        finally:
            self.feed.close()

    def _step(self, retry: float | None) -> float | None:
        """Read to the head, act on what was read, wait. `retry`: the pause before
        trying again to acknowledge (None: nothing waits for this host); returns the
        next one. The position moves past what was read only once it was acted on: a
        step that fails is read again whole."""
        if self.position is None:
            start = self._start()
            self.position = start if start > 0 else self.log.max_position()
        head, dropped = self._read(self.position)
        if dropped or (head != self.position and not self._known):
            retry = RETRY_SECONDS
        if retry is not None:
            self._catch_up()
            self._known = self._known or self._registered()
            retry = retry if self._awaited() > 0 else None
        if dropped:
            self._evict(dropped)
            self.evicted += len(dropped)
        self.position = head
        if not self._stop.is_set():
            self.feed.wait(self.feed.at(head), IDLE_SECONDS if retry is None else retry)
        return None if retry is None else min(retry * 2, IDLE_SECONDS)

    def _read(self, position: int) -> tuple[int, list[str]]:
        """The position of the last event after `position` (the head, when it was
        read), and the items those events erased or redacted."""
        dropped: set[str] = set()
        while True:
            batch = self.log.notifications(position, PAGE)
            if not batch:
                return position, sorted(dropped)
            dropped.update(
                str(n.originator_id) for n in batch if n.topic.rsplit(".", 1)[-1] in DROPS
            )
            position = batch[-1].id
            if len(batch) < PAGE:
                return position, sorted(dropped)
