"""Forget requests: resolve, fan out to every store, collect receipts, verify, record.

Every step is written to the lifecycle ledger as it happens (ids, codes and counts
only), so a request interrupted by a crash is found `pending` at the next start and
finished from its recorded targets; a store that fails leaves the request `partial`,
listing that store, and a retry repeats the (idempotent) fan-out. Only `completed` is
ever reported as done.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import func, select

from memory_ledger import consistency
from memory_ledger.domain import MemoryItem
from memory_ledger.errors import (
    CorruptKeyEntry,
    InvalidTransition,
    InvalidWrite,
    NotFound,
    ProjectionMismatch,
)
from memory_ledger.event_log import ERASED
from memory_ledger.forgetting.fragments import clear_strings, fragments
from memory_ledger.forgetting.holds import inside
from memory_ledger.forgetting.key_proof import ACTION as KEY_PROOF_ACTION
from memory_ledger.forgetting.key_proof import STORE as KEY_PROOF_STORE
from memory_ledger.forgetting.key_proof import KeyBytes
from memory_ledger.forgetting.key_proof import prove as prove_keys_gone
from memory_ledger.forgetting.mentions import (
    MentionPattern,
    find_mentions,
    mention_pattern,
    without_mentions,
)
from memory_ledger.forgetting.redaction import (
    RedactionRequest,
    rewrite_items,
    span_pattern,
)
from memory_ledger.forgetting.residue_check import ResidueCheck, ScanOutcome
from memory_ledger.forgetting.scope import (
    Candidate,
    ForgetScope,
    Resolution,
    carrier_turns,
    derived_from,
    parse_scope,
    resolve,
)
from memory_ledger.forgetting.target_check import confirm_targets, identifiers_repeating
from memory_ledger.identifiers import new_request_id
from memory_ledger.ledger import EntryType
from memory_ledger.policy.retention import attributes_of
from memory_ledger.projections.cells import Cells
from memory_ledger.projections.facts import facts
from memory_ledger.projections.keyword_index import index_key_ident, indexed_namespaces_under
from memory_ledger.residue import needles_for
from memory_ledger.stores import (
    SUBSCRIBER_PREFIX,
    EventLogStore,
    Receipt,
    RedactingStore,
    redact_at,
)
from memory_ledger.times import canonical_time
from memory_ledger.write_policy import parse_input

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from sqlalchemy.engine import Engine

    from memory_ledger.config import Settings
    from memory_ledger.event_log import EventLog
    from memory_ledger.forgetting.holds import Holds
    from memory_ledger.ledger import Basis, LifecycleLedger
    from memory_ledger.policy.retention import RetentionPolicy
    from memory_ledger.projections.runner import ProjectionRunner
    from memory_ledger.projections.vector_index import VectorIndex
    from memory_ledger.stores import StoreRegistry

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
    #: Out-of-scope items that repeat a forgotten value: redacted there, not erased.
    mentions: list[str] = field(default_factory=list)
    receipts: list[Receipt] = field(default_factory=list)
    failed_stores: list[str] = field(default_factory=list)
    residue_checked: bool = False
    residue_scan: str = ""
    residue_files: list[str] = field(default_factory=list)
    #: Targets whose erased value sits inside one of their own identifiers (clear).
    values_in_identifiers: int | None = None
    #: Why: `user_request`, `retention_expiry`, `session_end` or `operator_request`.
    basis: str = "user_request"
    #: A `blocked` request: the legal holds that stopped it (by name).
    held_by: list[str] = field(default_factory=list)
    #: When the scope was resolved, and the log position the store was read at: the
    #: cut. Items written at or before the position are in the resolution; anything
    #: written later (while the request runs) is not, and is kept.
    resolved_at: str | None = None
    resolved_position: int | None = None

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
        if self.scope.get("kind") == "redaction" and self.status in ("completed", "dry_run"):
            done = "removed" if self.status == "completed" else "would be removed"
            return f"The named text {done} from {len(self.all_targets)} item(s); the rest stays" + (
                ", verified in every store." if done == "removed" else "."
            )
        redacted = f"; {len(self.mentions)} other item(s) that repeated it redacted"
        redacted = redacted if self.mentions else ""
        kept = sum(int(r.evidence.get("target_values_in_identifiers", 0)) for r in self.receipts)
        if kept:
            redacted += (
                f"; note: {kept} item(s) had an erased value inside an identifier (a session, "
                "turn or tool-call id, a predicate), which stays in clear"
            )
        return {
            "completed": f"Done: {count} item(s) erased from every store and verified{redacted}.",
            "partial": f"Not finished: {len(self.failed_stores)} store(s) still to confirm; "
            "the request will be retried.",
            "pending": "In progress.",
            "needs_clarification": f"That could mean {len(self.candidates)} different "
            "items; please say which.",
            "nothing_matched": "Nothing stored matches that request; nothing was erased.",
            "dry_run": f"{count} item(s) would be erased{redacted}; nothing was changed.",
            "refused": "Refused; nothing was changed (see the ledger for why).",
            "blocked": f"Blocked by legal hold(s) {', '.join(self.held_by)}: nothing was "
            "erased; the request resumes when the hold is lifted.",
            "verification_failed": "A check found the erased data again in "
            f"{len(self.failed_stores)} place(s); the request must be run again.",
            "projection_behind": f"Not verified yet: {len(self.failed_stores)} store(s) have "
            "not caught up with the log; verify again once they have.",
        }.get(self.status, self.status)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["message"] = self.message
        return out


class ForgetRequests:
    """Every erasure and redaction, filed, carried out across the data map and proved.

    It is given exactly the pieces it uses (the composition root, `MemoryService`,
    wires them): `retention` is a callable because the policy in force can change while
    the process runs (`policy install` in another process), and `clock` because tests
    and drills move time."""

    def __init__(
        self,
        *,
        log: EventLog,
        runner: ProjectionRunner,
        engine: Engine,
        stores: StoreRegistry,
        holds: Holds,
        retention: Callable[[], RetentionPolicy],
        ledger: LifecycleLedger,
        vectors: VectorIndex,
        clock: Callable[[], datetime],
        settings: Settings,
    ) -> None:
        self.log = log
        self.runner = runner
        self.engine = engine
        self.stores = stores
        self.holds = holds
        self.retention = retention
        self.ledger = ledger
        self.vectors = vectors
        self.clock = clock
        self.settings = settings
        self.residue = ResidueCheck(log, ledger, engine, settings)

    def submit(
        self,
        namespace: str,
        scope: ForgetScope | dict[str, Any],
        *,
        dry_run: bool = False,
        requested_by: str = "api",
        basis: Basis = "user_request",
        request_id: str | None = None,
        plan_id: str | None = None,
    ) -> RequestReport:
        """File and carry out one erasure. `basis` says why (a user's request, a retention
        expiry, an operator): the ledger records it and the tombstones carry it; every
        basis takes this same path, with the same fan-out, receipts and proof. A request
        that executes a confirmed plan (forgetting/planning) names it in `plan_id`, and
        comes with its id chosen beforehand, so a retry after a crash finds it."""
        parsed = parse_scope(scope)
        loaded: dict[str, MemoryItem] = {}  # each item read from the log once per request
        read = ReadItems(loaded)
        if parsed.kind == "item":
            self._check_owned(namespace, parsed, requested_by, read)
        try:
            self.runner.catch_up()
        except CorruptKeyEntry:
            # Named items can still be erased (that is how a corrupted entry is cleared);
            # a scope cannot be resolved from projections that are behind.
            if parsed.kind != "item":
                raise
        with self.runner.held() as (conn, position):
            resolved_at = canonical_time(self.clock())
            resolution = resolve(conn, namespace, parsed, self.log)
        if parsed.kind == "item":  # already-erased items stay in scope: a retry is harmless
            resolution = _with_erased_items(resolution, parsed)
        request_id = request_id or new_request_id()
        params = parsed.ledger_parameters()
        filed = {
            "namespace": namespace,
            "scope": params,
            "dry_run": dry_run,
            "requested_by": requested_by,
            "basis": basis,
        }
        entries: list[tuple[str, dict[str, Any]]] = [
            ("request", filed | ({"plan_id": plan_id} if plan_id else {}))
        ]
        report = RequestReport(
            request_id,
            namespace,
            resolution.status,
            params,
            resolution.targets,
            resolution.cascaded,
            resolution.candidates,
            resolution.history,
            basis=basis,
            resolved_at=resolved_at,
            resolved_position=position,
        )
        if resolution.status == "needs_clarification":
            candidates = [c.item_id for c in resolution.candidates]
            entries.append(("needs_clarification", {"candidates": candidates}))
        if resolution.status != "resolved":
            self.ledger.append_many(request_id, [*entries, ("status", {"status": report.status})])
            return report
        # decrypted once, for both steps
        texts = forgotten_texts(self.log, self.runner, report, read)
        report.mentions = self._mentions(report, texts)
        self._confirm_from_log(report, parsed, entries, loaded)
        report.values_in_identifiers = identifiers_repeating(
            [loaded[t] for t in report.all_targets], texts
        )
        resolved = _resolved_payload(report)
        report.status = "dry_run" if dry_run else "pending"
        blocked = self._held(report)
        if blocked is not None and not dry_run:
            report.status = "blocked"
            entries += [("resolved", resolved), ("blocked", blocked)]
            self.ledger.append_many(request_id, [*entries, ("status", {"status": "blocked"})])
            return report
        # One transaction: a crash leaves either no trace or a pending request to resume.
        self.ledger.append_many(
            request_id, [*entries, ("resolved", resolved), ("status", {"status": report.status})]
        )
        return report if dry_run else self._execute(report, texts, loaded)

    def _held(self, report: RequestReport) -> dict[str, Any] | None:
        """The `blocked` entry if legal holds cover anything this request would erase or
        rewrite (targets, cascades, shredded history, redacted mentions); else None."""
        touched = [*report.all_targets, *report.history, *report.mentions]
        with self.engine.connect() as conn:
            covering = self.holds.covering(conn, touched)
        if not covering:
            report.held_by = []
            return None
        report.held_by = sorted(covering)
        items = sorted({i for ids in covering.values() for i in ids})
        return {"holds": report.held_by, "items": items}

    def resume_blocked(self, within: str | None = None) -> list[RequestReport]:
        """Carry out the blocked requests no hold covers any more (after a lift), and
        return them with those still blocked. With `within` (the lifted hold's
        namespace), only the requests of that subtree: the only ones its lift can free,
        and the only ones its lifter may be told about."""
        out = []
        for request_id, status in self.ledger.latest_statuses().items():
            if status != "blocked":
                continue
            report = self.report(request_id)
            if within is not None and not inside(report.namespace, within):
                continue
            blocked = self._held(report)
            if blocked is None:
                self.ledger.append(request_id, "status", {"status": "pending"})
                report.status = "pending"
                out.append(self._execute(report))
            else:
                out.append(report)
        return out

    def submit_redaction(
        self,
        namespace: str,
        request: RedactionRequest | dict[str, Any],
        *,
        dry_run: bool = False,
        requested_by: str = "api",
        request_id: str | None = None,
        plan_id: str | None = None,
    ) -> RequestReport:
        """A request to remove spans from items (see `redaction`), on the same path as a
        forget: resolved, confirmed against the log, recorded, fanned out, verified.
        `request_id` and `plan_id` as for `submit`."""
        parsed = parse_input(RedactionRequest, request, "redaction", "nothing was changed")
        ids = [str(i) for i in parsed.item_ids]
        as_scope = parse_scope({"kind": "item", "item_ids": ids})
        self._check_owned(namespace, as_scope, requested_by)
        log_ = self.log
        named = {i: log_.read(log_.get(UUID(i))) for i in ids}
        if any(fields is ERASED for fields in named.values()):
            raise InvalidTransition("an item named for redaction was erased; nothing was changed")
        if parsed.fields:
            spans = [f[n] for f in named.values() for n in parsed.fields if n in f]  # type: ignore[index,operator]
            if not spans:
                raise InvalidWrite(f"the named items have no field {', '.join(parsed.fields)}")
        else:
            spans = list(parsed.spans)
        missing = [
            n + 1
            for n, span in enumerate(spans)
            if not any(_holds(f, span_pattern([span])) for f in named.values())  # type: ignore[arg-type]
        ]
        if missing:
            raise InvalidWrite(
                f"span(s) {', '.join(map(str, missing))} occur in none of the named items; "
                "nothing was changed",
                [f"spans.{n}: not found" for n in missing],
            )
        pattern = span_pattern(spans)
        self.runner.catch_up()
        with self.engine.connect() as conn:
            around = derived_from(conn, namespace, ids) + carrier_turns(conn, namespace, ids)
        cascaded = sorted(
            i
            for i in set(around) - set(ids)
            if _holds(log_.read(log_.get(UUID(i))), pattern)  # type: ignore[arg-type]
        )
        request_id = request_id or new_request_id()
        entry = {
            "namespace": namespace,
            "scope": parsed.ledger_parameters(),
            "dry_run": dry_run,
            "requested_by": requested_by,
        } | ({"plan_id": plan_id} if plan_id else {})
        entries: list[tuple[str, dict[str, Any]]] = [("request", entry)]
        report = RequestReport(
            request_id, namespace, "pending", parsed.ledger_parameters(), ids, cascaded
        )
        self._confirm_from_log(report, as_scope, entries)
        report.status = "dry_run" if dry_run else "pending"
        if self._held(report) is not None and not dry_run:
            # Refused, not blocked: a redaction's spans are never recorded, so it cannot
            # be resumed when the hold is lifted; it is filed again then.
            report.status = "refused"
            refusal = {"reason": "legal_hold", "items": report.all_targets}
            self.ledger.append_many(
                request_id, [*entries, ("refusal", refusal), ("status", {"status": "refused"})]
            )
            return report
        self.ledger.append_many(
            request_id,
            [
                *entries,
                ("resolved", {"targets": ids, "cascaded": cascaded}),
                ("status", {"status": report.status}),
            ],
        )
        return report if dry_run else self._execute_redaction(report, spans)

    def resume(self, request_id: str) -> RequestReport:
        report = self.report(request_id)
        if report.status not in UNFINISHED:
            return report
        if report.scope.get("kind") == "redaction":
            return self._execute_redaction(report, None)
        return self._execute(report)

    def recheck(self, request_id: str) -> RequestReport:
        """After an acknowledgement: if every store the request still waits for is a
        registered subscriber, ask just them again (their receipt is their ack in the
        ledger) and record the status; the other stores' receipts stand from the
        attempt before. Anything else runs the request again (`resume`). Several
        subscribers acknowledging at once then cost a ledger read each, not a fan-out
        (with its VACUUMs) each."""
        report = self.report(request_id)
        if report.status != "partial":
            return report
        subscribers = {s.name: s for s in self.stores if hasattr(s, "erase_for")}
        if not set(report.failed_stores) <= set(subscribers):
            return self.resume(request_id)
        targets = report.all_targets
        receipts = [
            subscribers[name].erase_for(request_id, report.namespace, targets)
            for name in report.failed_stores
        ]
        return self._finish(report, receipts)

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
                report.basis = p.get("basis", "user_request")
            elif entry.entry_type == "resolved":
                report.targets, report.cascaded = list(p["targets"]), list(p["cascaded"])
                report.history = list(p.get("history") or [])
                report.mentions = list(p.get("mentions") or [])
                report.resolved_at = p.get("resolved_at", report.resolved_at)
                report.resolved_position = p.get("position", report.resolved_position)
            elif entry.entry_type == "blocked":
                report.held_by = list(p["holds"])
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
                        p.get("attempt", 1),
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
        # A projection behind the log may not have applied the tombstones yet: catch up
        # first, and call what still lags "behind", not a failed verification.
        behind = set(self.runner.behind_after_catch_up())
        if report.scope.get("kind") == "redaction":
            # The items stay: the log, the key store and the projections show the spans
            # gone; the stores that dropped their copies derive them again from the log.
            report.receipts = [
                replace(redact_at(store, targets, []), action="verified")
                for store in self.stores
                if isinstance(store, RedactingStore)
            ]
        elif targets:
            for store in self.stores:
                evidence = store.verify_absent(targets)
                lagging = store.name in behind and not evidence.absent
                report.receipts.append(
                    Receipt(
                        evidence.store,
                        "verified",
                        len(targets),
                        "ok" if evidence.absent else "behind" if lagging else "failed",
                        dict(evidence.detail),
                    )
                )
        outcome, scanned = self.scan_files(request_id)  # recorded, as the job's scans are
        report.residue_checked, report.residue_scan = outcome.checked, outcome.how
        report.residue_files = outcome.files
        if scanned is not None:
            report.receipts.append(scanned)
        # the log, the key store and the ledger, checked together
        found = consistency.check(self.log, self.ledger, self.settings)
        report.receipts.append(consistency.request_receipt(found, request_id, targets))
        report.failed_stores = [r.store for r in report.receipts if r.status != "ok"]
        if report.failed_stores and report.status == "completed":
            only_behind = all(r.status == "behind" for r in report.receipts if r.status != "ok")
            report.status = "projection_behind" if only_behind else "verification_failed"
        return report

    def close_verification(self, request_id: str) -> None:
        """Destroy the request's fingerprints: later verifications check stores only."""
        self.residue.close(request_id)

    # -- the fan-out -------------------------------------------------------------------

    def _execute(
        self,
        report: RequestReport,
        texts: list[str] | None = None,
        loaded: dict[str, MemoryItem] | None = None,
    ) -> RequestReport:
        """`texts`: the targets' content if the caller has just read it; a resumed request
        reads whatever is still readable.

        Every store holds the targets' content sealed, so the request is complete when
        every store's receipt is in and the key store proves the destroyed keys' bytes
        gone (`key_proof`); the scan of every file is scheduled, not waited for."""
        targets = report.all_targets
        if texts is None:
            texts = forgotten_texts(self.log, self.runner, report)
        log_ = self.log
        receipts: list[Receipt] = []
        index_keys = self._index_keys(report)
        # Read before anything is destroyed; memory only.
        doomed = KeyBytes.capture(log_, [*targets, *report.history, *report.mentions, *index_keys])
        if report.mentions:  # first: once the targets are erased, their values are gone
            receipts.append(self._redact_mentions(report.mentions, texts))
        acked = {  # a retired subscriber's pending ack ended with an operator's entry
            f"{SUBSCRIBER_PREFIX}{e.payload['subscriber']}"
            for e in self.ledger.entries(report.request_id)
            if e.entry_type is EntryType.ACK
        }
        names = self.stores.names()
        missing = [
            s for s in report.failed_stores if s not in names and s != "files" and s not in acked
        ]
        while True:
            with self.runner.one_check():  # the projections' positions read once
                fanned = [self._erase_everywhere(report, store, targets) for store in self.stores]
            # A derived write that committed after the cascade was resolved, and before
            # the tombstones, passed its pinned-version check and is not in the cascade.
            # Once the tombstones are in, no derivation of a target can commit any more:
            # resolve again, and erase what appeared (with everything, idempotently).
            late = self._late_derivations(report)
            if not late:
                break
            doomed = KeyBytes(doomed.keys + KeyBytes.capture(log_, late).keys)
            late_items = [log_.get(UUID(i)) for i in late]
            texts = texts + plaintext_copies(self.log, self.runner, late_items)
            report.cascaded = [*report.cascaded, *late]
            targets = report.all_targets
            self.ledger.append(report.request_id, "resolved", _resolved_payload(report))
        receipts.extend(fanned)
        if report.history:
            receipts.append(self._shred_history(report.history))
        if index_keys:
            receipts.append(self._destroy_index_keys(index_keys))
        for name in missing:  # a store that failed before must confirm before "completed"
            receipts.append(Receipt(name, "erase", len(targets), "failed", {"registered": False}))
        # Deleted index rows leave keyed hashes only, zeroed by secure_delete once the WAL
        # is checkpointed: cheap (the WAL since the last checkpoint), so done here.
        self.runner.compact()
        proof = self._key_proof(doomed)
        # Clear attributes only: the items as read before the erasure serve (`loaded`).
        known = loaded or {}
        items = [known.get(t) or log_.get(UUID(t)) for t in targets] if texts else []
        # Not a failure (identifiers stay in clear by design), but never silent. Counted at
        # submission, from the items read then; a resumed request counts again.
        if report.values_in_identifiers is None:
            report.values_in_identifiers = identifiers_repeating(items, texts)
        proof.evidence["target_values_in_identifiers"] = report.values_in_identifiers
        receipts.append(proof)
        overruled = self._protect_overruled(report, known)
        if overruled is not None:
            receipts.append(overruled)
        needles = _fingerprinted(texts, items, doomed.destroyed(log_))
        scan_failed_before = "files" in report.failed_stores
        receipts.append(self._schedule_scan(report, needles))
        if scan_failed_before:
            # A retry of a request the scan reopened: it stays `partial`, with `files`
            # named, until a scan finds the files clean (run now, not scheduled).
            outcome = self.residue.scan_files(report.request_id)
            if outcome.checked:
                receipts.append(_scan_receipt(report, outcome))
        return self._finish(report, receipts)

    def _erase_everywhere(self, report: RequestReport, store: Any, targets: list[str]) -> Receipt:
        if hasattr(store, "erase_for"):  # a subscriber: its receipt is its acknowledgement
            return store.erase_for(report.request_id, report.namespace, targets)  # type: ignore[no-any-return]
        receipt = _erase_at(store, targets, report.basis, report.request_id)
        tombstones = getattr(store, "tombstones", {}).items()
        if tombstones:  # recorded at once: restore replays them from the ledger
            self.ledger.append_many(
                report.request_id,
                [("tombstone", {"item_id": i, "position": p}) for i, p in tombstones],
            )
        return receipt

    def _late_derivations(self, report: RequestReport) -> list[str]:
        """Live items derived from the request's targets that its cascade lacks."""
        self.runner.catch_up()
        known = set(report.all_targets)
        with self.engine.connect() as conn:
            found = derived_from(conn, report.namespace, report.all_targets)
        return [i for i in found if i not in known]

    def _protect_overruled(
        self, report: RequestReport, known: dict[str, MemoryItem]
    ) -> Receipt | None:
        """A person's erasure request wins over the protect list (which only stops
        automatic forgetting); only a legal hold could have stopped it, and none did.
        Recorded, so the receipt says which rule decided."""
        if report.basis not in ("user_request", "operator_request"):
            return None
        protect = self.retention().table.protect
        rules = []
        for target in report.all_targets:
            item = known.get(target) or self.log.get(UUID(target))
            rule = protect.rule_for(attributes_of(item))
            if rule:
                rules.append(rule)
        if not rules:
            return None
        evidence = {"rule": sorted(rules)[0], "protected_items": len(rules), "legal_hold": False}
        return Receipt("retention_policy", "erasure_over_protect", len(rules), "ok", evidence)

    def _index_keys(self, report: RequestReport) -> list[str]:
        """A whole-user forget also destroys the keyword index keys of the user's
        namespaces: a term hash left in a free page can then never be tested again."""
        if report.scope.get("kind") != "namespace":
            return []
        with self.engine.connect() as conn:
            spaces = {report.namespace, *indexed_namespaces_under(conn, report.namespace)}
        return [index_key_ident(ns) for ns in sorted(spaces)]

    def _destroy_index_keys(self, idents: list[str]) -> Receipt:
        log_ = self.log
        log_.destroy_derived_keys(idents)
        live = sum(1 for i in idents if log_.derived_key(i, create=False) is not None)
        return Receipt(
            "keyword_index",
            "index_keys_destroyed",
            len(idents),
            "ok" if live == 0 else "failed",
            {"namespaces": len(idents), "live_index_keys": live},
        )

    def _key_proof(self, doomed: KeyBytes) -> Receipt:
        proof = prove_keys_gone(self.log, doomed)
        return Receipt(
            KEY_PROOF_STORE,
            KEY_PROOF_ACTION,
            proof.keys_searched,
            "ok" if proof.ok else "failed",
            proof.evidence(),
        )

    def _schedule_scan(self, report: RequestReport, needles: list[bytes]) -> Receipt:
        """Keep keyed fingerprints of what the request erased (texts, their fragments,
        the destroyed keys' bytes) for the scheduled verification scan of every file. A
        resumed request keeps its first run's."""
        kept = bool(needles)
        if kept:
            self.residue.keep(report.request_id, needles)
        kept = kept or self.residue.fingerprints(report.request_id) is not None
        report.residue_checked = False
        report.residue_scan = (
            "scheduled: the verification scan reads every file for its keyed fingerprints"
            if kept
            else "not scheduled: nothing readable was erased"
        )
        return Receipt(
            "files",
            "scan_scheduled",
            len(report.all_targets),
            "ok",
            {"fingerprints_kept": kept},
        )

    def scan_files(self, request_id: str) -> tuple[ScanOutcome, Receipt | None]:
        """Run the request's verification scan and record its receipt in the ledger;
        residue reopens the request as `partial` (store `files`), to be retried. None
        when there is nothing to scan with (window closed, no fingerprints, PostgreSQL)."""
        report = self.report(request_id)
        outcome = self.residue.scan_files(request_id)
        if not outcome.checked:
            return outcome, None
        earlier = sum(1 for r in report.receipts if r.action == "residue_scan")
        receipt = replace(_scan_receipt(report, outcome), attempt=earlier + 1)
        entries: list[tuple[str, dict[str, Any]]] = [("receipt", _receipt_payload(receipt))]
        if outcome.files and report.status == "completed":
            entries.append(("status", {"status": "partial", "failed_stores": ["files"]}))
        self.ledger.append_many(request_id, entries)
        return outcome, receipt

    def _finish(self, report: RequestReport, receipts: list[Receipt]) -> RequestReport:
        """Number the receipts by attempt, settle the status, and record both."""
        # A retry's receipts say which of the store's attempts on this request they record.
        tries: dict[str, int] = {}
        for e in self.ledger.entries(report.request_id):
            if e.entry_type == "receipt":
                store = e.payload["store"]
                tries[store] = max(tries.get(store, 0), e.payload.get("attempt", 1))
        receipts = [replace(r, attempt=tries.get(r.store, 0) + 1) for r in receipts]
        report.receipts = receipts
        report.failed_stores = [r.store for r in receipts if r.status != "ok"]
        report.status = "partial" if report.failed_stores else "completed"
        self.ledger.append_many(
            report.request_id,
            [
                *(("receipt", _receipt_payload(r)) for r in receipts),
                ("status", {"status": report.status, "failed_stores": report.failed_stores}),
            ],
        )
        log.info(
            "forget request %s: %s (%d targets)",
            report.request_id,
            report.status,
            len(report.all_targets),
        )
        return report

    def _execute_redaction(self, report: RequestReport, spans: list[str] | None) -> RequestReport:
        """Rewrite every affected item in one transaction, then have every store drop or
        refresh its copies of the old wording, and scan the files for the spans.

        `spans` is None when a crashed request is resumed: spans are never recorded, so
        the rewrite is not repeated. If it had committed, the stores' part runs again
        (the scan then uses the request's keyed fingerprints); if it had not, nothing
        changed, and the request is refused as interrupted, to be filed again."""
        items = report.all_targets
        receipts: list[Receipt] = []
        doomed = KeyBytes.capture(self.log, items)  # older generations, destroyed next
        if spans is None:
            if not self._rewritten_during(report):
                return self._refuse(report, "interrupted")
            needles: list[bytes] = []
        else:
            pattern = span_pattern(spans)
            assert pattern is not None  # a request with no span is refused at parse
            needles = needles_for(spans)
            rewritten = self._rewrite(items, pattern)
            receipt = Receipt(
                "event_log",
                "spans_redacted",
                len(items),
                "ok",
                {"rewritten": rewritten, "skipped": len(items) - rewritten},
            )
            self.ledger.append_many(report.request_id, [("receipt", _receipt_payload(receipt))])
            receipts.append(receipt)
        texts = [n.decode("utf-8") for n in needles]
        receipts.extend(redact_at(store, items, texts) for store in self.stores)
        receipts.append(self._key_proof(doomed))
        receipts.append(self._schedule_scan(report, needles))
        return self._finish(report, receipts)

    def _rewritten_during(self, report: RequestReport) -> bool:
        """Did the request's rewrite commit? Every item then has a Redacted event recorded
        after the request was filed."""
        filed = next(e.recorded_at for e in self.ledger.entries(report.request_id))
        for item_id in report.all_targets:
            events = self.log.events_of(UUID(item_id))
            if not any(
                type(e).__name__ == "Redacted" and canonical_time(e.timestamp) >= filed
                for e in events
            ):
                return False
        return True

    def _refuse(self, report: RequestReport, reason: str) -> RequestReport:
        report.status = "refused"
        self.ledger.append_many(
            report.request_id, [("refusal", {"reason": reason}), ("status", {"status": "refused"})]
        )
        return report

    def _rewrite(self, item_ids: list[str], pattern: MentionPattern) -> int:
        """Replace the pattern inside each live item, and re-seal it under a fresh key in
        one transaction that destroys every older generation: its earlier versions, which
        may hold the text too, become unreadable even where its current text did not
        change. An item erased since is skipped, so a retry is harmless."""
        rewrites = []
        found = self.log.get_many([UUID(i) for i in item_ids])
        for item in found.values():
            current = self.log.read(item)
            if item.erased or current is ERASED:
                continue
            rewrites.append((item, *without_mentions(current, pattern)))  # type: ignore[arg-type]
        rewrite_items(self.log, rewrites)
        return len(rewrites)

    def _mentions(self, report: RequestReport, texts: list[str]) -> list[str]:
        """Other items of the namespace that repeat a forgotten value. None for a whole
        namespace: every item the search could read is a target already."""
        if report.scope.get("kind") == "namespace":
            return []
        pattern = mention_pattern(texts)
        if pattern is None:
            return []
        exclude = set(report.all_targets) | set(report.history)
        with self.engine.connect() as conn:
            return find_mentions(
                conn,
                Cells(self.log),
                self.runner.projections,
                report.namespace,
                pattern,
                exclude,
            )

    def _redact_mentions(self, item_ids: list[str], texts: list[str]) -> Receipt:
        """Replace the forgotten values inside each mentioning item (see `_rewrite`)."""
        pattern = mention_pattern(texts)  # None on a retry after the values were gone
        rewritten = self._rewrite(item_ids, pattern) if pattern is not None else 0
        # Their vectors embed the old wording: dropped now, re-embedded from the
        # Redacted events at the index's next catch-up.
        vectors = self.vectors.erase(item_ids)
        self.runner.catch_up()
        return Receipt(
            "event_log",
            "mentions_redacted",
            len(item_ids),
            "ok" if vectors.check.absent else "failed",
            # skipped: erased since, or a retry after the targets' values were gone
            {
                "rewritten": rewritten,
                "skipped": len(item_ids) - rewritten,
                "vector_rows_dropped": vectors.rows_removed,
            },
        )

    def _shred_history(self, item_ids: list[str]) -> Receipt:
        """Rotate each item's key: earlier versions become unreadable, then check that
        the facts projection holds no readable earlier version of them."""
        shredded = sum(1 for i in item_ids if shred_history(self.log, i))
        self.runner.catch_up()
        with self.engine.connect() as conn:
            left = readable_history(conn, item_ids)
        return Receipt(
            "event_log",
            "history_shredded",
            len(item_ids),
            "ok" if left == 0 else "failed",
            {"keys_rotated": shredded, "readable_old_versions": left},
        )

    def _confirm_from_log(
        self,
        report: RequestReport,
        scope: ForgetScope,
        entries: list[tuple[str, dict[str, Any]]],
        loaded: dict[str, MemoryItem] | None = None,
    ) -> None:
        """Refuse the request, destroying nothing, if the log does not confirm every item
        the projections resolved it to (see target_check)."""
        mismatches = confirm_targets(
            self.log,
            report.namespace,
            scope,
            targets=report.targets,
            cascaded=report.cascaded,
            history=report.history,
            mentions=report.mentions,
            loaded=loaded,
        )
        if not mismatches:
            return
        ids = sorted({m.item_id for m in mismatches})
        refusal = {"reason": "projection_mismatch", "items": ids}
        self.ledger.append_many(
            report.request_id,
            [*entries, ("refusal", refusal), ("status", {"status": "refused"})],
        )
        reasons = ", ".join(sorted({m.reason for m in mismatches}))
        log.warning(
            "refused forget request %s: projections disagree with the log", report.request_id
        )
        raise ProjectionMismatch(
            f"forget request {report.request_id} refused, nothing was erased: {len(ids)} "
            f"item(s) the projections resolved it to are not confirmed by the event log "
            f"({reasons}). The projections are damaged or were changed: run "
            "`memory-ledger doctor`, then `memory-ledger rebuild`, and file the request again."
        )

    def _check_owned(
        self,
        namespace: str,
        scope: ForgetScope,
        requested_by: str,
        read: ReadItems | None = None,
    ) -> None:
        """Every named item is the namespace's; `read` keeps what was read."""
        read = read or ReadItems({})
        found = read.fetch(self.log, list(scope.item_ids))  # one query per 500 ids
        for item_id in scope.item_ids:
            item = found.get(item_id)
            if item is None:
                raise NotFound(f"no memory item {item_id}")
            if item.namespace != namespace:
                # Recorded (ids and a code only), then answered like a missing id.
                request_id = new_request_id()
                request = {
                    "namespace": namespace,
                    "scope": scope.ledger_parameters(),
                    "requested_by": requested_by,
                }
                self.ledger.append_many(
                    request_id,
                    [
                        ("request", request),
                        ("refusal", {"reason": "namespace_mismatch"}),
                        ("status", {"status": "refused"}),
                    ],
                )
                log.warning("refused forget request %s: item outside namespace", request_id)
                raise NotFound(f"no memory item {item_id}")


