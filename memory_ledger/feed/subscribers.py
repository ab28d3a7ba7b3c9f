"""Subscribers that keep copies: stores of the data map whose receipt is their own ack.

A service that caches what it reads from the change feed holds copies we cannot reach.
It registers (`add`: a name, the namespaces it holds, the hours it has to acknowledge
an erasure) and from then on is a store like any other (`memory-ledger stores`): a
forget request touching one of its namespaces is `partial`, naming it
(`subscriber:<name>` / `awaiting_ack`), until the subscriber says it dropped the
targets (`ack`). Its acknowledgement is an `ack` entry in the ledger; the request is
then run again, and the subscriber's receipt is `acknowledged`. After the deadline the
request stays `partial` and named, and is shown as overdue. A retired subscriber's
pending acknowledgements end with an operator's `ack` entry marked `retired` (nothing
was confirmed, and the ledger says so), never silently.

Registrations and acknowledgements are ledger entries, read from the ledger each time:
a subscriber added or an ack recorded by another process counts at once, and both
outlive a restore of the store.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory_ledger.bounds import DEFAULT_DEADLINE_HOURS, MAX_DEADLINE_HOURS
from memory_ledger.errors import InvalidWrite, NotFound
from memory_ledger.identifiers import is_namespace, is_namespace_part
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.store_protocol import SUBSCRIBER_PREFIX, Evidence, Receipt

if TYPE_CHECKING:
    from memory_ledger.forgetting.requests import ForgetRequests

MAX_SUBSCRIBERS = 200
AWAITING = "awaiting_ack"
MAX_SETTLE = 5  # retries after an ack whose status another retry made stale
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,47}")


@dataclass(frozen=True)
class Subscriber:
    name: str
    namespaces: tuple[str, ...]
    deadline_hours: int
    added_by: str
    added_at: str
    every_namespace: bool = False

    @property
    def store_name(self) -> str:
        return f"{SUBSCRIBER_PREFIX}{self.name}"

    def holds(self, namespace: str) -> bool:
        """Whether it keeps copies of this namespace (a tenant covers all of its own)."""
        if self.every_namespace:
            return True
        return any(namespace == n or namespace.startswith(n + "/") for n in self.namespaces)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "namespaces": list(self.namespaces), "store": self.store_name}


def _parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class Subscribers:
    """The registered subscribers, and their acknowledgements, from the ledger."""

    def __init__(self, ledger: LifecycleLedger, local: str | None = None) -> None:
        self.ledger = ledger
        #: This host's own name as a subscriber (its vector index: hosts.py), if any.
        self.local = local

    def active(self) -> list[Subscriber]:
        found: dict[str, Subscriber] = {}
        kinds = (EntryType.SUBSCRIBER, EntryType.SUBSCRIBER_RETIRED)
        for entry in self.ledger.entries_of_type(*kinds):
            p = entry.payload
            if entry.entry_type is EntryType.SUBSCRIBER:
                found[p["name"]] = Subscriber(
                    p["name"],
                    tuple(p["namespaces"]),
                    int(p["deadline_hours"]),
                    p["added_by"],
                    entry.recorded_at,
                    bool(p.get("every_namespace", False)),
                )
            else:
                found.pop(p["name"], None)
        return list(found.values())

    def get(self, name: str) -> Subscriber:
        for subscriber in self.active():
            if subscriber.name == name:
                return subscriber
        raise NotFound(f"no subscriber named {name} is registered")

    def add(
        self,
        name: str,
        namespaces: Sequence[str],
        *,
        added_by: str,
        deadline_hours: int = DEFAULT_DEADLINE_HOURS,
        every_namespace: bool = False,
    ) -> Subscriber:
        if not (isinstance(name, str) and _NAME.fullmatch(name)):
            raise InvalidWrite(
                "a subscriber's name is lower-case letters, digits, _ and -, starting with a "
                "letter, at most 48; nothing was added"
            )
        if isinstance(deadline_hours, bool) or not isinstance(deadline_hours, int):
            raise InvalidWrite("deadline_hours must be a whole number of hours")
        if not 1 <= deadline_hours <= MAX_DEADLINE_HOURS:
            raise InvalidWrite(f"deadline_hours must be from 1 to {MAX_DEADLINE_HOURS}")
        spaces = tuple(dict.fromkeys(namespaces))
        if not spaces and not every_namespace:
            raise InvalidWrite("a subscriber holds at least one namespace; nothing was added")
        for namespace in spaces:
            if not (is_namespace(namespace) or is_namespace_part(namespace)):
                raise InvalidWrite(
                    f"{namespace!r} is not a namespace (tenant/user) or a tenant; nothing was added"
                )
        current = self.active()
        if any(s.name == name for s in current):
            raise InvalidWrite(f"a subscriber named {name} is registered; nothing was added")
        if len(current) >= MAX_SUBSCRIBERS:
            raise InvalidWrite(f"at most {MAX_SUBSCRIBERS} subscribers can be registered")
        payload = {
            "name": name,
            "namespaces": list(spaces),
            "deadline_hours": deadline_hours,
            "added_by": added_by,
            "every_namespace": every_namespace,
        }
        entry_id = f"sub-{name}-{len(self._registrations(name)) + 1}"
        entry = self.ledger.append(entry_id, EntryType.SUBSCRIBER, payload)  # validates it
        return Subscriber(
            name, spaces, deadline_hours, added_by, entry.recorded_at, every_namespace
        )

    def _registrations(self, name: str) -> list[str]:
        entries = self.ledger.entries_of_type(EntryType.SUBSCRIBER)
        return [e.request_id for e in entries if e.payload["name"] == name]

    def retire(self, requests: ForgetRequests, name: str, *, retired_by: str) -> list[str]:
        """Retire a subscriber: its pending acknowledgements end with an operator's
        `ack` entry marked `retired`, and those requests are run again (now without
        it). Returns the request ids so ended."""
        subscriber = self.get(name)
        pending = self.pending(requests, subscriber)
        entry_id = self._registrations(name)[-1]
        self.ledger.append(
            entry_id, EntryType.SUBSCRIBER_RETIRED, {"name": name, "retired_by": retired_by}
        )
        for request_id, targets in pending:
            self._record_ack(subscriber, request_id, targets, retired_by, retired=True)
            self.settle(requests, request_id)
        return [request_id for request_id, _ in pending]

    def ack(self, requests: ForgetRequests, name: str, request_id: str) -> dict[str, Any]:
        """The subscriber dropped the request's targets: record it, and run the request
        again so that its status follows (idempotent: a second ack records nothing)."""
        subscriber = self.get(name)
        report = requests.report(request_id)  # NotFound for an unknown request
        if not subscriber.holds(report.namespace):
            raise InvalidWrite(
                f"subscriber {name} does not hold {report.namespace}: it has nothing to "
                f"acknowledge for {request_id}"
            )
        recorded = self.acked(subscriber, request_id) is None
        if recorded:
            self._record_ack(subscriber, request_id, len(report.all_targets), name)
        status = self.settle(requests, request_id) if recorded else report.status
        return {
            "subscriber": name,
            "request_id": request_id,
            "recorded": recorded,
            "status": status,
        }

    def settle(self, requests: ForgetRequests, request_id: str) -> str:
        """Run the request again after an ack, and again while its latest status still
        waits for a subscriber whose ack is recorded: acks of several subscribers run
        their retries at once, and the one finishing last may have read the acks before
        the others were written. The process that writes a status checks it afterwards,
        so the last status written is never a stale one."""
        status = requests.recheck(request_id).status
        for _ in range(MAX_SETTLE):
            report = requests.report(request_id)
            acked = {
                f"{SUBSCRIBER_PREFIX}{e.payload['subscriber']}"
                for e in self.ledger.entries(request_id)
                if e.entry_type is EntryType.ACK
            }
            if report.status != "partial" or not acked & set(report.failed_stores):
                return report.status
            status = requests.recheck(request_id).status
        return status

    def _record_ack(
        self, subscriber: Subscriber, request_id: str, targets: int, by: str, retired: bool = False
    ) -> None:
        payload = {"subscriber": subscriber.name, "targets": targets, "by": by, "retired": retired}
        self.ledger.append(request_id, EntryType.ACK, payload)

    def acked(self, subscriber: Subscriber, request_id: str) -> str | None:
        """When this subscriber's ack of the request was recorded (None: not yet)."""
        for entry in self.ledger.entries(request_id):
            if entry.entry_type is EntryType.ACK and entry.payload["subscriber"] == subscriber.name:
                return entry.recorded_at
        return None

    def pending(self, requests: ForgetRequests, subscriber: Subscriber) -> list[tuple[str, int]]:
        """(request id, targets) of unfinished requests waiting for this subscriber."""
        out = []
        for request_id, status in self.ledger.latest_statuses().items():
            if status != "partial":
                continue
            report = requests.report(request_id)
            if subscriber.store_name in report.failed_stores:
                out.append((request_id, len(report.all_targets)))
        return out

    def waiting(
        self,
        report: Any,
        now: datetime | None = None,
        active: Sequence[Subscriber] | None = None,
    ) -> list[dict[str, Any]]:
        """The subscribers an unfinished request waits for: name, deadline, overdue.
        `active`: the registered subscribers, when the caller read them for many."""
        at = now or datetime.now(UTC)
        out = []
        for subscriber in self.active() if active is None else active:
            if report.status == "partial" and subscriber.store_name in report.failed_stores:
                deadline = self.deadline(subscriber, report.request_id)
                out.append(
                    {
                        "subscriber": subscriber.name,
                        "deadline": deadline.isoformat(),
                        "overdue": at > deadline,
                    }
                )
        return out

    def deadline(self, subscriber: Subscriber, request_id: str) -> datetime:
        """The request's first entry's time plus the subscriber's deadline."""
        entries = self.ledger.entries(request_id)
        started = _parse(entries[0].recorded_at) if entries else datetime.now(UTC)
        return started + timedelta(hours=subscriber.deadline_hours)

    def stores(self) -> Iterator[SubscriberStore]:
        for subscriber in self.active():
            yield SubscriberStore(subscriber, self)


