"""Every host's own vector index is a subscriber (PostgreSQL).

On PostgreSQL every host keeps its vector index in its own data directory, and drops
an erased item's vectors only when it next catches up with the log; the forget's own
receipt covers only the host that ran it. So a host that holds an index registers as
a subscriber of every namespace (`host-<id>`, its id kept in `DATA_DIR/host.json`), and
acknowledges a request once its index has applied the request's tombstones (at its
next catch-up). Until every registered host has, the request is `partial`, naming the
hosts still to catch up: a host that is down is named, never assumed done. The host
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
from memory_ledger.restoring import write_atomically
from projections.events import decode_clear

if TYPE_CHECKING:
    from memory_ledger.api import MemoryService

HOST_FILE = "host.json"
HOST_DEADLINE_HOURS = 1
_BATCH = 1000


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
    write_atomically(path, json.dumps({"host": name}).encode())
    return name


def catch_up_vectors(service: MemoryService) -> int:
    """Catch this host's vector index up; on PostgreSQL, then acknowledge every request
    whose tombstones it has just applied (registering the host first, once it holds
    vectors). Returns the notifications read."""
    before = service.vectors.status()["position"]
    read = service.vectors.catch_up()
    if service.settings.postgres is None:
        return read
    status = service.vectors.status()
    if status["rows"] == 0 and not _registered(service):
        return read  # no copies here: nothing to wait for
    if not _registered(service):
        service.subscribers.add(
            service.subscribers.local,  # type: ignore[arg-type]
            [],
            every_namespace=True,
            added_by="host",
            deadline_hours=HOST_DEADLINE_HOURS,
        )
    acknowledge_applied(service, before, status["position"])
    return read


def _registered(service: MemoryService) -> bool:
    try:
        service.subscribers.get(str(service.subscribers.local))
    except NotFound:
        return False
    return True


def acknowledge_applied(service: MemoryService, before: int, after: int) -> list[str]:
    """Ack (and run again) every unfinished request waiting for this host whose
    tombstones lie in (before, after]: the index has dropped their vectors."""
    name = str(service.subscribers.local)
    subscriber = service.subscribers.get(name)
    requests: set[str] = set()
    position = before
    while position < after:
        batch = service.log.notifications(position, min(_BATCH, after - position))
        if not batch:
            break
        for event in decode_clear(service.log, batch):
            if event.name == "Erased" and event.attrs.get("request_id"):
                requests.add(str(event.attrs["request_id"]))
        position = batch[-1].id
    acked = []
    statuses = service.ledger.latest_statuses()
    for request_id in sorted(requests):
        if statuses.get(request_id) != "partial":
            continue
        if subscriber.store_name not in service.requests.report(request_id).failed_stores:
            continue
        if service.subscribers.acked(subscriber, request_id) is None:
            service.ledger.append(
                request_id,
                EntryType.ACK,
                {"subscriber": name, "targets": 0, "by": name, "retired": False},
            )
        service.requests.resume(request_id)
        acked.append(request_id)
    return acked
