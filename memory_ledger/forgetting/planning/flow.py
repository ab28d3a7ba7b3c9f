"""A forget request in words, from the words to the receipt, in separate calls.

1. `plan` reads the request, matches it with the principal's items and stores a plan:
   nothing is destroyed, and the request's words are not kept.
2. `choose` answers a clarification: a narrower plan from some of its candidates (never
   anything else).
3. `execute` runs a plan the user confirmed, once (two confirmations racing: one runs),
   through the one request path every erasure takes; a crash in between is resumed by
   executing again, which finds the request by the id the plan chose for it. A plan that
   redacts spans and erases facts files a redaction request (or a few, in batches) and
   then a forget request, under ids derived from the plan's, answered as one.
4. `outcome` answers from the request's actual status, never from the plan.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory_ledger.errors import InvalidTransition, InvalidWrite, NotFound
from memory_ledger.event_log import ERASED
from memory_ledger.forgetting.planning.blast import blast_of, checked, namespace_items
from memory_ledger.forgetting.planning.information import InformationPlanner
from memory_ledger.forgetting.planning.lexicon import lexicon
from memory_ledger.forgetting.planning.located import LocatedPlanner, check_find, check_forget
from memory_ledger.forgetting.planning.locations import without_locations
from memory_ledger.forgetting.planning.pieces import (
    KINDS as PIECE_KINDS,
)
from memory_ledger.forgetting.planning.pieces import (
    MAX_PIECE_CHARS,
    MAX_PIECES,
    Information,
    lowered,
    prepared,
)
from memory_ledger.forgetting.planning.planner import (
    NOT_FOUND,
    Draft,
    Planner,
    missing_parts,
)
from memory_ledger.forgetting.planning.plans import (
    PLAN_TTL,
    ForgetPlan,
    PlanStore,
    check_plan_id,
    require_executable,
)
from memory_ledger.forgetting.planning.pool import PoolRows
from memory_ledger.forgetting.planning.reading import LexiconReader, Reader, Reading
from memory_ledger.forgetting.planning.statements import without_statements
from memory_ledger.forgetting.redaction import MAX_ITEMS, MAX_SPANS, span_pattern
from memory_ledger.forgetting.scope import parse_scope, resolve
from memory_ledger.identifiers import IDENTIFIER_RULE, is_identifier, new_plan_id, new_request_id
from memory_ledger.phrases import normalise
from memory_ledger.times import canonical_time

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from memory_ledger.api import MemoryLedger

MAX_REQUEST_CHARS = 2000
MAX_CHOICES = 50


@dataclass
class PlanOutcome:
    """What executing a plan did, from the request's real status. Ids and counts only."""

    plan_id: str
    intent: str | None
    status: str  # the request's: pending | partial | completed | ... ; completed for the rest
    request_id: str | None
    message: str
    targets: list[str]
    #: Stores still to confirm, while the request is not completed.
    remaining: list[str] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    #: Every request the plan filed, in order: a plan of information that erases facts
    #: and redacts spans elsewhere files a redaction request and a forget request.
    request_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_request_text(text: object) -> str:
    if not isinstance(text, str):
        raise InvalidWrite("a forget request is text", ["text: not a string"])
    if not text.strip():
        raise InvalidWrite("a forget request must not be empty", ["text: empty"])
    if len(text) > MAX_REQUEST_CHARS:
        raise InvalidWrite(
            f"a forget request is at most {MAX_REQUEST_CHARS} characters; say it in fewer "
            "words, or name the items",
            ["text: too long"],
        )
    if "\x00" in text:
        raise InvalidWrite("a forget request must not contain NUL", ["text: NUL"])
    return text


def zone_of(name: str | None) -> tzinfo:
    if name is None:
        return ZoneInfo("UTC")
    try:
        if not isinstance(name, str) or not name or len(name) > 64:
            raise ValueError
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidWrite(
            "unknown time zone: use an IANA name such as Europe/Oslo", ["timezone: unknown"]
        ) from None


