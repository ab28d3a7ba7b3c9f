"""Forget plans at rest: what a request in words resolved to, until it is confirmed.

A plan lives between two calls (plan, then execute after the user said yes), perhaps in
two processes, so it is stored. Its outline (state, intent, scope, item ids) is ids and
codes only, like the ledger. What a user would recognise (the candidates' labels with
previews of their text, the clarifying question, a redaction's spans, an update's new
value) is personal content: it is sealed under a key of the plan's own (`plan:<id>` in
the key store), which is destroyed when the plan is executed, expires or is withdrawn.
The request's words are not stored, with one exception sealed like the labels: a
request of several parts keeps each part's own words (`parts[].said`), so the user
can see which part is which and which one matched nothing.

A plan is also a store of the data map (`PlansStore`): a forget that erases an item an
open plan shows withdraws that plan, so no label of an erased item survives anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Engine, Integer, MetaData, Table, Text, select, update

from memory_ledger.crypto import seal, unseal
from memory_ledger.errors import InvalidTransition, InvalidWrite, NotFound
from memory_ledger.identifiers import PLAN_ID
from memory_ledger.store_protocol import Evidence, Receipt
from memory_ledger.times import canonical_time

if TYPE_CHECKING:
    from memory_ledger.event_log import EventLog

#: How long a plan waits for its confirmation. Long enough for a user to read it and
#: answer; short enough that the memory it describes has not moved on.
PLAN_TTL = timedelta(hours=1)
KEY_PREFIX = "plan:"
PURPOSE = b"forget-plan"
OPEN = "open"

plans_metadata = MetaData()
plans_table = Table(
    "memory_ledger_plans",
    plans_metadata,
    Column("plan_id", Text, primary_key=True),
    Column("namespace", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text, nullable=False),
    # open | executing | executed | expired | withdrawn | stale
    Column("state", Text, nullable=False),
    Column("outline", Text, nullable=False),  # ids and codes only (JSON)
    Column("sealed", Text),  # labels, question, spans, new value: under plan:<id>
    Column("key_generation", Integer),
    Column("request_id", Text),
    Column("finished_at", Text),
)


@dataclass
class ForgetPlan:
    """A request in words, resolved: what would be done, to what, and what stays.

    Item ids and codes are safe to log; `labels`, `candidates[].label`, `question`,
    `spans`, `new_value`, `message` and `parts[].said` repeat the user's data and are
    for the user's eyes only."""

    plan_id: str
    #: planned | partial_match (some parts of the request only; `parts` says which are
    #: not planned, and why) | needs_clarification | not_a_request | nothing_matched
    status: str
    intent: str | None
    language: str
    scope: dict[str, Any] | None
    targets: list[str]
    cascaded: list[str]
    history: list[str]
    keeps: list[str]
    candidates: list[dict[str, Any]]
    labels: dict[str, str]
    stores: list[str]
    question: str | None
    message: str
    expires_at: str
    conclusion: bool = False
    spans: list[str] = field(default_factory=list)
    new_value: str | None = None
    reason: str = ""
    state: str = OPEN
    request_id: str | None = None
    #: The conversation the request was made in (ids only), for an update's provenance.
    session_id: str | None = None
    turn_id: str | None = None
    #: Each target's version when planned: an update retried after a crash sees it done.
    versions: dict[str, int] = field(default_factory=dict)
    #: A redaction's kinds of text ("time", "phone"), to find them in chosen candidates.
    span_kinds: list[str] = field(default_factory=list)
    #: A request of several parts: every part, in order, with `said` (its words) and,
    #: when it borrowed words of the part before, `read_as` (both for the user's eyes
    #: only), `status` (resolved | ambiguous | not_found), `item_ids` (its targets, or
    #: its candidates) and `reason` (a code, when not found).
    parts: list[dict[str, Any]] = field(default_factory=list)
    #: A request that names information: every piece it names, in order, with `kind`
    #: (code, phone, amount, quoted, name, ..., description), `status`, `reason` and
    #: its `places` (`item_id`, `kind` of item, `action` erase | redact, `spans`: how
    #: many are redacted there), and `said` (its words: for the user's eyes only).
    pieces: list[dict[str, Any]] = field(default_factory=list)
    #: What the request keeps ("the current amount remains 3,150 EUR"): `kind`,
    #: `item_ids` (where it is said; never touched) and `said` (the user's eyes only).
    kept: list[dict[str, Any]] = field(default_factory=list)
    #: The spans each redacted place loses, as written there (the user's eyes only).
    spans_by_item: dict[str, list[str]] = field(default_factory=dict)
    #: How many redaction requests executing it files (a count, in clear: a run that
    #: stopped half way finds each by the id the plan derives for it).
    redactions: int = 0
    #: A plan whose question was answered (`choose_candidates`): the plan that answered
    #: it, the one to execute instead (an id, in clear).
    replaced_by: str | None = None
    #: What the model protocol (located.py) did beyond the plan: a value said nowhere, a
    #: chosen item that holds a keep, the reason given. Names values: sealed.
    note: str = ""
    #: What it would touch, in counts (blast.py): `places`, `items`, `namespace_items`,
    #: `share` of the namespace, and `scope` when it is not a list of items. Every plan
    #: made from words has one; the user sees the size before confirming.
    blast: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def outline(self) -> dict[str, Any]:
        """What is stored in clear: ids, codes, the scope as the ledger records it.
        Read from the fields as they are, for `json.dumps` (nothing here changes them):
        `to_dict` deep-copies every place of a plan, 100 ms for a plan of 700 turns."""
        body = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in (
            "labels", "question", "spans", "new_value", "message", "spans_by_item", "note"
        ):  # fmt: skip
            body.pop(name)
        body["candidates"] = [c["item_id"] for c in self.candidates]
        body["parts"] = [
            {k: v for k, v in p.items() if k not in ("said", "read_as")} for p in self.parts
        ]
        body["pieces"] = [{k: v for k, v in p.items() if k != "said"} for p in self.pieces]
        body["kept"] = [{k: v for k, v in p.items() if k != "said"} for p in self.kept]
        return body

    def secret(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "candidates": self.candidates,
            "question": self.question,
            "spans": self.spans,
            "new_value": self.new_value,
            "message": self.message,
            "parts_said": [[p.get("said", ""), p.get("read_as", "")] for p in self.parts],
            "pieces_said": [p.get("said", "") for p in self.pieces],
            "kept_said": [p.get("said", "") for p in self.kept],
            "spans_by_item": self.spans_by_item,
            "note": self.note,
        }


