"""Forget requests: resolve, fan out to every store, collect receipts, verify, record.

Every step is written to the lifecycle ledger as it happens (ids, codes and counts
only), so a request interrupted by a crash is found `pending` at the next start and
finished from its recorded targets; a store that fails leaves the request `partial`,
listing that store, and a retry repeats the (idempotent) fan-out. Only `completed` is
ever reported as done.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memory_ledger.domain import MemoryItem
from memory_ledger.errors import CorruptKeyEntry, NotFound
from memory_ledger.event_log import ERASED
from memory_ledger.forget_scope import Candidate, ForgetScope, Resolution, parse_scope, resolve
from memory_ledger.keystore import KeyDestruction, NewKey
from memory_ledger.residue import (
    Fingerprints,
    files_under,
    fingerprint,
    needles_for,
    scan,
    scan_fingerprints,
)
from memory_ledger.stores import Receipt

if TYPE_CHECKING:
    from memory_ledger.api import MemoryService
    from memory_ledger.ledger import LifecycleLedger

log = logging.getLogger("memory_ledger.forget")
UNFINISHED = ("pending", "partial")


@dataclass
class RequestReport:
    """The answer to a forget request. It names items by id and never repeats content."""

    request_id: str
    namespace: str
    status: str
    scope: dict[str, Any]
    targets: list[str] = field(default_factory=list)
    cascaded: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    failed_stores: list[str] = field(default_factory=list)
    residue_checked: bool = False
    residue_scan: str = ""
    residue_files: list[str] = field(default_factory=list)

    @property
    def all_targets(self) -> list[str]:
        """Targets, then what cascaded from them: everything the request erases."""
        return self.targets + [c for c in self.cascaded if c not in self.targets]

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def message(self) -> str:
        """What an agent may tell the user: counts and state, never what was erased."""
        count = len(self.targets) + len(self.cascaded) + len(self.history)
        return {
            "completed": f"Done: {count} item(s) erased from every store and verified.",
            "partial": f"Not finished: {len(self.failed_stores)} store(s) still to confirm; "
            "the request will be retried.",
            "pending": "In progress.",
            "needs_clarification": f"That could mean {len(self.candidates)} different "
            "items; please say which.",
            "nothing_matched": "Nothing stored matches that request; nothing was erased.",
            "dry_run": f"{count} item(s) would be erased; nothing was changed.",
            "verification_failed": "A check found the erased data again in "
            f"{len(self.failed_stores)} place(s); the request must be run again.",
        }.get(self.status, self.status)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["message"] = self.message
        return out


class ForgetRequests:
    def __init__(self, service: MemoryService, ledger: LifecycleLedger) -> None:
        self.service = service
        self.ledger = ledger

    def submit(
        self,
        namespace: str,
        scope: ForgetScope | dict[str, Any],
        *,
        dry_run: bool = False,
        requested_by: str = "api",
    ) -> RequestReport:
        parsed = parse_scope(scope)
        if parsed.kind == "item":
            self._check_owned(namespace, parsed, requested_by)
        try:
            self.service.runner.catch_up()
        except CorruptKeyEntry:
            # Named items can still be erased (that is how a corrupted entry is cleared);
            # a scope cannot be resolved from projections that are behind.
            if parsed.kind != "item":
                raise
        with self.service.engine.connect() as conn:
            resolution = resolve(conn, namespace, parsed)
        if parsed.kind == "item":  # already-erased items stay in scope: a retry is harmless
            resolution = _with_erased_items(resolution, parsed)
        request_id = f"req-{uuid.uuid4().hex[:16]}"
        params = parsed.ledger_parameters()
        self.ledger.append(
            request_id,
            "request",
            {
                "namespace": namespace,
                "scope": params,
                "dry_run": dry_run,
                "requested_by": requested_by,
            },
        )
        report = RequestReport(
            request_id,
            namespace,
            resolution.status,
            params,
            resolution.targets,
            resolution.cascaded,
            resolution.candidates,
            resolution.history,
        )
        if resolution.status == "needs_clarification":
            self.ledger.append(
                request_id,
                "needs_clarification",
                {"candidates": [c.item_id for c in resolution.candidates]},
            )
        if resolution.status != "resolved":
            self.ledger.append(request_id, "status", {"status": resolution.status})
            return report
        self.ledger.append(
            request_id,
            "resolved",
            {
                "targets": resolution.targets,
                "cascaded": resolution.cascaded,
                "history": resolution.history or None,
            },
        )
        if dry_run:
            report.status = "dry_run"
            self.ledger.append(request_id, "status", {"status": "dry_run"})
            return report
        self.ledger.append(request_id, "status", {"status": "pending"})
        return self._execute(report)

    def resume(self, request_id: str) -> RequestReport:
        report = self.report(request_id)
        if report.status not in UNFINISHED:
            return report
        return self._execute(report)

    def resume_unfinished(self) -> list[RequestReport]:
        unfinished = [
            r for r, status in self.ledger.latest_statuses().items() if status in UNFINISHED
        ]
        return [self.resume(r) for r in unfinished]

    def report(self, request_id: str) -> RequestReport:
        """Rebuild a request's report from the ledger alone."""
        entries = self.ledger.entries(request_id)
        if not entries:
            raise NotFound(f"no forget request {request_id}")
        report = RequestReport(request_id, "", "pending", {})
        for entry in entries:
            p = entry.payload
            if entry.entry_type == "request":
                report.namespace, report.scope = p["namespace"], p["scope"]
            elif entry.entry_type == "resolved":
                report.targets, report.cascaded = list(p["targets"]), list(p["cascaded"])
                report.history = list(p.get("history", []))
            elif entry.entry_type == "needs_clarification":
                report.candidates = [Candidate(i, "", None) for i in p["candidates"]]
            elif entry.entry_type == "receipt":
                report.receipts.append(
                    Receipt(
                        p["store"],
                        p["action"],
                        p["targets"],
                        p["status"],
                        dict(p["evidence"]),
                        entry.recorded_at,
                    )
                )
            elif entry.entry_type == "status":
                report.status = p["status"]
                report.failed_stores = list(p.get("failed_stores", []))
        return report

    def verify(self, request_id: str) -> RequestReport:
        """Ask every store again for evidence that the request's targets are absent, and
        scan every file again using the request's keyed fingerprints (SQLite), for as
        long as its verification window is open."""
        report = self.report(request_id)
        targets = report.all_targets
        report.receipts = []
        if targets:
            for store in self.service.stores:
                evidence = store.verify_absent(targets)
                report.receipts.append(
                    Receipt(
                        evidence.store,
                        "verified",
                        len(targets),
                        "ok" if evidence.absent else "failed",
                        dict(evidence.detail),
                    )
                )
        prints = self._fingerprints(request_id)
        if self.service.settings.postgres is not None:
            report.residue_scan = "not run: PostgreSQL files live on the server"
        elif prints is None:
            report.residue_scan = (
                "not run: no fingerprints (nothing readable was erased, or the "
                "verification window has closed and their key was destroyed)"
            )
        else:
            paths = files_under(self.service.settings.data_dir)
            report.residue_files = sorted({f.path for f in scan_fingerprints(paths, prints)})
            report.residue_checked = True
            report.residue_scan = f"keyed fingerprints over {len(paths)} files"
            report.receipts.append(
                Receipt(
                    "files",
                    "residue_scan",
                    len(targets),
                    "failed" if report.residue_files else "ok",
                    {"checked": True, "files_with_residue": len(report.residue_files)},
                )
            )
        report.failed_stores = [r.store for r in report.receipts if r.status != "ok"]
        if report.failed_stores and report.status == "completed":
            report.status = "verification_failed"
        return report

    def close_verification(self, request_id: str) -> None:
        """Destroy the request's fingerprint key: later verifications check stores only."""
        self.service.log.save([], destroy=[KeyDestruction(_residue_id(request_id), None)])

    def _keep_fingerprints(self, request_id: str, needles: list[bytes]) -> None:
        if self._fingerprints(request_id) is not None:
            return  # a resumed request keeps the fingerprints of its first run
        ident = _residue_id(request_id)
        sealed = self.service.log.master.wrap(ident, 0, fingerprint(needles).to_bytes())
        self.service.log.save([], new_keys=[NewKey(ident, 0, sealed)])

    def _fingerprints(self, request_id: str) -> Fingerprints | None:
        ident = _residue_id(request_id)
        raw = self.service.log.keys_for([ident]).data_key(ident, 0)
        return Fingerprints.from_bytes(raw) if raw is not None else None

    # -- the fan-out -------------------------------------------------------------------

    def _execute(self, report: RequestReport) -> RequestReport:
        targets = report.all_targets
        items = [self.service.log.get(UUID(t)) for t in targets]
        texts = plaintext_copies(self.service, items)
        kept_items = [self.service.log.get(UUID(h)) for h in report.history]
        for item in kept_items:  # earlier versions go; the current value stays
            current = self.service.log.read(item)
            keep = set(current.values()) if current is not ERASED else set()  # type: ignore[union-attr]
            texts.extend(t for t in plaintext_copies(self.service, [item]) if t not in keep)
        needles = needles_for(texts)  # memory only
        if needles and self.service.settings.postgres is None:
            self._keep_fingerprints(report.request_id, needles)
        missing = [
            s for s in report.failed_stores if s not in self.service.stores.names() and s != "files"
        ]
        receipts: list[Receipt] = []
        for store in self.service.stores:
            receipts.append(_erase_at(store, targets))
            for item_id, position in getattr(store, "tombstones", {}).items():
                self.ledger.append(
                    report.request_id, "tombstone", {"item_id": item_id, "position": position}
                )
        if report.history:
            receipts.append(self._shred_history(report.history))
        compaction = self.service.compact()
        for name in missing:  # a store that failed before must confirm before "completed"
            receipts.append(Receipt(name, "erase", len(targets), "failed", {"registered": False}))
        report.residue_checked, report.residue_scan, report.residue_files = self._scan(
            needles, report.request_id
        )
        receipts.append(
            Receipt(
                "files",
                "residue_scan",
                len(targets),
                "failed" if report.residue_files else "ok",
                {
                    "checked": report.residue_checked,
                    "files_with_residue": len(report.residue_files),
                    "compaction_steps": len(compaction),
                },
            )
        )
        for receipt in receipts:
            self.ledger.append(report.request_id, "receipt", _receipt_payload(receipt))
        report.receipts = receipts
        report.failed_stores = [r.store for r in receipts if r.status != "ok"]
        report.status = "partial" if report.failed_stores else "completed"
        self.ledger.append(
            report.request_id,
            "status",
            {"status": report.status, "failed_stores": report.failed_stores},
        )
        log.info(
            "forget request %s: %s (%d targets)", report.request_id, report.status, len(targets)
        )
        return report

    def _shred_history(self, item_ids: list[str]) -> Receipt:
        """Rotate each item's key: earlier versions become unreadable, then check that
        the facts projection holds no readable earlier version of them."""
        shredded = sum(1 for i in item_ids if self.service.shred_history(i))
        self.service.runner.catch_up()
        with self.service.engine.connect() as conn:
            left = self.service.readable_history(conn, item_ids)
        return Receipt(
            "event_log",
            "history_shredded",
            len(item_ids),
            "ok" if left == 0 else "failed",
            {"keys_rotated": shredded, "readable_old_versions": left},
        )

    def _scan(self, needles: list[bytes], request_id: str) -> tuple[bool, str, list[str]]:
        settings = self.service.settings
        if settings.postgres is not None:
            return False, "not run: PostgreSQL files live on the server; VACUUM ran", []
        prints = None if needles else self._fingerprints(request_id)
        if prints is not None:  # a retry: the content is gone, its fingerprints are not

            def search(paths: list[Path]) -> list[str]:
                return sorted({f.path for f in scan_fingerprints(paths, prints)})

            how = "keyed fingerprints"
        elif needles:

            def search(paths: list[Path]) -> list[str]:
                return sorted({f.path for f in scan(paths, needles)})

            how = "bytes"
        else:
            return (
                False,
                (
                    "not run: no readable content to search for "
                    "(already erased, unreadable, or under 4 bytes)"
                ),
                [],
            )
        paths = files_under(settings.data_dir)
        found = search(paths)
        rewritten = [p for p in found if self.service.rewrite_sqlite_file(Path(p))]
        if rewritten:
            # secure_delete zeroes freed cells, but a page's unused gap can still hold
            # old bytes; rebuilding the file (VACUUM) leaves only live rows. Then look again.
            paths = files_under(settings.data_dir)
            found = search(paths)
        note = f"; {len(rewritten)} file(s) rebuilt with VACUUM" if rewritten else ""
        return True, f"{how} of {len(paths)} files under {settings.data_dir}{note}", found

    def _check_owned(self, namespace: str, scope: ForgetScope, requested_by: str) -> None:
        for item_id in scope.item_ids:
            try:
                item = self.service.log.get(item_id)
            except NotFound:
                raise NotFound(f"no memory item {item_id}") from None
            if item.namespace != namespace:
                # Recorded (ids and a code only), then answered like a missing id.
                request_id = f"req-{uuid.uuid4().hex[:16]}"
                self.ledger.append(
                    request_id,
                    "request",
                    {
                        "namespace": namespace,
                        "scope": scope.ledger_parameters(),
                        "requested_by": requested_by,
                    },
                )
                self.ledger.append(request_id, "refusal", {"reason": "namespace_mismatch"})
                self.ledger.append(request_id, "status", {"status": "refused"})
                log.warning("refused forget request %s: item outside namespace", request_id)
                raise NotFound(f"no memory item {item_id}")