def check_reading(reading: Reading, text: str | None = None) -> Reading:
    """A reader's output, checked before it selects anything (a plugged-in reader is not
    trusted more than a request): known intents, concepts and span kinds only, and
    pieces of information the request's words (`text`) say."""
    lex = lexicon()
    if reading.intent not in (None, "delete", "stop_using", "update", "redact"):
        raise InvalidWrite("the reader returned an unknown intent")
    if reading.which not in (None, "current", "previous", "all"):
        raise InvalidWrite("the reader returned an unknown version selector")
    unknown = [c for c in reading.concepts if c not in lex.concept_predicates]
    unknown += [s for s in reading.spans if s not in lex.spans]
    if unknown:
        raise InvalidWrite("the reader returned unknown concepts or span kinds")
    if not all(is_identifier(c) for c in reading.categories):
        raise InvalidWrite("the reader returned an invalid category")
    if reading.window is not None and reading.window.since >= reading.window.until:
        raise InvalidWrite("the reader returned an empty time window")
    for part in reading.parts:
        if part.reading.parts:
            raise InvalidWrite("the reader returned a part of several parts")
        check_reading(part.reading)
    if reading.information is not None:
        check_pieces(reading.information, text)
    return reading


def check_pieces(info: Information, text: str | None) -> Information:
    """The pieces a reader returned: known kinds, bounded, and every value one the
    request's own words contain (a reader cannot name a value the user did not say)."""
    said = lowered(prepared(text)) if text is not None else None
    pieces = [*info.pieces, *info.kept]
    if len(info.pieces) > MAX_PIECES or len(info.kept) > MAX_PIECES:
        raise InvalidWrite("the reader returned too many pieces")
    for piece in pieces:
        if piece.kind not in PIECE_KINDS or piece.which not in (None, "previous", "current", "all"):
            raise InvalidWrite("the reader returned an unknown kind of piece")
        if not piece.text.strip() or len(piece.text) > MAX_PIECE_CHARS:
            raise InvalidWrite("the reader returned an empty or too long piece")
        if piece.reading is not None:
            if piece.reading.information is not None or piece.reading.parts:
                raise InvalidWrite("the reader returned a piece of several pieces")
            check_reading(piece.reading)
        if said is not None and piece.literal and lowered(prepared(piece.text)) not in said:
            raise InvalidWrite("the reader returned a value the request does not say")
    return info


