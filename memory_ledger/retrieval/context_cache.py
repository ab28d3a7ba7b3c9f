"""A small in-process cache of built contexts, registered as a store.

An agent often asks the same question twice in a turn (planning, then answering), and a
built context costs an embedding and two index lookups. The cache holds decrypted text,
so it is a place where user data lives: it is registered in the data map, a forget
request evicts every entry that served a target, and `verify_absent` proves none is
left. Entries live only as long as the log does not move: the first lookup at a newer
log position drops every older entry, so a write or an erasure by another process
clears this process's cache at its next recall, and a forget run here evicts at once.
An entry also ends when the first of its items expires under the retention policy, and
the policy in force is part of its key.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar

from memory_ledger.retrieval.state_files import StateFiles
from memory_ledger.retrieval.usable import RecallStates
from memory_ledger.store_protocol import Evidence, Receipt


class _Served(Protocol):
    @property
    def item_id(self) -> str: ...


class Cached(Protocol):
    """A built context as the cache reads it (memory_ledger/retrieval/context.py
    `Context`, which builds on this module): when it expires, and what it served."""

    @property
    def valid_until(self) -> str | None: ...

    @property
    def items(self) -> Sequence[_Served]: ...


C = TypeVar("C", bound=Cached)

MAX_ENTRIES = 256


class ContextCache(Generic[C]):
    """Built contexts by (namespace, request, policy) at one log position, and beside
    them the namespaces' recall states (`usable.RecallStates`: clear attributes only),
    which an erasure evicts with the contexts."""

    def __init__(self, max_entries: int = MAX_ENTRIES, files: StateFiles | None = None) -> None:
        self.states = RecallStates(files=files)
        self._entries: OrderedDict[Hashable, C] = OrderedDict()
        self._max = max_entries
        self._position = -1
        self._lock = threading.Lock()

    def _at(self, position: int) -> bool:
        """Whether the cache can hold entries of `position`. A newer one drops every
        entry, nothing cached being current. An older one (a request that read the
        position before another's newer lookup; or a log replaced under this process)
        drops them too, and keeps nothing: what it built may hold an item erased since,
        already evicted here."""
        if position < self._position:
            self._entries.clear()
            return False
        if position != self._position:
            self._entries.clear()
            self._position = position
        return True

    def get(self, position: int, key: Hashable, now: str) -> C | None:
        """The context cached for `key` at this log position, unless one of its items
        has expired since (`now`: canonical time): expiry moves without the log."""
        with self._lock:
            if not self._at(position):
                return None
            found = self._entries.get(key)
            if found is not None and found.valid_until is not None and now >= found.valid_until:
                del self._entries[key]
                return None
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, position: int, key: Hashable, context: C) -> None:
        """Keep a context built at `position`; one built at a position the cache has
        moved past is not kept (it may hold an item erased since, evicted already)."""
        with self._lock:
            if not self._at(position):
                return
            self._entries[key] = context
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def evict(self, item_ids: Sequence[str]) -> int:
        """Drop every context that served one of these items, and the items from the
        recall states; returns the contexts dropped."""
        self.states.evict(item_ids)
        wanted = set(item_ids)
        with self._lock:
            stale = [k for k, c in self._entries.items() if wanted & {i.item_id for i in c.items}]
            for key in stale:
                del self._entries[key]
            return len(stale)

    def holding(self, item_ids: Sequence[str]) -> int:
        """Contexts that served one of these items (the recall states: `states.holding`)."""
        wanted = set(item_ids)
        with self._lock:
            return sum(1 for c in self._entries.values() if wanted & {i.item_id for i in c.items})

    def clear(self) -> None:
        """Drop the built contexts (the recall states stay: they hold no content and are
        kept current by log position)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class ContextCacheStore:
    """The cache in the data map. Per process: the process that runs a request evicts
    its entries here; another process drops its own at its next recall, because the
    erasure moved the log position."""

    name = "context_cache"
    holds = (
        "recently built recall contexts (decrypted text), in this process's memory, and "
        "each namespace's recall state (recall/, sealed, no content; removed by every erasure)"
    )

    def __init__(self, cache: ContextCache) -> None:
        self.cache = cache

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        evicted = self.cache.evict(item_ids)
        evidence = self.verify_absent(item_ids)
        return Receipt(
            self.name,
            "evicted",
            len(item_ids),
            "ok" if evidence.absent else "failed",
            {"entries_evicted": evicted, **evidence.detail},
        )

    def at_rest(self) -> Iterator[bytes]:
        """The recall states' files (sealed attributes, no content); the contexts live in
        this process's memory only."""
        files = self.cache.states.files
        for path in files.files() if files is not None else ():
            with contextlib.suppress(FileNotFoundError):
                yield path.read_bytes()

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        """None of the items in memory, nor in any recall state file (each file opened and
        read: a recall after the erasure may have written one again, without them)."""
        cache = self.cache
        left, attributes = cache.holding(item_ids), cache.states.holding(item_ids)
        files = cache.states.files
        in_files, unreadable = files.holding(set(item_ids)) if files is not None else (0, 0)
        return Evidence(
            self.name,
            left == 0 and attributes == 0 and in_files == 0,
            {
                "entries_left": left,
                "recall_state_entries_left": attributes,
                "recall_state_file_entries_left": in_files,
                "recall_state_files_unreadable": unreadable,
            },
        )

    def rebuild(self) -> int:
        self.cache.clear()  # a cache rebuilds itself on demand
        self.cache.states.clear()
        if self.cache.states.files is not None:
            self.cache.states.files.remove_all()
        return 0
