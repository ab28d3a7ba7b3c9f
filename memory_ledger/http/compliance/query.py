"""The compliance console's list and totals: one summary row per forget request, kept in a
small SQLite file of its own beside the store (`compliance_console.sqlite`), indexed, and
caught up from the lifecycle ledger by seq before each read.

Why a summary: the list pages through thousands of requests, and each request is 10 to
30 ledger entries. Folding those per page (what the first page did, a report per
request) reads every entry of every request shown and, for filters and totals, of every
request there is. Here each entry is folded once, when it is first seen: a read costs
the entries appended since the last one (usually none) and an indexed query.

What a row holds is what the ledger holds, less: ids, codes, counts and times. No memory
content is in the ledger, so none can be here. The file is derived: delete it and the
next read builds it again from the ledger. The ledger is append-only, so the watermark
(the last seq folded, with its entry hash) is exact; if the entry at the watermark is no
longer the one folded (a ledger replaced, e.g. restored from its own backup), the
summary is rebuilt from the first entry.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memory_ledger.operations import EntryType, LedgerEntry, LifecycleLedger
from memory_ledger.times import canonical_time

FILE = "compliance_console.sqlite"
#: Statuses still owed work: a request in one of them past the deadline is overdue.
OPEN_STATUSES = ("pending", "partial", "blocked", "needs_clarification", "filed")
MAX_PAGE = 500
DEFAULT_PAGE = 50
_BATCH = 5000  # ledger entries folded per read of the ledger

_DDL = [
    "CREATE TABLE IF NOT EXISTS requests (request_id TEXT PRIMARY KEY, filed_seq INTEGER "
    "NOT NULL UNIQUE, namespace TEXT NOT NULL, basis TEXT NOT NULL, kind TEXT NOT NULL, "
    "dry_run INTEGER NOT NULL, requested_by TEXT NOT NULL, plan_id TEXT, filed_at TEXT NOT "
    "NULL, status TEXT NOT NULL, status_at TEXT NOT NULL, failed_stores TEXT NOT NULL, "
    "completed_at TEXT, done_seconds REAL, targets INTEGER NOT NULL, stores_total INTEGER "
    "NOT NULL, stores_ok INTEGER NOT NULL, verified TEXT, key_proof TEXT, acks INTEGER NOT "
    "NULL, entries INTEGER NOT NULL, last_seq INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS requests_by_namespace ON requests (namespace, filed_seq)",
    "CREATE INDEX IF NOT EXISTS requests_by_status ON requests (status, filed_seq)",
    "CREATE INDEX IF NOT EXISTS requests_by_basis ON requests (basis, filed_seq)",
    "CREATE INDEX IF NOT EXISTS requests_by_done ON requests (done_seconds)",
    "CREATE TABLE IF NOT EXISTS request_stores (request_id TEXT NOT NULL, store TEXT NOT "
    "NULL, status TEXT NOT NULL, PRIMARY KEY (request_id, store)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS watermark (one INTEGER PRIMARY KEY CHECK (one = 1), "
    "seq INTEGER NOT NULL, entry_hash TEXT NOT NULL)",
]
ROW_FIELDS = (
    "request_id", "namespace", "basis", "kind", "dry_run", "requested_by", "plan_id",
    "filed_at", "status", "status_at", "failed_stores", "completed_at", "done_seconds",
    "targets", "stores_total", "stores_ok", "verified", "key_proof", "acks", "entries",
    "filed_seq",
)  # fmt: skip


@dataclass(frozen=True)
class Filters:
    """What the list is narrowed to. `namespace` is a subtree (a tenant, a user, a
    project); `since`/`until` bound the filing time (canonical text, until exclusive);
    `search` is a request id prefix."""

    namespace: str = ""
    status: str = ""
    basis: str = ""
    kind: str = ""
    since: str = ""
    until: str = ""
    search: str = ""


def _subtree(column: str, namespace: str) -> tuple[str, list[Any]]:
    """The namespace and everything under it, as two index ranges ('0' follows '/')."""
    return (
        f"({column} = ? OR ({column} > ? AND {column} < ?))",
        [namespace, namespace + "/", namespace + "0"],
    )


def _where(scope: str, filters: Filters) -> tuple[str, list[Any]]:
    """The caller's subtree and the filters, as a WHERE clause. A filter subtree outside
    the caller's matches nothing; one that contains it is the caller's."""
    namespace = scope
    if filters.namespace:
        inside = filters.namespace == scope or filters.namespace.startswith(scope + "/")
        covers = scope.startswith(filters.namespace + "/")
        if inside:
            namespace = filters.namespace
        elif not covers:
            return "0", []
    # The namespace index only when the filter narrows the caller's subtree: over the
    # whole subtree it would make SQLite read and sort every row of it, where walking
    # the filing order (or the status, basis or id index) stops after one page.
    narrow = namespace != scope and not filters.search
    clause, params = _subtree("namespace" if narrow else "+namespace", namespace)
    parts = [clause]
    for column in ("status", "basis", "kind"):
        value = getattr(filters, column)
        if value:
            parts.append(f"{column} = ?")
            params.append(value)
    if filters.since:
        parts.append("filed_at >= ?")
        params.append(filters.since)
    if filters.until:
        parts.append("filed_at < ?")
        params.append(filters.until)
    if filters.search:
        # A prefix as an index range on the primary key (ids are identifiers: no '%').
        parts.append("request_id >= ? AND request_id < ?")
        params += [filters.search, filters.search + "\U0010ffff"]
    return " AND ".join(parts), params


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class ConsoleIndex:
    """The summary rows of one ledger. Thread-safe (one lock, one connection); several
    processes on one file take turns through SQLite's write lock."""

    def __init__(self, path: Path, ledger: LifecycleLedger) -> None:
        self.path = path
        self.ledger = ledger
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(
            path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")  # derived: rebuilt if lost
        for statement in _DDL:
            self.conn.execute(statement)

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    # -- catching up with the ledger ------------------------------------------------------

    def catch_up(self) -> int:
        """Fold the ledger entries appended since the last call; returns how many."""
        folded = 0
        with self._lock:
            while True:
                cur = self.conn.cursor()
                cur.execute("BEGIN IMMEDIATE")
                try:
                    count = self._fold_batch(cur)
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
                cur.execute("COMMIT")
                folded += count
                if count < _BATCH:
                    return folded

    def _fold_batch(self, cur: sqlite3.Cursor) -> int:
        mark = cur.execute("SELECT seq, entry_hash FROM watermark").fetchone()
        seq = 0
        if mark:
            seq, known = int(mark[0]), str(mark[1])
            found = self.ledger.entries_after(seq - 1, 1)
            if not found or (found[0].seq, found[0].entry_hash) != (seq, known):  # another ledger
                for table in ("requests", "request_stores", "watermark"):
                    cur.execute(f"DELETE FROM {table}")
                seq = 0
        entries = self.ledger.entries_after(seq, _BATCH)
        if not entries:
            return 0
        for entry in entries:
            self._fold(cur, entry)
        last = entries[-1]
        cur.execute(
            "INSERT INTO watermark (one, seq, entry_hash) VALUES (1, ?, ?) ON CONFLICT (one) "
            "DO UPDATE SET seq = excluded.seq, entry_hash = excluded.entry_hash",
            (last.seq, last.entry_hash),
        )
        return len(entries)

    def _fold(self, cur: sqlite3.Cursor, entry: LedgerEntry) -> None:
        seq, rid, kind = entry.seq, entry.request_id, entry.entry_type.value
        payload_json, at = entry.payload_json, entry.recorded_at
        if kind == EntryType.REQUEST.value:
            p = json.loads(payload_json)
            cur.execute(
                "INSERT OR IGNORE INTO requests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'filed', ?, "
                "'', NULL, NULL, 0, 0, 0, NULL, NULL, 0, 1, ?)",
                (
                    rid, seq, p["namespace"], p.get("basis", "user_request"),
                    p["scope"]["kind"], int(bool(p.get("dry_run"))), p["requested_by"],
                    p.get("plan_id"), at, at, seq,
                ),
            )  # fmt: skip
            return
        if kind not in _FOLDED:
            return  # holds, policies, backups...: not requests, and nothing of a request's
        known = cur.execute("SELECT filed_at FROM requests WHERE request_id = ?", (rid,))
        filed = known.fetchone()
        if filed is None:
            return  # an entry of something that is not a forget request
        p = json.loads(payload_json)
        sets, params = ["entries = entries + 1", "last_seq = ?"], [seq]
        if kind == EntryType.STATUS.value:
            status = p["status"]
            sets += ["status = ?", "status_at = ?", "failed_stores = ?"]
            params += [status, at, ",".join(p.get("failed_stores", ()))]
            done = status == "completed"
            seconds = (_parse(at) - _parse(filed[0])).total_seconds() if done else None
            sets += ["completed_at = ?", "done_seconds = ?"]
            params += [at if done else None, seconds]
        elif kind == EntryType.RESOLVED.value:
            sets.append("targets = ?")
            params.append(len(p.get("targets", ())) + len(p.get("cascaded", ())))
        elif kind == EntryType.ACK.value:
            sets.append("acks = acks + 1")
        elif kind == EntryType.RECEIPT.value:
            store, status, action = p["store"], p["status"], p["action"]
            cur.execute(
                "INSERT INTO request_stores VALUES (?, ?, ?) ON CONFLICT (request_id, store) "
                "DO UPDATE SET status = excluded.status",
                (rid, store, status),
            )
            counts = cur.execute(
                "SELECT COUNT(*), SUM(status = 'ok') FROM request_stores WHERE request_id = ?",
                (rid,),
            ).fetchone()
            sets += ["stores_total = ?", "stores_ok = ?"]
            params += [int(counts[0]), int(counts[1] or 0)]
            if action == "residue_scan":
                sets.append("verified = ?")
                params.append(status)
            elif action == "scan_scheduled" and not (p.get("evidence") or {}).get(
                "fingerprints_kept"
            ):  # nothing readable was erased: no scan will come, so never "not yet"
                sets.append("verified = ?")
                params.append("not_scheduled")
            elif action == "key_bytes_gone":
                sets.append("key_proof = ?")
                params.append(status)
        cur.execute(f"UPDATE requests SET {', '.join(sets)} WHERE request_id = ?", (*params, rid))

    # -- reading --------------------------------------------------------------------------

    def page(
        self, scope: str, filters: Filters, after: int | None = None, limit: int = DEFAULT_PAGE
    ) -> tuple[list[dict[str, Any]], int | None]:
        """One page, newest filed first, and the cursor of the next (None: the last page).
        Keyset paging on the filing seq: a deep page costs what the first does, and a
        request filed while someone pages never shifts or repeats a row."""
        limit = max(1, min(int(limit), MAX_PAGE))
        self.catch_up()
        where, params = _where(scope, filters)
        if after is not None:
            where += " AND filed_seq < ?"
            params.append(int(after))
        sql = (
            f"SELECT {', '.join(ROW_FIELDS)} FROM requests WHERE {where} "
            f"ORDER BY filed_seq DESC LIMIT {limit + 1}"
        )
        with self._lock:
            rows = self.conn.execute(sql, params).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        items = [_row(r) for r in rows]
        return items, (int(rows[-1][-1]) if more and rows else None)

    def every(self, scope: str, filters: Filters) -> Iterator[dict[str, Any]]:
        """Every row the filters select, newest first, a page at a time (the CSV)."""
        after: int | None = None
        while True:
            items, after = self.page(scope, filters, after, MAX_PAGE)
            yield from items
            if after is None:
                return

    def one(self, request_id: str) -> dict[str, Any] | None:
        self.catch_up()
        with self._lock:
            row = self.conn.execute(
                f"SELECT {', '.join(ROW_FIELDS)} FROM requests WHERE request_id = ?",
                (request_id,),
            ).fetchone()
        return _row(row) if row else None

    def totals(
        self, scope: str, filters: Filters, deadline_days: int, now: datetime
    ) -> dict[str, Any]:
        """Counts by status and by basis, requests overdue against the deadline, and the
        time from filing to completion (median, p90) of the completed ones."""
        self.catch_up()
        where, params = _where(scope, filters)
        cutoff = canonical_time(now - timedelta(days=deadline_days))
        marks = ", ".join("?" * len(OPEN_STATUSES))
        with self._lock:
            by_status = dict(self.conn.execute(
                f"SELECT status, COUNT(*) FROM requests WHERE {where} GROUP BY status", params
            ).fetchall())  # fmt: skip
            by_basis = dict(self.conn.execute(
                f"SELECT basis, COUNT(*) FROM requests WHERE {where} GROUP BY basis", params
            ).fetchall())  # fmt: skip
            by_kind = dict(self.conn.execute(
                f"SELECT kind, COUNT(*) FROM requests WHERE {where} GROUP BY kind", params
            ).fetchall())  # fmt: skip
            overdue = self.conn.execute(
                f"SELECT COUNT(*) FROM requests WHERE {where} AND status IN ({marks}) "
                "AND dry_run = 0 AND filed_at < ?",
                (*params, *OPEN_STATUSES, cutoff),
            ).fetchone()[0]
            durations = [
                float(r[0])
                for r in self.conn.execute(
                    f"SELECT done_seconds FROM requests WHERE {where} AND done_seconds IS NOT "
                    "NULL ORDER BY done_seconds",
                    params,
                )
            ]
        return {
            "total": sum(by_status.values()),
            "by_status": by_status,
            "by_basis": by_basis,
            "by_kind": by_kind,
            "overdue": int(overdue),
            "deadline_days": deadline_days,
            "overdue_before": cutoff,
            "completion_seconds": {
                "count": len(durations),
                "median": _quantile(durations, 0.5),
                "p90": _quantile(durations, 0.9),
            },
        }


_FOLDED = {
    EntryType.STATUS.value,
    EntryType.RESOLVED.value,
    EntryType.RECEIPT.value,
    EntryType.ACK.value,
    EntryType.TOMBSTONE.value,
    EntryType.BLOCKED.value,
    EntryType.REFUSAL.value,
    EntryType.NEEDS_CLARIFICATION.value,
}


def _quantile(ordered: list[float], q: float) -> float | None:
    """The nearest-rank quantile of sorted values (None when there are none)."""
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * q // 1))  # ceil(n * q), at least 1
    return ordered[int(rank) - 1]


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    item = dict(zip(ROW_FIELDS, row, strict=True))
    item["dry_run"] = bool(item["dry_run"])
    item["failed_stores"] = [s for s in item["failed_stores"].split(",") if s]
    return item