class SubscriberStore:
    """A registered subscriber as a store of the data map: its receipt for a request is
    its acknowledgement, or `awaiting_ack` (failed) until the acknowledgement arrives."""

    holds = "copies kept by a subscriber of the change feed, outside our files"

    def __init__(self, subscriber: Subscriber, subscribers: Subscribers) -> None:
        self.subscriber = subscriber
        self.subscribers = subscribers
        self.name = subscriber.store_name

    def erase_for(self, request_id: str, namespace: str, item_ids: Sequence[str]) -> Receipt:
        if not self.subscriber.holds(namespace):
            return Receipt(self.name, "not_held", len(item_ids), "ok", {})
        acked = self.subscribers.acked(self.subscriber, request_id)
        if self.subscriber.name == self.subscribers.local:
            # This host: its vector index dropped them in this fan-out (vector_index), and
            # says so in the ledger, where a retry run by another host finds it.
            if acked is None:
                name = self.subscriber.name
                self.subscribers._record_ack(self.subscriber, request_id, len(item_ids), name)
            return Receipt(self.name, "dropped_here", len(item_ids), "ok", {})
        if acked is not None:
            return Receipt(self.name, "acknowledged", len(item_ids), "ok", {})
        deadline = self.subscribers.deadline(self.subscriber, request_id)
        evidence: dict[str, int | bool | str] = {
            "deadline_epoch_s": int(deadline.timestamp()),
            "overdue": datetime.now(UTC) > deadline,
        }
        return Receipt(self.name, AWAITING, len(item_ids), "failed", evidence)

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        """Without a request there is nothing to wait for: the feed tells it."""
        return Receipt(self.name, "notified", len(item_ids), "ok", {})

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        # Its copies are outside our reach: its acknowledgement is the only evidence,
        # and it is in the ledger (this store's receipt), not checked here.
        return Evidence(self.name, True, {"checked": False})

    def at_rest(self) -> Iterator[bytes]:
        return iter(())  # nothing kept here: the subscriber holds its copies itself

    def rebuild(self) -> int:
        return 0