def _erase_at(
    store: Any, targets: list[str], basis: str = "user_request", request_id: str | None = None
) -> Receipt:
    try:
        if isinstance(store, EventLogStore):  # its tombstones say why the items went
            return store.erase(targets, reason=basis, request_id=request_id)
        return store.erase(targets)  # type: ignore[no-any-return]
    except Exception as exc:  # a failed store leaves the request partial, never half-done
        log.warning("store %s failed during erasure: %s", store.name, type(exc).__name__)
        return Receipt(store.name, "erase", len(targets), "failed", {"error": type(exc).__name__})


def _fingerprinted(texts: list[str], items: list[MemoryItem], destroyed: KeyBytes) -> list[bytes]:
    """What the verification scan looks for: the erased texts, their distinctive
    fragments (less what stays in clear around the items), the destroyed keys' bytes."""
    needles = needles_for(texts)
    if needles:
        known = set(needles)
        needles += [f for f in fragments(texts, clear_strings(items)) if f not in known]
    return needles + list(destroyed.wrapped)


def _scan_receipt(report: RequestReport, outcome: ScanOutcome) -> Receipt:
    return Receipt(
        "files",
        "residue_scan",
        len(report.all_targets),
        "failed" if outcome.files else "ok",
        {
            "checked": True,
            "files_scanned": outcome.scanned,
            "files_rebuilt": outcome.rebuilt,
            "files_with_residue": len(outcome.files),
            "found_in_clear_identifiers": outcome.shared,
        },
    )


