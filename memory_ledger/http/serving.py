"""The service a server process serves, and the gate a restore closes.

A restore replaces the store under the running process: every request in flight must
end before the store is closed, and none may start until the restored store has been
replayed, verified and opened again. The gate counts the requests in flight; while it
is closed they are refused with 503 (`/v1/ready` says `restoring`), never served from
a store that may still hold what was erased after the backup was taken.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.errors import ConfigurationError, InvalidTransition
from memory_ledger.operations import Operations
from memory_ledger.principal import Principal

T = TypeVar("T")
log = logging.getLogger("memory_ledger.http")

#: How long a restore waits for the requests in flight to end before it gives up.
DRAIN_SECONDS = 30.0


class Restoring(ConfigurationError):
    """The store is being restored: nothing is served until it is verified (503)."""


class Serving:
    """The open service, swapped for a new one by `replace`."""

    def __init__(self, service: MemoryService, reopen: Callable[[], MemoryService]) -> None:
        self.service = service
        self._reopen = reopen
        self._state = threading.Condition()
        self._in_flight = 0
        self.restoring = False
        self._running = False
        self._open = True
        #: Set once the embedder has answered one embed (`warm_up`): until then a
        #: `context` would first load the model (seconds), so `/v1/ready` says warming.
        self.warm = threading.Event()
        #: Why the warm-up failed, if it did (then `/v1/ready` stays 503).
        self.warm_error: str | None = None
        self._following = False  # `follow_erasures` was asked for: again after a restore

    @property
    def operations(self) -> Operations:
        """The store-wide operations of the service served now."""
        return self.service.operations

    def ledger_for(self, principal: Principal) -> MemoryLedger:
        """The ledger of one principal, on the service served now."""
        return self.service.for_principal(principal)

    def warm_up(self) -> threading.Thread:
        """Load the embedder and embed once, in the background: the server listens at
        once (`/v1/health` answers), and is ready when a `context` answers at full speed."""
        thread = threading.Thread(target=self._warm, name="embedder-warm-up", daemon=True)
        thread.start()
        return thread

    def _warm(self) -> None:
        try:
            self.service.operations.warm_up()
        except Exception as exc:  # any plug-in's failure: reported by /v1/ready, logged
            self.warm_error = f"{type(exc).__name__}: {exc}"
            log.error("the embedder did not load: %s", self.warm_error)
            return
        self.warm.set()

    def follow_erasures(self) -> None:
        """On PostgreSQL, drop this process's own copies of what other processes erase,
        and acknowledge them (memory_ledger/feed/follower.py), on the service served now
        and on each one a restore opens."""
        self._following = True
        self.service.operations.follow_erasures()

    @contextmanager
    def request(self) -> Iterator[None]:
        """One request served: refused while a restore holds the gate."""
        with self._state:
            if self.restoring:
                raise Restoring("the store is being restored; try again when /v1/ready is 200")
            self._in_flight += 1
        try:
            yield
        finally:
            with self._state:
                self._in_flight -= 1
                self._state.notify_all()

    def replace(self, run: Callable[[], T], drain_seconds: float = DRAIN_SECONDS) -> T:
        """Close the gate, wait for the requests in flight, close the service, `run`
        (the restore), then open the store again and reopen the gate. If the store
        cannot be opened (the restore failed half-way, its mark still set), the gate
        stays closed and the next `replace` (running the restore again) finishes it."""
        with self._state:
            if self._running:
                raise InvalidTransition("a restore is already running")
            self._running = True
            if not self.restoring:
                self.restoring = True
                if not self._state.wait_for(lambda: self._in_flight == 0, timeout=drain_seconds):
                    self.restoring = self._running = False
                    raise Restoring(
                        f"requests still running after {drain_seconds:.0f} s; nothing was restored"
                    )
        try:
            if self._open:
                self.service.close()
                self._open = False
            result = run()
        finally:
            try:
                self.service = self._reopen()
            except ConfigurationError:
                pass  # still marked restoring: the gate stays closed until a re-run
            else:
                self._open = True
                if self._following:
                    self.service.operations.follow_erasures()
            with self._state:
                self._running = False
                self.restoring = not self._open
        return result

    def close(self) -> None:
        if self._open:
            self.service.close()
            self._open = False
