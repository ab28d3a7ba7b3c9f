"""The change feed: every update of the store, in log order, from a resumable cursor.

A notice is derived from one event of the log (memory recorded, fact or preference
changed, suppressed, unsuppressed, redacted, erased, expired), plus a `summary_rebuilt`
notice after each event that changes a namespace's facts or preferences, and a
`restore_completed` notice where a restore reopened the store. Each notice carries its
`cursor`; reading `after` a cursor gives what follows it, so a consumer that stores
the cursor of what it has processed resumes where it left off after a restart.
Delivery is at least once: a consumer killed before it stored a cursor gets those
notices again, and makes its handling idempotent by `event_id`.

What a notice holds:
- ids, kinds, codes and times for everyone: `type`, `namespace`, `item_id`, `kind`,
  `origin` and `writer` (so a subscriber can skip its own writes), and for erasures
  the `request_id` to acknowledge and the `reason` (a basis code). Never content.
- `content` (the opened fields of a record, change or redaction) only when the feed is
  read as a registered subscriber that holds the notice's namespace.

A cursor is `<epoch>.<position>.<part>`. The epoch changes when the store is restored
from a backup: the log positions after a restore are not the ones a consumer saw
before it, and what a consumer kept may include writes the restore lost. A cursor of
another epoch is refused (`CursorGone`), saying how to resynchronise: take
`snapshot(namespace)` (the namespace's live items and the cursor to continue from).

Waiting for new events: PostgreSQL wakes waiting consumers with LISTEN/NOTIFY (a
statement trigger on the events table, created on first use); SQLite is polled.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Engine, select

from memory_ledger.errors import CursorGone, InvalidWrite
from memory_ledger.event_log import ERASED, EventLog
from memory_ledger.feed.subscribers import Subscriber, Subscribers
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.events import ProjectedEvent, decode_clear
from memory_ledger.times import canonical_time

EPOCH = "feed_epoch"
EPOCH_START = "feed_epoch_start"  # "<position> <time>": where a restore reopened the store
CURSOR_PREFIX = "feed_cursor:"
MAX_READ = 1000
POLL_SECONDS = 0.05
EXPIRY_BASES = ("retention_expiry", "session_end")
_CHANGED = {"fact": "fact_changed", "preference": "preference_changed"}
_TYPES = {
    "Recorded": "memory_recorded",
    "Suppressed": "item_suppressed",
    "Unsuppressed": "item_unsuppressed",
    "Redacted": "item_redacted",
}
_SUMMARY_INPUTS = ("fact", "preference")
_CARRY_CONTENT = ("Recorded", "Superseded", "Redacted")
_EVENT, _SUMMARY, _RESTORE = 0, 1, 2  # a cursor's part: what follows an event


@dataclass(frozen=True)
class Notice:
    cursor: str
    event_id: str
    type: str
    at: str
    namespace: str | None = None
    item_id: str | None = None
    kind: str | None = None
    origin: str | None = None
    writer: str | None = None
    request_id: str | None = None
    reason: str | None = None
    content: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Page:
    notices: list[Notice]
    cursor: str  # where to read on from (past every event read, notices or not)
    caught_up: bool


class ChangeFeed:
    """Reads the feed of one store; `subscriber` names who reads (content is theirs to
    see only for the namespaces they hold)."""

    def __init__(
        self,
        log: EventLog,
        engine: Engine,
        subscribers: Subscribers,
        catch_up: Callable[[], object],
    ) -> None:
        self.log = log
        self.engine = engine
        self.subscribers = subscribers
        self.catch_up = catch_up  # the catalog, before a snapshot reads it
        self._first: dict[UUID, tuple[str, str]] = {}  # item -> (namespace, kind): fixed
        self._listener: Any = None  # PostgreSQL: one LISTEN connection, opened on first wait

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    # -- cursors -----------------------------------------------------------------------

    def epoch(self) -> str:
        found = self.log.meta(EPOCH)
        if found is None:  # the first reader of a new store names its epoch
            self.log.set_meta({EPOCH: f"ep{secrets.token_hex(6)}"}, replace=False)
            found = self.log.meta(EPOCH)
        assert found is not None
        return found

    def head(self) -> str:
        """The cursor of everything there is now."""
        return self.at(self.log.max_position())

    def at(self, position: int) -> str:
        """The cursor of everything up to log position `position` (where a copy kept in
        step with the log stands: memory_ledger/feed/follower.py)."""
        return _cursor(self.epoch(), position, _RESTORE)

    def _parse(self, cursor: str | None, epoch: str) -> tuple[int, int]:
        if cursor is None:
            return 0, _RESTORE
        parts = cursor.split(".") if isinstance(cursor, str) else []
        if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
            raise InvalidWrite("a feed cursor is <epoch>.<position>.<part>, as a notice gives it")
        if parts[0] != epoch:
            raise CursorGone(
                f"the feed cannot continue from cursor {cursor}: the store was restored from "
                "a backup since (or the cursor is another store's). Resynchronise: drop what "
                "you keep of each namespace, take its snapshot (`memory-ledger feed "
                "--snapshot NAMESPACE`), and continue from the cursor the snapshot gives"
            )
        return int(parts[1]), int(parts[2])

    def commit(self, subscriber: str, cursor: str) -> None:
        """Store a registered subscriber's cursor with the store (so it need not keep one)."""
        self.subscribers.get(subscriber)
        self._parse(cursor, self.epoch())
        self.log.set_meta({f"{CURSOR_PREFIX}{subscriber}": cursor})

    def committed(self, subscriber: str) -> str | None:
        return self.log.meta(f"{CURSOR_PREFIX}{subscriber}")

    # -- reading -----------------------------------------------------------------------

    def read(
        self, after: str | None = None, *, subscriber: str | None = None, limit: int = 500
    ) -> Page:
        """The notices after `after`, from at most `limit` events."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_READ:
            raise InvalidWrite(f"limit must be from 1 to {MAX_READ}")
        epoch = self.epoch()
        position, part = self._parse(after, epoch)
        reader = self.subscribers.get(subscriber) if subscriber is not None else None
        # An event's own notice, its summary notice and a restore's share its position:
        # a cursor short of the last part resumes inside it, so that event is read again.
        from_position = position - 1 if part < _RESTORE and position > 0 else position
        batch = self.log.notifications(from_position, limit)
        events = decode_clear(self.log, batch)
        self._learn(events)
        contents = self._contents(events, reader)
        restored = self.log.meta(EPOCH_START)
        restored_at, _, restored_time = (restored or "").partition(" ")
        notices: list[Notice] = []
        for event in events:
            notices += self._notices(epoch, event, contents.get(event.position))
            if restored_at == str(event.position):
                notices.append(_restored(epoch, event.position, restored_time))
        notices = [n for n in notices if _order(n.cursor) > (position, part)]
        next_cursor = _cursor(epoch, events[-1].position, _RESTORE) if events else after
        return Page(notices, next_cursor or self.head(), len(batch) < limit)

    def subscribe(
        self,
        after: str | None = None,
        *,
        subscriber: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[Notice]:
        """Every notice after `after`, then new ones as they are committed, until
        `timeout` seconds pass with nothing new (None: wait forever)."""
        cursor = after
        idle_since = time.monotonic()
        while True:
            page = self.read(cursor, subscriber=subscriber)
            yield from page.notices
            cursor = page.cursor
            if page.notices:
                idle_since = time.monotonic()
            if not page.caught_up:
                continue
            left = None if timeout is None else timeout - (time.monotonic() - idle_since)
            if left is not None and left <= 0:
                return
            self.wait(cursor, left)

    def wait(self, cursor: str | None, timeout: float | None) -> None:
        """Return when the log has grown past `cursor`, or after `timeout` seconds (a
        spurious early return is allowed: the caller reads again)."""
        position = self._parse(cursor, self.epoch())[0] if cursor else 0
        if self.log.settings.postgres is not None:
            self._wait_for_notify(position, timeout)
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.log.max_position() <= position:
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(POLL_SECONDS)

    def _channel(self) -> str:
        settings = self.log.settings
        assert settings.postgres is not None
        return f"memory_ledger_feed_{settings.postgres.schema}"

    def wake(self) -> None:
        """Wake every consumer waiting on this store's channel (PostgreSQL; a spurious
        wake-up, which `wait` allows): how a follower being stopped leaves its wait at
        once. Nothing on SQLite, whose waits poll."""
        if self.log.settings.postgres is None:
            return
        with self.log.settings._pg_connect() as conn:
            conn.execute("SELECT pg_notify(%s, '')", (self._channel(),))

    def _wait_for_notify(self, position: int, timeout: float | None) -> None:
        import psycopg

        settings = self.log.settings
        assert settings.postgres is not None
        schema = settings.postgres.schema
        channel = self._channel()
        try:
            if self._listener is None or self._listener.closed:
                self._listener = settings._pg_connect()
                ensure_notify_trigger(self._listener, schema, channel)
                self._listener.execute(f'LISTEN "{channel}"')
            if self.log.max_position() > position:  # committed before LISTEN took effect
                return
            for _ in self._listener.notifies(timeout=timeout, stop_after=1):
                return
        except psycopg.OperationalError:
            self.close()
            time.sleep(POLL_SECONDS)  # a dropped connection: the caller reads again

    def snapshot(self, namespace: str, *, subscriber: str | None = None) -> dict[str, Any]:
        """A namespace's live items (content for a subscriber holding it) and the cursor
        to continue the feed from: how a consumer resynchronises."""
        cursor = self.head()  # taken first: what is written during the snapshot follows
        self.catch_up()
        reader = self.subscribers.get(subscriber) if subscriber is not None else None
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(catalog.c.item_id, catalog.c.kind, catalog.c.suppressed)
                .where(catalog.c.namespace == namespace)
                .order_by(catalog.c.item_id)
            ).all()
        items = []
        for item_id, kind, suppressed in rows:
            entry: dict[str, Any] = {"item_id": item_id, "kind": kind, "suppressed": suppressed}
            if reader is not None and reader.holds(namespace):
                fields = self.log.read(self.log.get(UUID(item_id)))
                entry["content"] = None if fields is ERASED else dict(fields)  # type: ignore[call-overload]
            items.append(entry)
        return {"namespace": namespace, "cursor": cursor, "items": items}

    # -- notices -----------------------------------------------------------------------

    def _learn(self, events: list[ProjectedEvent]) -> None:
        for event in events:
            if event.name == "Recorded":
                self._first[UUID(event.item_id)] = (event.attrs["namespace"], event.attrs["kind"])
        unknown = sorted({UUID(e.item_id) for e in events} - set(self._first))
        for item_id, first in self.log.first_events(unknown).items():
            self._first[item_id] = (first.namespace, first.kind)

    def _contents(
        self, events: list[ProjectedEvent], reader: Subscriber | None
    ) -> dict[int, dict[str, str]]:
        """Position -> opened fields, for the events whose content the reader may see."""
        if reader is None:
            return {}
        carrying = [
            e
            for e in events
            if e.name in _CARRY_CONTENT
            and e.sealed is not None
            and reader.holds(self._first.get(UUID(e.item_id), ("", ""))[0])
        ]
        keys = self.log.keys_for(sorted({e.item_id for e in carrying}))
        out = {}
        for event in carrying:
            generation = event.attrs["key_generation"]
            opened = self.log.open_fields(keys, event.item_id, generation, event.sealed)
            if opened is not ERASED:
                out[event.position] = dict(opened)  # type: ignore[call-overload]
        return out

    def _notices(
        self, epoch: str, event: ProjectedEvent, content: dict[str, str] | None
    ) -> list[Notice]:
        namespace, kind = self._first.get(UUID(event.item_id), (None, None))
        a = event.attrs
        writer = (a.get("provenance") or {}).get("writer")
        origin = a.get("origin")
        if event.name == "Erased":
            named = "item_expired" if a.get("reason") in EXPIRY_BASES else "item_erased"
            origin, writer = "lifecycle", None
        elif event.name == "Superseded":
            named = _CHANGED.get(str(kind), "memory_changed")
        else:
            named = _TYPES.get(event.name, "")
        if not named:
            return []  # bookkeeping (served, archived): nothing a copy reflects
        notice = Notice(
            _cursor(epoch, event.position, _EVENT),
            f"{event.item_id}:{event.version}",
            named,
            event.timestamp,
            namespace,
            event.item_id,
            kind,
            origin,
            writer,
            a.get("request_id") if event.name == "Erased" else None,
            a.get("reason") if event.name in ("Erased", "Suppressed") else None,
            content,
        )
        if kind not in _SUMMARY_INPUTS:
            return [notice]
        summary = Notice(
            _cursor(epoch, event.position, _SUMMARY),
            f"summary:{namespace}:{event.position}",
            "summary_rebuilt",
            event.timestamp,
            namespace,
            origin="projection",
        )
        return [notice, summary]


def _restored(epoch: str, position: int, at: str) -> Notice:
    return Notice(
        _cursor(epoch, position, _RESTORE),
        f"restore:{epoch}",
        "restore_completed",
        at or canonical_time(datetime.now(UTC)),
        origin="restore",
        request_id=epoch,
    )


def _cursor(epoch: str, position: int, part: int) -> str:
    return f"{epoch}.{position}.{part}"


def _order(cursor: str) -> tuple[int, int]:
    _, position, part = cursor.split(".")
    return int(position), int(part)


def ensure_notify_trigger(conn: Any, schema: str, channel: str) -> None:
    """The statement trigger that NOTIFYs waiting consumers after every append."""
    exists = conn.execute(
        "SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND t.tgname = 'memory_ledger_feed_notify'",
        (schema,),
    ).fetchone()
    if exists:
        return
    conn.execute(
        f'CREATE OR REPLACE FUNCTION "{schema}".memory_ledger_feed_notify() RETURNS trigger '
        f"LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('{channel}', ''); RETURN NULL; END $$"
    )
    conn.execute(
        "CREATE OR REPLACE TRIGGER memory_ledger_feed_notify AFTER INSERT ON "
        f'"{schema}".memory_ledger_events FOR EACH STATEMENT '
        f'EXECUTE FUNCTION "{schema}".memory_ledger_feed_notify()'
    )
