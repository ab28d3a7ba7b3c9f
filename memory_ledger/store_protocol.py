"""What every place that holds user data answers: the data map's protocol.

A forget request fans out to every registered store and waits for each one's receipt;
`verify` asks each store for evidence that the targets are absent. The protocol, the
receipt and evidence it returns, and the registry that orders the stores are here, in a
module that imports nothing of the stores themselves: a store anywhere in the package
(a projection, the context cache, the plans, the backups, a subscriber) implements it
without importing the data map that lists it (memory_ledger/stores.py).

Receipts and evidence carry ids, counts and codes only: never content.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from memory_ledger.write_policy import canonical_time

#: The data map's name for a registered subscriber (memory_ledger/feed/subscribers.py).
SUBSCRIBER_PREFIX = "subscriber:"


@dataclass(frozen=True)
class Evidence:
    """What a store found when asked whether targets are absent."""

    store: str
    absent: bool
    detail: dict[str, int | bool | str] = field(default_factory=dict)


@dataclass(frozen=True)
class Receipt:
    """What a store did for a request, and what it checked afterwards."""

    store: str
    action: str
    targets: int
    status: str  # ok | failed
    evidence: dict[str, int | bool | str] = field(default_factory=dict)
    at: str = field(default_factory=lambda: canonical_time(datetime.now(UTC)))
    #: Which try of this store's action on the request (a retry after `partial` is 2).
    attempt: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Store(Protocol):
    """One place that holds user data.

    `erase` must be idempotent (a retry after a crash or a failure repeats it safely),
    `verify_absent` must not rely on the store's own bookkeeping of what it erased,
    `rebuild` must never bring back an erased item, and `at_rest` must give everything
    the store keeps outside process memory, as stored: the contract suite checks that
    it holds no personal content in clear (sealed everywhere).
    """

    name: str
    holds: str

    def erase(self, item_ids: Sequence[str]) -> Receipt: ...

    def at_rest(self) -> Iterator[bytes]: ...

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence: ...

    def rebuild(self) -> int: ...


@runtime_checkable
class RedactingStore(Store, Protocol):
    """A store that keeps rewritten items (a redaction) rather than dropping them.

    `redact` runs after the items were rewritten in the log: the store refreshes its
    copies from the log and returns evidence that none still holds `spans` (the removed
    text, in memory only; empty on a resumed request, which can check only that the
    copies are refreshed). A store without it drops its copies (`erase`) and derives
    them again from the rewritten log, as the vector index and the cache do."""

    def redact(self, item_ids: Sequence[str], spans: Sequence[str]) -> Receipt: ...


class StoreRegistry:
    """The ordered data map. Order matters: the log and keys first, copies after."""

    def __init__(self) -> None:
        self._stores: dict[str, Store] = {}
        #: Stores whose set changes while a process runs (subscribers, registered in
        #: the ledger by any process): asked each time the data map is read.
        self._providers: list[Callable[[], Iterable[Store]]] = []

    def register(self, store: Store) -> None:
        if not isinstance(store, Store):
            raise TypeError(f"{store!r} does not implement the Store protocol")
        if store.name in self._stores:
            raise ValueError(f"a store named {store.name!r} is already registered")
        self._stores[store.name] = store

    def add_provider(self, provider: Callable[[], Iterable[Store]]) -> None:
        """Stores read afresh at every use, after the registered ones."""
        self._providers.append(provider)

    def _all(self) -> dict[str, Store]:
        found = dict(self._stores)
        for provider in self._providers:
            for store in provider():
                found.setdefault(store.name, store)
        return found

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._all().values()))

    def names(self) -> list[str]:
        return list(self._all())

    def get(self, name: str) -> Store:
        return self._all()[name]
