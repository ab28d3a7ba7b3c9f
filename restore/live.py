"""What a restore's checks read of the live store, named as a type.

A drill compares a scratch copy with the store that serves now, and the serving checks
(restore/serving.py) decide an item's state from the store's parts. They read a handful
of them: the log, the projections' engine, the ledger, the retention policy in force and
the clock. `LiveStore` says exactly which, so these modules depend on those parts and not
on the service that carries them (memory_ledger/api.py `MemoryService` is one; a test or
a tool can hand in anything that has them).

A restore and a drill also open a store of their own over the restored data: they are
given a `StoreOpener` (the composition root hands in `MemoryService`), so that restore/
never imports the layer that builds on it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_ledger.config import Settings
    from memory_ledger.crypto import MasterKey
    from memory_ledger.event_log import EventLog
    from memory_ledger.forgetting.requests import ForgetRequests
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.policy.retention import RetentionPolicy
    from memory_ledger.principal import Principal
    from memory_ledger.projections.events import Progress
    from memory_ledger.store_protocol import Store


class CatchesUp(Protocol):
    """The projections' runner, as far as a check needs it: brought up to the log."""

    def catch_up(self) -> Any: ...


class LiveStore(Protocol):
    """An open store, as restore/serving.py and restore/drill.py read it."""

    @property
    def settings(self) -> Settings: ...

    @property
    def log(self) -> EventLog: ...

    @property
    def ledger(self) -> LifecycleLedger: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def runner(self) -> CatchesUp: ...

    @property
    def retention(self) -> RetentionPolicy: ...

    @property
    def requests(self) -> ForgetRequests: ...

    @property
    def stores(self) -> Iterable[Store]: ...

    def clock(self) -> datetime: ...

    def for_principal(self, principal: Principal) -> Any:
        """A principal's view (memory_ledger/api.py `MemoryLedger`): `get` and `recall`."""


class OpenedStore(LiveStore, Protocol):
    """A store a restore or a drill opened itself: checked, rebuilt, then closed."""

    def rebuild(
        self, names: Sequence[str] | None = None, progress: Progress | None = None
    ) -> int: ...

    def compact(self) -> list[str]: ...

    def close(self) -> None: ...

    def __enter__(self) -> OpenedStore: ...

    def __exit__(self, *exc: object) -> None: ...


class StoreOpener(Protocol):
    """Opens the store `settings` name under `master` (`restoring`: while it is marked
    as being restored)."""

    def __call__(
        self, settings: Settings, master: MasterKey, *, restoring: bool = False
    ) -> OpenedStore: ...