def _holds(fields: dict[str, str] | object, pattern: MentionPattern | None) -> bool:
    """Does readable content contain the pattern? (ERASED content holds nothing.)"""
    if pattern is None or not isinstance(fields, dict):
        return False
    return any(pattern.search(text) for text in fields.values())


def _resolved_payload(report: RequestReport) -> dict[str, Any]:
    """A request's `resolved` entry; a later one (a cascade extended) supersedes it.
    It names the cut: the time the scope was resolved and the log position read."""
    return {
        "targets": report.targets,
        "cascaded": report.cascaded,
        "history": report.history or None,
        "mentions": report.mentions or None,
        "resolved_at": report.resolved_at,
        "position": report.resolved_position,
    }


def _receipt_payload(receipt: Receipt) -> dict[str, Any]:
    return {
        "attempt": receipt.attempt,
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


@dataclass
class ReadItems:
    """What a request read from the log: the items (`loaded`, by id) and their decoded
    events, so that each is read and decoded once per request (an erasure of thousands
    of items read and decoded every event twice: once to check ownership and rebuild
    the item, once to open its sealed versions)."""

    loaded: dict[str, MemoryItem]
    events: dict[UUID, list[Any]] = field(default_factory=dict)

    def fetch(self, log: Any, item_ids: list[UUID]) -> dict[UUID, MemoryItem]:
        """The items the log holds among `item_ids`, read in one query per 500 ids."""
        found = log.get_many([i for i in item_ids if str(i) not in self.loaded], self.events)
        self.loaded.update((str(k), v) for k, v in found.items())
        return {i: self.loaded[str(i)] for i in item_ids if str(i) in self.loaded}


def forgotten_texts(
    log: EventLog,
    runner: ProjectionRunner,
    report: RequestReport,
    read: ReadItems | None = None,
) -> list[str]:
    """The content a request makes disappear, in memory only: every readable copy of the
    targets, and the earlier versions of history items minus their current value.
    `read`: what the request has already read from the log; what is read here is added."""
    read = read or ReadItems({})
    items = read.loaded
    read.fetch(log, [UUID(i) for i in [*report.all_targets, *report.history]])

    def get(item_id: str) -> MemoryItem:
        if item_id not in items:
            items[item_id] = log.get(UUID(item_id))  # raises NotFound, as it did
        return items[item_id]

    texts = plaintext_copies(log, runner, [get(t) for t in report.all_targets], read.events)
    for item in (get(h) for h in report.history):
        current = log.read(item)
        keep = set(current.values()) if current is not ERASED else set()  # type: ignore[union-attr]
        copies = plaintext_copies(log, runner, [item], read.events)
        texts.extend(t for t in copies if t not in keep)
    return texts


def plaintext_copies(
    event_log: EventLog,
    runner: ProjectionRunner,
    items: list[MemoryItem],
    decoded: dict[UUID, list[Any]] | None = None,
) -> list[str]:
    """Every copy of the items' content we can find, for the residue scan only: each
    readable version in the log, plus what the projections hold (which still works when
    a key entry is corrupted). The texts never leave this process's memory. `decoded`:
    items' events already read (`ReadItems.events`); the others are read here."""
    live = [i for i in items if not i.erased]
    ids = [str(i.id) for i in live]
    texts: list[str] = []
    opened_all = True  # every sealed version in the log was opened
    try:
        keys = event_log.keys_for(ids)
        known = decoded or {}
        events = {i.id: known[i.id] for i in live if i.id in known}
        events.update(event_log.events_of_many([i.id for i in live if i.id not in known]))
        for item in live:
            for event in events.get(item.id, []):
                sealed = getattr(event, "sealed", None)
                if sealed is not None:
                    generation = event.key_generation
                    opened = event_log.open_fields(keys, str(item.id), generation, sealed)
                    if opened is not ERASED:
                        texts.extend(opened.values())  # type: ignore[union-attr]
                    else:
                        opened_all = False
    except CorruptKeyEntry:
        log.warning("a key entry is corrupted; the residue scan relies on projection copies")
        opened_all = False
    if opened_all:
        # The projections keep copies of the log's sealed fields under the same keys:
        # opening them again would add no text (a 1,000-item forget opened each ~9 times).
        return texts
    with runner.engine.connect() as conn:
        for projection in runner.projections:
            texts.extend(projection.texts_of(conn, Cells(event_log), ids))
    return texts


def shred_history(log: EventLog, item_id: str) -> bool:
    """Make an item's earlier versions unreadable and keep its current value: its
    current content is re-sealed under a new key generation and every older one is
    destroyed. False when there is nothing earlier to shred."""
    item = log.get(UUID(item_id))
    current = log.read(item)
    if item.erased or current is ERASED or item.key_generation < 1:
        return False
    rewrite_items(log, [(item, current, [])])  # type: ignore[list-item]
    return True


def readable_history(conn: Any, item_ids: list[str]) -> int:
    """How many earlier (superseded) versions of these items can still be read."""
    query = (
        select(func.count())
        .select_from(facts)
        .where(
            facts.c.item_id.in_(item_ids),
            facts.c.status == "superseded",
            facts.c.sealed.is_not(None),
        )
    )
    return int(conn.execute(query).scalar_one())