def _residue_id(request_id: str) -> str:
    # A key-store row of its own, erasable like any data key.
    return f"residue:{request_id}"


def _erase_at(store: Any, targets: list[str]) -> Receipt:
    try:
        return store.erase(targets)  # type: ignore[no-any-return]
    except Exception as exc:  # a failed store leaves the request partial, never half-done
        log.warning("store %s failed during erasure: %s", store.name, type(exc).__name__)
        return Receipt(store.name, "erase", len(targets), "failed", {"error": type(exc).__name__})


def _receipt_payload(receipt: Receipt) -> dict[str, Any]:
    return {
        "store": receipt.store,
        "action": receipt.action,
        "targets": receipt.targets,
        "status": receipt.status,
        "evidence": receipt.evidence,
    }


def _with_erased_items(resolution: Resolution, scope: ForgetScope) -> Resolution:
    wanted = [str(i) for i in scope.item_ids]
    targets = sorted(set(resolution.targets) | set(wanted))
    return Resolution("resolved", targets, [c for c in resolution.cascaded if c not in targets])


def plaintext_copies(service: MemoryService, items: list[MemoryItem]) -> list[str]:
    """Every copy of the items' content we can find, for the residue scan only: each
    readable version in the log, plus what the projections hold (which still works when
    a key entry is corrupted). The texts never leave this process's memory."""
    live = [i for i in items if not i.erased]
    ids = [str(i.id) for i in live]
    texts: list[str] = []
    try:
        keys = service.log.keys_for(ids)
        for item in live:
            for event in service.log.events_of(item.id):
                sealed = getattr(event, "sealed", None)
                if sealed is not None:
                    generation = event.key_generation
                    opened = service.log.open_fields(keys, str(item.id), generation, sealed)
                    if opened is not ERASED:
                        texts.extend(opened.values())  # type: ignore[union-attr]
    except CorruptKeyEntry:
        log.warning("a key entry is corrupted; the residue scan relies on projection copies")
    with service.engine.connect() as conn:
        for projection in service.runner.projections:
            texts.extend(projection.plaintext_of(conn, ids))
    return texts
