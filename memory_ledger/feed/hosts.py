"""Every host's own vector index is a subscriber (PostgreSQL).

On PostgreSQL every host keeps its vector index in its own data directory, and drops
an erased item's vectors only when it next catches up with the log; the forget's own
receipt covers only the host that ran it. So a host that holds an index registers as
a subscriber of every namespace (`host-<id>`, its id kept in `DATA_DIR/host.json`), and
acknowledges a request once its index has applied the request's tombstones (at its
next catch-up; a server catches up as soon as the log shows an erasure:
memory_ledger/feed/follower.py). Until every registered host has, the request is
`partial`, naming the hosts still to catch up: a host that is down is named, never
assumed done. The host
that runs a forget drops its own vectors in the forget itself, so its own receipt is
`ok` at once. A host taken out of service is retired like any subscriber (`subscribers
retire host-...`), which ends its pending acknowledgements with an operator's receipt.

A host registers when its index first holds vectors, not when a process merely opens
the store: a CLI run that only files a forget keeps no copies and waits for nobody.
SQLite has one host, whose index the forget itself erases: nothing registers there.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from memory_ledger.errors import ConfigurationError, NotFound
from memory_ledger.ledger import EntryType
from memory_ledger.projections.vector_files import write_atomic

if TYPE_CHECKING:
    from memory_ledger.config import Settings
    from memory_ledger.feed.subscribers import Subscribers
    from memory_ledger.forgetting.requests import ForgetRequests
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.projections.vector_index import VectorIndex

HOST_FILE = "host.json"
HOST_DEADLINE_HOURS = 1


def host_name(data_dir: Path) -> str:
    """This host's subscriber name, made once per data directory."""
    path = data_dir / HOST_FILE
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("host")
    except FileNotFoundError:
        found = None
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path} is unreadable: {exc}") from None
    if isinstance(found, str) and found.startswith("host-"):
        return found
    name = f"host-{secrets.token_hex(6)}"
    data_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(data_dir, HOST_FILE, json.dumps({"host": name}).encode())
    return name


def catch_up_vectors(
    vectors: VectorIndex,
    settings: Settings,
    subscribers: Subscribers,
    ledger: LifecycleLedger,
    requests: ForgetRequests,
) -> int:
    """Catch this host's vector index up; on PostgreSQL, then acknowledge every request
    waiting for this host whose tombstones the index has applied (registering the host
    first, once it holds vectors). Returns the notifications read."""
    read = vectors.catch_up()
    if settings.postgres is None:
        return read
    status = vectors.status()
    name = str(subscribers.local)
    if ensure_registered(subscribers, name, holds_copies=status["rows"] > 0):
        acknowledge_applied(subscribers, ledger, requests, name, status["position"])
    return read


def ensure_registered(
    subscribers: Subscribers, name: str, *, holds_copies: bool, added_by: str = "host"
) -> bool:
    """Whether `name` is registered as a subscriber of every namespace, registering it
    now if it holds copies. False: it holds none and is not registered."""
    try:
        subscribers.get(name)
        return True
    except NotFound:
        if not holds_copies:
            return False
    subscribers.add(
        name, [], every_namespace=True, added_by=added_by, deadline_hours=HOST_DEADLINE_HOURS
    )
    return True


def acknowledge_applied(
    subscribers: Subscribers,
    ledger: LifecycleLedger,
    requests: ForgetRequests,
    name: str,
    position: int,
) -> list[str]:
    """Ack (and run again) every unfinished request waiting for subscriber `name` whose
    tombstones lie at or before `position`, the log position its copy has applied."""
    subscriber = subscribers.get(name)
    acked = []
    for request_id, status in ledger.latest_statuses().items():
        if status != "partial":
            continue
        if subscriber.store_name not in requests.report(request_id).failed_stores:
            continue
        entries = ledger.entries(request_id)
        placed = [e.payload["position"] for e in entries if e.entry_type is EntryType.TOMBSTONE]
        if placed and max(placed) > position:
            continue  # not applied yet: a later catch-up acknowledges it
        if subscribers.acked(subscriber, request_id) is None:
            ledger.append(
                request_id,
                EntryType.ACK,
                {"subscriber": name, "targets": 0, "by": name, "retired": False},
            )
        subscribers.settle(requests, request_id)
        acked.append(request_id)
    return acked


#: A request's statuses while its fan-out has not ended: it may yet wait for this host.
RUNNING = frozenset({"pending"})


def awaiting(
    subscribers: Subscribers, ledger: LifecycleLedger, requests: ForgetRequests, name: str
) -> int:
    """Requests that may still wait for subscriber `name`: those `partial` naming it,
    and those whose fan-out is still running (they turn `partial` when it ends, after
    this host may have applied their tombstones already). 0 when `name` is not
    registered: nothing waits for a host that holds no copies."""
    try:
        subscriber = subscribers.get(name)
    except NotFound:
        return 0
    waiting = 0
    for request_id, status in ledger.latest_statuses().items():
        if status in RUNNING:
            waiting += 1
        elif status == "partial":
            waiting += subscriber.store_name in requests.report(request_id).failed_stores
    return waiting


def registered(subscribers: Subscribers, name: str) -> bool:
    """Whether `name` is a registered subscriber now."""
    try:
        subscribers.get(name)
    except NotFound:
        return False
    return True