class ForgetPlanning:
    """Plans for one service: the store of plans, the reader, and the clock."""

    def __init__(
        self, plans: PlanStore, clock: Callable[[], datetime], reader: Reader | None = None
    ) -> None:
        self.plans = plans
        self.clock = clock
        self.reader = reader or LexiconReader()
        self._lexicon_reader = LexiconReader()
        self._rows = PoolRows()  # the namespaces' clear attributes, between plans
        # Plans this process is executing now: a plan found `executing` is resumed as a
        # run that stopped (a crash), unless it is one of these, still running here.
        self._running: set[str] = set()
        self._running_lock = threading.Lock()

    def plan(
        self,
        ledger: MemoryLedger,
        text: str,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        timezone: str | None = None,
    ) -> ForgetPlan:
        text = check_request_text(text)
        # "from the shared memory" says where, "I am out of Grey Pine now." says why:
        # neither says what to forget, and read as content both widen a plan
        words = without_statements(without_locations(text))
        for name, value in (("session_id", session_id), ("turn_id", turn_id)):
            if value is not None and not is_identifier(value):
                raise InvalidWrite(f"invalid {name}: use {IDENTIFIER_RULE}", [f"{name}: invalid"])
        zone = zone_of(timezone)
        service = ledger._service
        now = self.clock()
        service.runner.catch_up()
        self.plans.expire_due(ledger.namespace, now)
        reading = check_reading(self.reader.read(words, now, zone), words)
        if reading.everything and self.reader is not self._lexicon_reader:
            # A whole-user scope only where the words say so, whoever read them.
            reading.everything = self._lexicon_reader.read(words, now, zone).everything
        # "I moved." may be cut as a statement; it still says the old one is the one on file
        reading.moved = lexicon().moved.any(normalise(text))
        for part in reading.parts:  # and never in a part of words that do not say so
            part.reading.everything = part.reading.everything and reading.everything
        with service.engine.connect() as conn:
            planner = self._planner(conn, ledger)
            draft = checked(planner, planner.plan(reading, words, session_id), reading)
            versions = planner.pool_versions(draft.targets) if draft.intent == "update" else {}
        plan = self._plan(ledger, draft, reading, now, session_id, turn_id)
        plan.versions = versions
        self.plans.save(plan, now, ledger.namespace)
        return plan

    def _plan(
        self,
        ledger: MemoryLedger,
        draft: Draft,
        reading: Reading,
        now: datetime,
        session_id: str | None,
        turn_id: str | None,
    ) -> ForgetPlan:
        executable = draft.status in ("planned", "partial_match")
        stores = self._stores(ledger, draft.intent) if executable else []
        if draft.intent == "update" and draft.new_value is None:
            draft.new_value = reading.new_value
        return ForgetPlan(
            plan_id=new_plan_id(),
            status=draft.status,
            intent=draft.intent,
            language=reading.language,
            scope=draft.scope,
            targets=draft.targets,
            cascaded=draft.cascaded,
            history=draft.history,
            keeps=draft.keeps,
            candidates=draft.candidates,
            labels=draft.labels,
            stores=stores,
            question=draft.question,
            message=_message(draft, reading.language),
            expires_at=canonical_time(now + PLAN_TTL),
            conclusion=draft.conclusion,
            spans=draft.spans,
            new_value=draft.new_value,
            reason=draft.reason,
            session_id=session_id,
            turn_id=turn_id,
            span_kinds=list(reading.spans),
            parts=draft.parts,
            pieces=draft.pieces,
            kept=draft.kept,
            spans_by_item=draft.spans_by_item,
            redactions=len(_batches(draft.spans_by_item)) if executable else 0,
            blast=draft.blast.to_dict() if draft.blast is not None else None,
        )

    def find_information(
        self, ledger: MemoryLedger, values: object = None, description: object = None
    ) -> dict[str, Any]:
        """The model protocol's first call (located.py): where each value is said, and
        the items nearest a description. Reads only; nothing is planned or kept."""
        asked, said = check_find(values, description)
        service = ledger._service
        service.runner.catch_up()
        with service.engine.connect() as conn:
            planner = self._planner(conn, ledger)
            return LocatedPlanner(planner).find(asked, said)

    def forget_information(
        self,
        ledger: MemoryLedger,
        values: object = None,
        chosen: object = None,
        keeps: object = None,
        reason: object = None,
    ) -> ForgetPlan:
        """The model protocol's second call (located.py): a plan over every place each
        value is said, stored like any plan, executed by `execute` after the user said
        yes."""
        located = check_forget(values, chosen, keeps, reason)
        service = ledger._service
        now = self.clock()
        service.runner.catch_up()
        self.plans.expire_due(ledger.namespace, now)
        with service.engine.connect() as conn:
            planner = self._planner(conn, ledger)
            draft, notes = LocatedPlanner(planner).draft(located)
            # the model named the values and the user confirms: no bound turns it into
            # a question, but the plan states its size like every other plan
            draft.blast = blast_of(draft, namespace_items(planner))
        reading = Reading(located.language, "delete")  # type: ignore[arg-type]
        plan = self._plan(ledger, draft, reading, now, None, None)
        plan.note = " ".join(notes)
        self.plans.save(plan, now, ledger.namespace)
        return plan

    def _planner(self, conn: Connection, ledger: MemoryLedger) -> Planner:
        """A planner over the principal's namespace on `conn`, with the clear rows kept
        between plans (PoolRows): what every plan from words or values starts from."""
        service = ledger._service
        return Planner(
            conn, service.log, service.vectors, ledger.namespace,
            projections=service.runner.projections, kept=self._rows,
        )  # fmt: skip

    @staticmethod
    def _stores(ledger: MemoryLedger, intent: str | None) -> list[str]:
        names = ledger._service.stores.names()
        if intent in ("delete", "redact"):
            return names
        return ["event_log", *(p.name for p in ledger._service.runner.projections)]

    def get(self, ledger: MemoryLedger, plan_id: str) -> ForgetPlan:
        return self.plans.load(ledger.namespace, plan_id, self.clock())

    def choose(self, ledger: MemoryLedger, plan_id: str, item_ids: Sequence[str]) -> ForgetPlan:
        """A narrower plan: some of a clarification's candidates, and nothing else."""
        now = self.clock()
        asked = self.plans.load(ledger.namespace, plan_id, now)
        if asked.state != "open" or asked.status != "needs_clarification":
            raise InvalidTransition(
                f"plan {plan_id} is not waiting for a choice ({asked.state}, {asked.status})"
            )
        if not isinstance(item_ids, list | tuple) or not item_ids or len(item_ids) > MAX_CHOICES:
            raise InvalidWrite(
                f"choose 1 to {MAX_CHOICES} of the plan's candidates", ["item_ids: invalid"]
            )
        offered = [c["item_id"] for c in asked.candidates]
        chosen = list(dict.fromkeys(str(i) for i in item_ids))
        if any(i not in offered for i in chosen):
            raise InvalidWrite(
                "only the plan's own candidates can be chosen; nothing was planned",
                ["item_ids: not a candidate"],
            )
        reading = Reading(asked.language, asked.intent)  # type: ignore[arg-type]
        reading.conclusion = asked.conclusion
        reading.spans = list(asked.span_kinds)
        service = ledger._service
        service.runner.catch_up()
        with service.engine.connect() as conn:
            planner = Planner(
                conn, service.log, service.vectors, ledger.namespace,
                projections=service.runner.projections,
            )  # fmt: skip
            if asked.pieces:  # a piece of information asked about: its chosen values
                planner.reading = reading
                draft = InformationPlanner(planner).chosen(asked, chosen)
            else:
                draft = planner.chosen(reading, chosen, asked.parts)
            draft = checked(planner, draft, reading)
            versions = planner.pool_versions(draft.targets) if draft.intent == "update" else {}
        draft.new_value = asked.new_value
        plan = self._plan(ledger, draft, reading, now, asked.session_id, asked.turn_id)
        plan.versions = versions
        self.plans.save(plan, now, ledger.namespace)
        # answered: the question is done, and the plan says which one replaced it
        self.plans.close(plan_id, "withdrawn", now, replaced_by=plan.plan_id)
        return plan

    def execute(self, ledger: MemoryLedger, plan_id: str) -> PlanOutcome:
        check_plan_id(plan_id)
        with self._running_lock:
            running = plan_id in self._running
            self._running.add(plan_id)
        if running:  # a second confirmation while the first runs in this process
            raced = self.get(ledger, plan_id)
            require_executable(raced)
            raise InvalidTransition(
                f"plan {plan_id} is being executed as request {raced.request_id}; ask "
                "for its status"
            )
        try:
            return self._execute(ledger, plan_id)
        finally:
            with self._running_lock:
                self._running.discard(plan_id)

    def _execute(self, ledger: MemoryLedger, plan_id: str) -> PlanOutcome:
        plan = self.get(ledger, plan_id)
        if plan.state == "withdrawn" and self._stopped_between(ledger, plan):
            plan.state = "executing"  # its first request withdrew it: finish the rest
        if plan.state != "executing":
            require_executable(plan)
            request_id = new_request_id()
            if not self.plans.claim(plan_id, request_id):
                raced = self.get(ledger, plan_id)  # another confirmation took it just now
                require_executable(raced)
                raise InvalidTransition(
                    f"plan {plan_id} is being executed as request {raced.request_id}; ask "
                    "for its status"
                )
            plan.state, plan.request_id = "executing", request_id
        # else: a run that stopped half way (a crash); executing again finishes it
        outcome = _with_parts(plan, self._run(ledger, plan))
        self.plans.close(plan_id, "executed", self.clock())
        return outcome

    @staticmethod
    def _stopped_between(ledger: MemoryLedger, plan: ForgetPlan) -> bool:
        """A plan of information whose redaction was filed (which withdrew the plan, as
        every erasure withdraws the open plans that show its items) and whose forget
        request may not have been: executing it again files the rest."""
        if plan.request_id is None or not _redacts(plan) or plan.intent != "delete":
            return False
        try:
            ledger._service.requests.report(plan.request_id)
        except NotFound:
            return False
        return True

    def _run(self, ledger: MemoryLedger, plan: ForgetPlan) -> PlanOutcome:
        requests = ledger._service.requests
        assert plan.request_id is not None
        if _redacts(plan):
            return self._run_information(ledger, plan)
        try:
            report = requests.report(plan.request_id)  # a retry after a crash
        except NotFound:
            report = None
        if report is not None:
            # Filed already (by a run that stopped, or one still going): its status is
            # the answer. An unfinished request is resumed by the service when it opens
            # and by `forget resume`, never by a second runner racing the first.
            return _from_report(plan, report)
        try:
            return self._file(ledger, plan)
        except InvalidWrite:
            try:  # the ledger refuses a second filing of the same request id
                requests.report(plan.request_id)
            except NotFound:
                raise
            raise InvalidTransition(
                f"plan {plan.plan_id} is being executed as request {plan.request_id}; ask "
                "for its status"
            ) from None

    def _file(self, ledger: MemoryLedger, plan: ForgetPlan) -> PlanOutcome:
        requests = ledger._service.requests
        by = ledger.principal.user
        if plan.intent == "delete":
            assert plan.scope is not None
            scope = parse_scope(plan.scope)
            if scope.kind != "item":
                self._still_the_same(ledger, plan, scope)
            report = requests.submit(
                ledger.namespace, scope, requested_by=by, request_id=plan.request_id,
                plan_id=plan.plan_id,
            )  # fmt: skip
            return _from_report(plan, report)
        if plan.intent == "redact":
            report = requests.submit_redaction(
                ledger.namespace,
                {"item_ids": plan.targets, "spans": plan.spans},
                requested_by=by,
                request_id=plan.request_id,
                plan_id=plan.plan_id,
            )
            return _from_report(plan, report)
        changed = (
            self._stop_using(ledger, plan)
            if plan.intent == "stop_using"
            else self._update(ledger, plan)
        )
        message = lexicon().messages[f"{plan.language}_done"].format(count=changed)
        return PlanOutcome(plan.plan_id, plan.intent, "completed", None, message, plan.targets)

    def _run_information(self, ledger: MemoryLedger, plan: ForgetPlan) -> PlanOutcome:
        """A plan that redacts spans (and may erase facts): one redaction request per
        batch of items (the spans need the plan's sealed part, so they go first), then
        the forget request for the facts, each under an id fixed by the plan's, so a
        run that stopped half way finds what it filed and files the rest."""
        requests = ledger._service.requests
        by = ledger.principal.user
        assert plan.request_id is not None
        ids = _request_ids(plan.request_id)
        reports = []
        batches = _batches(plan.spans_by_item)  # none once the plan's sealed part is gone
        for n in range(plan.redactions):
            request_id = next(ids)
            report = _filed(requests, request_id)
            if report is None and n < len(batches):
                live = _still_holding(ledger, batches[n])
                if not live:
                    continue
                spans = list(dict.fromkeys(s for v in live.values() for s in v))
                report = requests.submit_redaction(
                    ledger.namespace,
                    {"item_ids": sorted(live), "spans": spans},
                    requested_by=by,
                    request_id=request_id,
                    plan_id=plan.plan_id,
                )
            if report is not None:
                reports.append(report)
        if plan.intent == "delete" and plan.scope is not None:
            request_id = next(ids)
            report = _filed(requests, request_id)
            if report is None:
                scope = parse_scope(plan.scope)
                if scope.kind != "item":
                    self._still_the_same(ledger, plan, scope)
                report = requests.submit(
                    ledger.namespace, scope, requested_by=by, request_id=request_id,
                    plan_id=plan.plan_id,
                )  # fmt: skip
            reports.append(report)
        return _from_reports(plan, reports)

    def _still_the_same(self, ledger: MemoryLedger, plan: ForgetPlan, scope: Any) -> None:
        """A scope is resolved again at execution: if it now means other items than the
        user confirmed, the plan is stale, and nothing is erased."""
        ledger._service.runner.catch_up()
        with ledger._service.engine.connect() as conn:
            found = resolve(conn, ledger.namespace, scope, ledger._service.log)
        if (found.status, set(found.targets), set(found.history)) != (
            "resolved",
            set(plan.targets),
            set(plan.history),
        ):
            self.plans.close(plan.plan_id, "stale", self.clock())
            raise InvalidTransition(
                f"the memory changed since plan {plan.plan_id} was made; nothing was "
                "erased; plan the request again"
            )

    @staticmethod
    def _stop_using(ledger: MemoryLedger, plan: ForgetPlan) -> int:
        changed = 0
        for item_id in plan.targets:
            if ledger.get(item_id).suppressed:
                continue  # a retry: already done
            if plan.conclusion:
                try:
                    ledger.forget_conclusion(item_id)
                except InvalidTransition:
                    ledger.suppress(item_id)
            else:
                ledger.suppress(item_id)
            changed += 1
        return changed

    def _update(self, ledger: MemoryLedger, plan: ForgetPlan) -> int:
        if plan.new_value is None:
            raise InvalidTransition(f"plan {plan.plan_id} has no new value")
        changed = 0
        for item_id in plan.targets:
            if ledger.get(item_id).version > plan.versions.get(item_id, 0):
                continue  # a retry after the update was saved
            source = {"session_id": plan.session_id, "turn_id": plan.turn_id}
            if not (plan.session_id or plan.turn_id):
                source = {"tool_call_id": plan.plan_id}
            ledger.update(
                item_id,
                {
                    "value": plan.new_value,
                    "provenance": {
                        "writer": ledger.principal.user,
                        "written_at": self.clock(),
                        **{k: v for k, v in source.items() if v},
                    },
                },
            )
            changed += 1
        return changed

    def outcome(self, ledger: MemoryLedger, plan_id: str) -> PlanOutcome:
        """The plan's answer now: the request's status as the ledger has it."""
        plan = self.get(ledger, plan_id)
        if plan.request_id is not None and _redacts(plan):  # each request the plan filed
            count = plan.redactions + (1 if plan.intent == "delete" else 0)
            ids = _request_ids(plan.request_id)
            found = [_filed(ledger._service.requests, next(ids)) for _ in range(count)]
            reports = [r for r in found if r is not None]
            if reports:
                return _with_parts(plan, _from_reports(plan, reports))
        elif plan.request_id is not None:
            try:
                report = ledger._service.requests.report(plan.request_id)
                return _with_parts(plan, _from_report(plan, report))
            except NotFound:
                pass
        status = "completed" if plan.state == "executed" else plan.state
        return PlanOutcome(plan.plan_id, plan.intent, status, None, plan.message, plan.targets)