def check_plan_id(plan_id: object) -> str:
    if not isinstance(plan_id, str) or not PLAN_ID.fullmatch(plan_id):
        raise InvalidWrite("not a plan id: expected plan- and 16 hex digits", ["plan_id: invalid"])
    return plan_id


class PlanRecords:
    """Plans of every namespace in one table of the store's database."""

    def __init__(self, engine: Engine, log: EventLog) -> None:
        """Creates the table if it is missing: call it under the store's schema lock."""
        self.engine = engine
        self.log = log
        plans_metadata.create_all(engine, checkfirst=True)

    def save(self, plan: ForgetPlan, now: datetime, namespace: str) -> None:
        generation, key = self.log.derived_key(KEY_PREFIX + plan.plan_id, create=True)  # type: ignore[misc]
        sealed = seal(
            key, KEY_PREFIX + plan.plan_id, generation, json.dumps(plan.secret()).encode(), PURPOSE
        )
        with self.engine.begin() as conn:
            conn.execute(
                plans_table.insert().values(
                    plan_id=plan.plan_id,
                    namespace=namespace,
                    created_at=canonical_time(now),
                    expires_at=plan.expires_at,
                    state=OPEN,
                    outline=json.dumps(plan.outline()),
                    sealed=sealed,
                    key_generation=generation,
                )
            )

    def load(self, namespace: str, plan_id: str, now: datetime) -> ForgetPlan:
        """The plan, if it is this namespace's; another namespace's is not found, as a
        missing one is (no existence leak). An open plan past its time expires here."""
        check_plan_id(plan_id)
        with self.engine.connect() as conn:
            row = (
                conn.execute(select(plans_table).where(plans_table.c.plan_id == plan_id))
                .mappings()
                .first()
            )
        if row is None or row["namespace"] != namespace:
            raise NotFound(f"no forget plan {plan_id}")
        plan = ForgetPlan(**_from_outline(json.loads(row["outline"])))
        plan.state = row["state"]
        plan.request_id = row["request_id"]
        if plan.state == OPEN and row["expires_at"] <= canonical_time(now):
            self.close(plan_id, "expired", now)
            plan.state = "expired"
        if plan.state in (OPEN, "executing"):
            keys = self.log.keys_for([KEY_PREFIX + plan_id])
            key = keys.data_key(KEY_PREFIX + plan_id, row["key_generation"])
            if key is not None and row["sealed"]:
                opened = unseal(
                    key, KEY_PREFIX + plan_id, row["key_generation"], row["sealed"], PURPOSE
                )
                secret = json.loads(opened)
                plan.labels = secret["labels"]
                plan.candidates = secret["candidates"]
                plan.question = secret["question"]
                plan.spans = secret["spans"]
                plan.new_value = secret["new_value"]
                plan.message = secret["message"]
                for part, words in zip(plan.parts, secret.get("parts_said", []), strict=False):
                    part["said"], read_as = words
                    if read_as:
                        part["read_as"] = read_as
                for piece, said in zip(plan.pieces, secret.get("pieces_said", []), strict=False):
                    piece["said"] = said
                for kept, said in zip(plan.kept, secret.get("kept_said", []), strict=False):
                    kept["said"] = said
                plan.spans_by_item = secret.get("spans_by_item", {})
                plan.note = secret.get("note", "")
        return plan

    def claim(self, plan_id: str, request_id: str) -> bool:
        """Open -> executing, once: of two confirmations racing, one executes."""
        with self.engine.begin() as conn:
            done = conn.execute(
                update(plans_table)
                .where(plans_table.c.plan_id == plan_id, plans_table.c.state == OPEN)
                .values(state="executing", request_id=request_id)
            )
        return done.rowcount == 1

    def close(
        self, plan_id: str, state: str, now: datetime, replaced_by: str | None = None
    ) -> None:
        """Executed, expired, withdrawn or stale: its sealed part becomes unreadable. A
        plan withdrawn because another answered its question names that one."""
        values: dict[str, Any] = {"state": state, "sealed": None}
        with self.engine.begin() as conn:
            if replaced_by is not None:
                raw = conn.execute(
                    select(plans_table.c.outline).where(plans_table.c.plan_id == plan_id)
                ).scalar_one()
                values["outline"] = json.dumps(json.loads(raw) | {"replaced_by": replaced_by})
            conn.execute(
                update(plans_table)
                .where(plans_table.c.plan_id == plan_id)
                .values(**values, finished_at=canonical_time(now))
            )
        self.log.destroy_derived_keys([KEY_PREFIX + plan_id])

    def expire_due(self, namespace: str, now: datetime) -> int:
        """Expire this namespace's open plans past their time (called as plans are made)."""
        with self.engine.connect() as conn:
            due = list(
                conn.execute(
                    select(plans_table.c.plan_id).where(
                        plans_table.c.namespace == namespace,
                        plans_table.c.state == OPEN,
                        plans_table.c.expires_at <= canonical_time(now),
                    )
                ).scalars()
            )
        for plan_id in due:
            self.close(plan_id, "expired", now)
        return len(due)

    def showing(self, item_ids: Sequence[str]) -> list[str]:
        """Plans whose sealed part is readable and whose outline names any of the items."""
        wanted = set(item_ids)
        found = []
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(plans_table.c.plan_id, plans_table.c.outline).where(
                    plans_table.c.sealed.is_not(None)
                )
            )
            for plan_id, raw in rows:
                outline = json.loads(raw)
                named = {*outline["targets"], *outline["cascaded"], *outline["keeps"]}
                named |= {*outline["history"], *outline["candidates"]}
                named |= {i for p in outline.get("parts", []) for i in p["item_ids"]}
                named |= {pl["item_id"] for p in outline.get("pieces", []) for pl in p["places"]}
                if named & wanted:
                    found.append(plan_id)
        return found

    def rows(self) -> Iterator[bytes]:
        with self.engine.connect() as conn:
            for row in conn.execute(select(plans_table)):
                yield json.dumps(dict(row._mapping)).encode()


