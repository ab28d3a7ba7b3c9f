"""Data subject access: everything held about a person, as one JSON document.

Everything: every item of the person's namespace and its projects that is not erased,
whatever its standing (suppressed, archived, past its retention and awaiting the sweep:
it is still held), with its text read from the log, its provenance and times, every
version of a fact, the profile summary; and every erased item by id only, with the
request that erased it. The schema is versioned (`format`); a field is never removed or
changed in meaning within a version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import select

from memory_ledger.event_log import ERASED
from memory_ledger.ledger import EntryType
from memory_ledger.projections.catalog import catalog
from memory_ledger.times import now_text

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_ledger.domain import MemoryItem
    from memory_ledger.event_log import EventLog
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.views import Memory, Summary

EXPORT_FORMAT = "memory-ledger-export/1"
SECTIONS = {"fact": "facts", "preference": "preferences", "turn": "transcripts"}
#: An agent's own work about the person (memory_ledger/agent_state): its memory files with
#: every version, and its runs with their scratch and checkpoints.
AGENT_SECTIONS = {
    "file": "memory_files",
    "run": "runs",
    "run_operation": "run_operations",
    "run_scratch": "run_scratch",
    "run_checkpoint": "run_checkpoints",
}
VERSION_FIELDS = ("version", "text", "status", "valid_from", "valid_to", "provenance")


@dataclass(frozen=True)
class ExportSources:
    """What an export reads, for the person's namespace: the log (texts), the catalog
    (which items), the lifecycle ledger (what was erased, and by which request), and
    the reads of the person's ledger. `history` and `file_versions` take the item's
    own namespace (the person's, or one of their projects), read as its owner would."""

    namespace: str
    log: EventLog
    engine: Engine
    catch_up: Callable[[], object]
    journal: LifecycleLedger
    summary: Callable[[], Summary | None]
    history: Callable[[str, str], Sequence[Memory]]
    file_versions: Callable[[str, MemoryItem], Sequence[Any]]


def export(sources: ExportSources) -> dict[str, Any]:
    sources.catch_up()
    namespace = sources.namespace
    c = catalog.c
    query = select(
        c.item_id, c.namespace, c.kind, c.subject, c.predicate, c.category, c.sensitivity,
        c.origin, c.written_at, c.valid_from, c.suppressed, c.tier, c.basis, c.expires_at,
    ).where((c.namespace == namespace) | c.namespace.startswith(namespace + "/"))  # fmt: skip
    with sources.engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(query.order_by(c.written_at, c.item_id)).mappings()]
    ids = [r["item_id"] for r in rows]
    items = sources.log.get_many([UUID(i) for i in ids])
    keys = sources.log.keys_for(ids)
    out: dict[str, Any] = {
        "format": EXPORT_FORMAT,
        "namespace": namespace,
        "exported_at": now_text(),
        "facts": [],
        "preferences": [],
        "transcripts": [],
        **{section: [] for section in AGENT_SECTIONS.values()},
    }
    for row in rows:
        item = items.get(UUID(row["item_id"]))
        if item is None or item.erased:
            continue
        fields = sources.log.open_fields(keys, row["item_id"], item.key_generation, item.sealed)
        if item.kind in AGENT_SECTIONS:
            opened = {} if fields is ERASED else dict(fields)  # type: ignore[call-overload]
            out[AGENT_SECTIONS[item.kind]].append(_agent_entry(sources, row, item, opened))
            continue
        text = None
        if fields is not ERASED:
            text = fields.get("content" if item.kind == "turn" else "value")  # type: ignore[union-attr]
        entry = {
            "item_id": row["item_id"],
            "namespace": row["namespace"],
            "version": item.version,
            "subject": row["subject"],
            "predicate": row["predicate"],
            "category": row["category"],
            "sensitivity": row["sensitivity"],
            "origin": row["origin"],
            "text": text,
            "provenance": dict(item.provenance),
            "written_at": row["written_at"],
            "valid_from": row["valid_from"],
            "suppressed": bool(row["suppressed"]),
            "archived": row["tier"] == "archived",
            "retention": {"basis": row["basis"], "expires_at": row["expires_at"]},
        }
        if item.kind == "fact":  # every version, as `history` reads them
            history = sources.history(row["namespace"], row["item_id"])
            entry["versions"] = [_version(m.to_dict()) for m in history]
        out[SECTIONS[item.kind]].append(entry)
    summary = sources.summary()
    out["summary"] = summary.to_dict() if summary is not None else None
    out["erased"] = _erased(sources)
    return out


def _agent_entry(
    sources: ExportSources, row: dict[str, Any], item: Any, fields: dict[str, str]
) -> dict[str, Any]:
    """A memory file (path, content, every version) or a run's item (its state)."""
    entry: dict[str, Any] = {
        "item_id": row["item_id"],
        "namespace": row["namespace"],
        "version": item.version,
        "provenance": dict(item.provenance),
        "written_at": row["written_at"],
        "archived": row["tier"] == "archived",
    }
    if item.kind == "file":
        versions = sources.file_versions(row["namespace"], item)
        entry.update(path=fields.get("path"), content=fields.get("content"),
                     deleted="file_deleted" in item.flags)  # fmt: skip
        entry["versions"] = [
            {"version": v.version, "provenance": v.provenance, **(v.fields or {})} for v in versions
        ]
    elif item.kind == "run":
        entry["run_id"] = row["item_id"]
        entry["state"] = json.loads(fields["state"]) if "state" in fields else None
    elif item.kind == "run_operation":
        entry["run_id"] = str(item.derived_from[0]["item_id"]) if item.derived_from else None
        entry["operation"] = json.loads(fields["operation"]) if "operation" in fields else None
    else:
        entry["run_id"] = str(item.derived_from[0]["item_id"]) if item.derived_from else None
        entry["content"] = fields.get("scratch", fields.get("artifact", fields.get("context")))
    return entry


def _version(memory: dict[str, Any]) -> dict[str, Any]:
    return {k: memory[k] for k in VERSION_FIELDS}


def _erased(sources: ExportSources) -> list[dict[str, Any]]:
    """Erased items of the namespace, by id, with the request that erased them."""
    journal = sources.journal
    namespace = sources.namespace
    mine = {
        entry.request_id: entry.payload
        for entry in journal.entries_of_type(EntryType.REQUEST)
        if entry.payload.get("namespace") == namespace
        or str(entry.payload.get("namespace", "")).startswith(namespace + "/")
    }
    out: dict[str, dict[str, Any]] = {}
    for entry in journal.entries_of_type(EntryType.TOMBSTONE):
        if entry.request_id in mine:
            request = mine[entry.request_id]
            out.setdefault(
                str(entry.payload["item_id"]),
                {
                    "item_id": str(entry.payload["item_id"]),
                    "request_id": entry.request_id,
                    "basis": request.get("basis", "user_request"),
                    "recorded_at": entry.recorded_at,
                },
            )
    return list(out.values())