def _with_parts(plan: ForgetPlan, outcome: PlanOutcome) -> PlanOutcome:
    """An executed plan of some parts of a request only says so in its answer too (a
    count: the answer never repeats the request's words)."""
    missing = sum(1 for p in plan.parts if p["status"] == NOT_FOUND)
    if missing:
        note = lexicon().messages[f"{plan.language}_outcome_partial"]
        outcome.message += note.format(count=missing)
    return outcome


def _from_report(plan: ForgetPlan, report: Any) -> PlanOutcome:
    return PlanOutcome(
        plan.plan_id,
        plan.intent,
        report.status,
        report.request_id,
        report.message,
        list(report.all_targets),
        [] if report.completed else list(report.failed_stores),
        [r.to_dict() for r in report.receipts],
        [report.request_id],
    )


#: When a plan's requests end differently, the one its answer reports (the first that
#: is not done, in this order): a plan is done only when every request is.
_WORST = (
    "refused", "blocked", "verification_failed", "partial", "projection_behind", "pending",
)  # fmt: skip


def _from_reports(plan: ForgetPlan, reports: list[Any]) -> PlanOutcome:
    """One answer for the requests a plan filed, from their real statuses, naming each."""
    if not reports:
        message = lexicon().messages[f"{plan.language}_information_nothing_left"]
        return PlanOutcome(plan.plan_id, plan.intent, "completed", None, message, [])
    if len(reports) == 1:
        return _from_report(plan, reports[0])
    statuses = [r.status for r in reports]
    status = next((s for s in _WORST if s in statuses), None)
    if status is None:
        status = "completed" if all(s == "completed" for s in statuses) else statuses[0]
    words = lexicon().messages
    each = words[f"{plan.language}_information_request"]
    message = " ".join(each.format(request_id=r.request_id, message=r.message) for r in reports)
    targets = list(dict.fromkeys(i for r in reports for i in r.all_targets))
    remaining = list(dict.fromkeys(s for r in reports if not r.completed for s in r.failed_stores))
    return PlanOutcome(
        plan.plan_id,
        plan.intent,
        status,
        reports[0].request_id,
        message,
        targets,
        remaining,
        [x.to_dict() for r in reports for x in r.receipts],
        [r.request_id for r in reports],
    )