def _from_outline(outline: dict[str, Any]) -> dict[str, Any]:
    body = dict(outline)
    body["candidates"] = [{"item_id": i} for i in outline["candidates"]]
    body["parts"] = [{"said": "", **p} for p in outline.get("parts", [])]
    body["pieces"] = [{"said": "", **p} for p in outline.get("pieces", [])]
    body["kept"] = [{"said": "", **p} for p in outline.get("kept", [])]
    body.update(
        labels={}, question=None, spans=[], new_value=None, message="", spans_by_item={}, note=""
    )
    return body


class PlansStore:
    """Open forget plans, as a store of the data map: an erased item's label must not
    outlive it in a plan waiting for confirmation."""

    name = "forget_plans"
    holds = "forget plans awaiting confirmation (candidates' labels, sealed per plan)"

    def __init__(self, plans: PlanRecords, clock: Any) -> None:
        self.plans = plans
        self.clock = clock

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        withdrawn = self.plans.showing(item_ids)
        for plan_id in withdrawn:
            self.plans.close(plan_id, "withdrawn", self.clock())
        evidence = self.verify_absent(item_ids)
        status = "ok" if evidence.absent else "failed"
        return Receipt(
            self.name,
            "plans_withdrawn",
            len(item_ids),
            status,
            {"withdrawn": len(withdrawn)} | dict(evidence.detail),
        )

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        left = self.plans.showing(item_ids)
        return Evidence(self.name, not left, {"open_plans_naming_targets": len(left)})

    def at_rest(self) -> Iterator[bytes]:
        return self.plans.rows()

    def rebuild(self) -> int:
        return 0  # plans are not derived from the log: nothing to rebuild, nothing returns


def require_executable(plan: ForgetPlan) -> None:
    """Only an open, planned plan runs; every other state says what to do instead."""
    if plan.state == "executed":
        raise InvalidTransition(
            f"plan {plan.plan_id} was already executed as request {plan.request_id}; "
            "ask for the request's status instead"
        )
    if plan.state == "expired":
        raise InvalidTransition(f"plan {plan.plan_id} expired; plan the request again")
    if plan.replaced_by is not None:
        raise InvalidTransition(
            f"plan {plan.plan_id} was answered: plan {plan.replaced_by} replaced it; "
            f"execute plan {plan.replaced_by} instead"
        )
    if plan.state in ("withdrawn", "stale"):
        raise InvalidTransition(
            f"plan {plan.plan_id} no longer matches the memory ({plan.state}); plan the "
            "request again"
        )
    if plan.status == "needs_clarification":
        raise InvalidTransition(
            f"plan {plan.plan_id} needs clarification: choose among its candidates first"
        )
    if plan.status not in ("planned", "partial_match"):
        # partial_match runs what was found: its message and `parts` say, before the
        # user confirms, which parts of the request matched nothing
        raise InvalidTransition(f"plan {plan.plan_id} has nothing to execute ({plan.status})")