def _redacts(plan: ForgetPlan) -> bool:
    """Whether a plan redacts spans in places it names (a plan of information)."""
    return plan.redactions > 0


def _request_ids(first: str) -> Iterator[str]:
    """The ids of a plan's requests: its own, then ones derived from it (so a retry
    after a crash finds each request it filed)."""
    yield first
    for n in itertools.count(1):
        yield "req-" + hashlib.sha256(f"{first}:{n}".encode()).hexdigest()[:16]


def _batches(spans_by_item: dict[str, list[str]]) -> list[dict[str, list[str]]]:
    """Redactions in batches a redaction request takes (items and spans per request)."""
    out: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] = {}
    spans: set[str] = set()
    for item in sorted(spans_by_item):
        mine = spans_by_item[item][:MAX_SPANS]
        if current and (len(current) >= MAX_ITEMS or len(spans | set(mine)) > MAX_SPANS):
            out.append(current)
            current, spans = {}, set()
        current[item] = mine
        spans |= set(mine)
    if current:
        out.append(current)
    return out


def _filed(requests: Any, request_id: str) -> Any:
    try:
        return requests.report(request_id)
    except NotFound:
        return None


def _still_holding(ledger: MemoryLedger, batch: dict[str, list[str]]) -> dict[str, list[str]]:
    """The items of a batch that are still there and still hold their spans."""
    log = ledger._service.log
    items = log.get_many([UUID(i) for i in batch])
    out = {}
    for item_id, spans in batch.items():
        item = items.get(UUID(item_id))
        if item is None or item.erased:
            continue
        fields = log.read(item)
        if fields is ERASED:
            continue
        held = [s for s in spans if (p := span_pattern([s])) is not None and _holds(fields, p)]
        if held:
            out[item_id] = held
    return out


def _holds(fields: Any, pattern: Any) -> bool:
    return any(isinstance(v, str) and pattern.search(v) for v in fields.values())


def _message(draft: Draft, language: str) -> str:
    words = lexicon().messages
    if draft.status == "needs_clarification":
        return draft.question or ""
    missing = " ".join(missing_parts(draft.parts, language))
    if draft.status == "nothing_matched" and draft.parts:  # which part, and why
        return words[f"{language}_parts_nothing"].format(missing=missing)
    if draft.status in ("not_a_request", "nothing_matched"):
        return words[f"{language}_{draft.status}"]
    if draft.information:
        planned = _information_message(draft, language)
        if draft.status == "partial_match":
            return words[f"{language}_partial"].format(missing=missing, plan=planned)
        return planned
    labels = [draft.labels.get(i, i) for i in draft.targets[:5]]
    more = len(draft.targets) - len(labels)
    listing = "; ".join(labels) + (f" (+{more})" if more > 0 else "")
    cascade = (
        words[f"{language}_cascade"].format(count=len(draft.cascaded)) if draft.cascaded else ""
    )
    keeps = [k for k in draft.keeps if k not in draft.targets]
    kept = words[f"{language}_keeps"].format(count=len(keeps)) if keeps else ""
    planned = words[f"{language}_{draft.intent}"].format(
        count=len(draft.targets) + len(draft.history),
        cascade=cascade,
        labels=listing,
        keeps=kept,
        spans=len(draft.spans),
    )
    if draft.spans_by_item:  # the facts' values, said elsewhere too
        planned += words[f"{language}_mentions"].format(count=len(draft.spans_by_item))
    if draft.status == "partial_match":  # what is not planned comes first
        return words[f"{language}_partial"].format(missing=missing, plan=planned)
    return planned


def _information_message(draft: Draft, language: str) -> str:
    """What a plan of information would do: each piece with its places, what is erased
    and what is redacted, and what it keeps (the user's words: the sealed part)."""
    words = lexicon().messages
    quote = "“{}”" if language == "zh" else "'{}'"
    sep = "；" if language == "zh" else "; "
    listing = sep.join(
        words[f"{language}_information_piece"].format(
            said=quote.format(p["said"]), count=len(p["places"])
        )
        for p in draft.pieces
        if p["status"] == "resolved"
    )
    erase = {pl["item_id"] for p in draft.pieces for pl in p["places"] if pl["action"] == "erase"}
    cascade = (
        words[f"{language}_cascade"].format(count=len(draft.cascaded)) if draft.cascaded else ""
    )
    kept = ""
    if draft.kept:
        kept = words[f"{language}_information_keeps"].format(
            listing=sep.join(quote.format(k["said"]) for k in draft.kept)
        )
    return words[f"{language}_information"].format(
        listing=listing,
        erase=len(erase),
        redact=len(draft.spans_by_item),
        spans=sum(len(v) for v in draft.spans_by_item.values()),
        cascade=cascade,
        keeps=kept,
    )
