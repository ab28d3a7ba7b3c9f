"""Run state (seed 003): what an agent is in the middle of, kept exact.

A run waiting on a tool operation, a user's confirmation or a sub-task is workflow
state, not memory: it is read by its id, never by similarity, and it must be exactly
what was last committed. Each run is one item of kind `run` whose whole state (steps
and attempts, operations and their results, pending events and deadlines, checkpoint
ids, the context snapshot of each attempt) is sealed under the run's key, one version
per transition:

- **compare-and-set**: a transition names the state version it was decided on, and is
  refused (`StaleState`) if the run moved on; two racing writers cannot both commit.
- **idempotent operations**: an operation is an item of its own (kind `run_operation`,
  its id derived from the run's and the operation's, so two callers cannot both start
  it), recorded as started before it runs and with its result after. A retry (after a
  crash, or a duplicate delivery) finds the result instead of running again; one found
  started without a result is *in doubt*, and is settled by asking the caller's
  `lookup` (the tool's own record of that operation id), never by running it a second
  time on a guess. Keeping results out of the run's own state keeps every transition
  the same size however many operations the run made.
- **resume** reads the current state from the log (`get`), never a summary.
- the **context snapshot** of an attempt (its items and versions, and the hash of what
  was shown) is recorded beside the run, as a checkpoint; a retry of the same
  attempt is shown the same items (memory_ledger/agent_state/run_context.py).
- **short-lived**: a run's scratch state and checkpoints are items of their own,
  derived from the run; finishing the run erases them (a retention-expiry request)
  and archives the run, which the retention policy erases after its TTL. Nothing of a
  run enters long-term memory unless promoted through the gate (promotion.py).
- **forgetting** a run reaches its state, scratch, checkpoints and promotions.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from sqlalchemy import Engine, select

from memory_ledger.agent_state.items import AgentItems, StaleState
from memory_ledger.agent_state.promotion import PromotionGate, PromotionRefused
from memory_ledger.agent_state.run_context import RunContext, digest, replay, snapshot, step_diff
from memory_ledger.domain import MemoryItem
from memory_ledger.errors import InvalidTransition, InvalidWrite, NotFound
from memory_ledger.identifiers import is_identifier
from memory_ledger.projections.catalog import catalog
from memory_ledger.projections.facts import facts
from memory_ledger.times import canonical_time
from memory_ledger.write_policy import Provenance, parse_write

STATUSES = ("running", "waiting", "succeeded", "failed", "cancelled")
FINISHED = ("succeeded", "failed", "cancelled")
#: The run's own state, re-sealed whole by every transition: kept small (operations'
#: results and context snapshots are items of their own).
MAX_STATE_BYTES = 64 * 1024
#: One operation's result, or one checkpoint's artifact.
MAX_RESULT_BYTES = 256 * 1024
MAX_TASK_CHARS = 2000
MAX_STEPS, MAX_ATTEMPTS, MAX_OPERATIONS, MAX_PENDING, MAX_CHECKPOINTS = 200, 20, 1000, 100, 50
#: Internal transitions (an operation's start and result, a delivery) re-read and retry
#: when another writer committed first: they do not depend on what that writer did.
RETRIES = 8


class OperationInDoubt(InvalidTransition):
    """An operation was started and its result never recorded (a crash in between):
    only the tool can say whether it happened. Pass `lookup` to ask it."""


@dataclass(frozen=True)
class RunView:
    """A run as the log has it now. `version` is what a transition must name."""

    run_id: str
    version: int
    task: str
    status: str
    state: dict[str, Any]
    steps: dict[str, Any]
    operations: dict[str, Any]
    pending: dict[str, Any]
    received: dict[str, Any]
    deadline: str | None
    checkpoints: list[dict[str, Any]]
    scratch_id: str | None
    promotions: list[dict[str, Any]]
    refusals: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Operation:
    op_id: str
    status: str  # succeeded | failed
    result: Any
    error: str | None
    #: How this call got it: `ran` now, `recorded` earlier, or `recovered` by lookup.
    how: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Runs:
    """One namespace's runs. Given its agent items, the projections engine (to list),
    the namespace's memories (contexts to snapshot, the write boundary promotions go
    through), the erasure of items by request (`erase(ids, basis)`), and the gate."""

    def __init__(
        self,
        items: AgentItems,
        engine: Engine,
        catch_up: Callable[[], object],
        memories: Any,
        erase: Callable[[list[str], str], Any],
        gate: PromotionGate | None = None,
    ) -> None:
        self.items = items
        self.engine = engine
        self.catch_up = catch_up
        self.memories = memories
        self.erase = erase
        self.gate = gate or PromotionGate()

    @property
    def source(self) -> Callable[..., Provenance]:
        """`source(writer, session_id=, turn_id=, tool_call_id=)`: the provenance of the
        next changes (the agent, its session and turn), validated as every write's is."""
        return self.items.source

    # -- reading -------------------------------------------------------------------

    def get(self, run_id: str) -> RunView:
        """The run's current state, read from the log (what `resume` after a restart
        reads: never a summary), with its operations' status (`operation_record` reads
        one operation's result)."""
        run = self._item(run_id)
        return _view(run, self.items, self._operations(run))

    def operation_record(self, run_id: str, op_id: str) -> dict[str, Any] | None:
        """One operation as recorded (status, step, result or error), or None."""
        _id(op_id, "op_id")
        return self._record_of(self._item(run_id), op_id)

    def _record_of(self, run: MemoryItem, op_id: str) -> dict[str, Any] | None:
        found = self.items.find(_operation_id(run.id, op_id), "run_operation")
        if found is None:
            return None
        fields = self.items.fields(found)
        return None if fields is None else dict(json.loads(fields["operation"]))

    resume = get

    def list(self, status: str | None = None) -> list[dict[str, Any]]:
        """The namespace's runs (ids, status, deadline, when), newest first."""
        if status is not None and status not in STATUSES:
            raise InvalidWrite(f"unknown status; expected one of {', '.join(STATUSES)}")
        self.catch_up()
        c = catalog.c
        query = (
            select(c.item_id, c.flags, c.recorded_at, c.tier, c.version)
            .where(c.namespace == self.items.namespace, c.kind == "run")
            .order_by(c.position.desc())
        )
        with self.engine.connect() as conn:
            rows = [dict(r) for r in conn.execute(query).mappings()]
        out = []
        for row in rows:
            codes = _codes(row["flags"])
            if status is None or codes.get("status") == status:
                out.append(
                    {
                        "run_id": row["item_id"],
                        "status": codes.get("status"),
                        "deadline": codes.get("deadline"),
                        "started_at": row["recorded_at"],
                        "archived": row["tier"] == "archived",
                        "version": row["version"],
                    }
                )
        return out

    def overdue(self, now: datetime | None = None) -> builtins.list[dict[str, Any]]:
        """Unfinished runs whose deadline, or an awaited event's, has passed."""
        at = canonical_time(now or self.items.clock())
        return [
            r
            for r in self.list()
            if r["status"] not in FINISHED and r["deadline"] is not None and r["deadline"] <= at
        ]

    # -- transitions (each names the version it was decided on) --------------------

    def start(
        self,
        task: str,
        source: Provenance,
        *,
        state: dict[str, Any] | None = None,
        deadline: datetime | None = None,
    ) -> RunView:
        if not isinstance(task, str) or not 1 <= len(task) <= MAX_TASK_CHARS:
            raise InvalidWrite(f"a run's task is 1 to {MAX_TASK_CHARS} characters", ["task"])
        body = {
            "task": task,
            "status": "running",
            "state": _object(state or {}, "state"),
            "steps": {},
            "pending": {},
            "received": {},
            "deadline": _time(deadline),
            "checkpoints": [],
            "scratch_id": None,
            "promotions": [],
            "refusals": [],
        }
        item = self.items.record("run", "run_state", _fields(body), source, flags=_flags(body))
        return _view(item, self.items)

    def set_state(self, run_id: str, expected_version: int, state: dict[str, Any]) -> RunView:
        """Replace the run's workflow state (what the agent decided on version N)."""
        value = _object(state, "state")

        def apply(body: dict[str, Any]) -> None:
            _unfinished(body)
            body["state"] = value

        return self._change(run_id, apply, expected_version)

    def begin_step(self, run_id: str, expected_version: int, step_id: str) -> RunView:
        """Start a step, or a new attempt of one that failed."""
        _id(step_id, "step_id")

        def apply(body: dict[str, Any]) -> None:
            _unfinished(body)
            step = body["steps"].setdefault(step_id, {"status": "pending", "attempts": []})
            if step["status"] == "running":
                raise InvalidTransition(f"step {step_id} is already running")
            if step["status"] == "succeeded":
                raise InvalidTransition(f"step {step_id} already succeeded")
            if len(body["steps"]) > MAX_STEPS or len(step["attempts"]) >= MAX_ATTEMPTS:
                raise InvalidWrite(f"at most {MAX_STEPS} steps and {MAX_ATTEMPTS} attempts each")
            step["status"] = "running"
            step["attempts"].append({"attempt": len(step["attempts"]) + 1, "status": "running",
                                     "context": None})  # fmt: skip
            body["status"] = "running"

        return self._change(run_id, apply, expected_version)

    def end_step(self, run_id: str, expected_version: int, step_id: str, outcome: str) -> RunView:
        if outcome not in ("succeeded", "failed"):
            raise InvalidWrite("a step ends succeeded or failed", ["outcome"])

        def apply(body: dict[str, Any]) -> None:
            step = _running_step(body, step_id)
            step["status"] = outcome
            step["attempts"][-1]["status"] = outcome

        return self._change(run_id, apply, expected_version)

    def wait_for(
        self,
        run_id: str,
        expected_version: int,
        event_id: str,
        kind: str,
        deadline: datetime | None = None,
    ) -> RunView:
        """The run waits for an event (a tool's result, a user's confirmation, a
        sub-task): it is `waiting` until every pending event arrives."""
        _id(event_id, "event_id")
        if kind not in ("tool_result", "user_confirmation", "subtask"):
            raise InvalidWrite("kind is tool_result, user_confirmation or subtask", ["kind"])

        def apply(body: dict[str, Any]) -> None:
            _unfinished(body)
            if event_id in body["pending"] or event_id in body["received"]:
                raise InvalidTransition(f"event {event_id} is already awaited or received")
            if len(body["pending"]) >= MAX_PENDING:
                raise InvalidWrite(f"at most {MAX_PENDING} pending events")
            body["pending"][event_id] = {"kind": kind, "deadline": _time(deadline)}
            body["status"] = "waiting"

        return self._change(run_id, apply, expected_version)

    def deliver(self, run_id: str, event_id: str, payload: dict[str, Any]) -> RunView:
        """An awaited event arrives. Idempotent: a duplicate delivery changes nothing."""
        _id(event_id, "event_id")
        value = _object(payload, "payload")

        def apply(body: dict[str, Any]) -> None:
            if event_id in body["received"]:
                return  # a duplicate: already taken
            if event_id not in body["pending"]:
                raise NotFound(f"run {run_id} awaits no event {event_id}")
            body["received"][event_id] = {"payload": value, **body["pending"].pop(event_id)}
            if not body["pending"] and body["status"] == "waiting":
                body["status"] = "running"

        return self._change(run_id, apply, None)

    def operation(
        self,
        run_id: str,
        step_id: str,
        op_id: str,
        execute: Callable[[], Any],
        *,
        lookup: Callable[[str], Any] | None = None,
    ) -> Operation:
        """Run a side effect once per `op_id`, however often it is asked for."""
        _id(op_id, "op_id")
        run = self._item(run_id)  # the run's id and source are all an operation needs of it
        recorded = self._record_of(run, op_id)
        if recorded is not None and recorded["status"] in ("succeeded", "failed"):
            return Operation(op_id, recorded["status"], recorded.get("result"),
                             recorded.get("error"), "recorded")  # fmt: skip
        if recorded is not None:  # started, and no result: a crash came in between
            if lookup is None:
                raise OperationInDoubt(
                    f"operation {op_id} was started and its result was not recorded: ask the "
                    "tool whether it happened (pass lookup); it is not run again on a guess"
                )
            found = lookup(op_id)
            if found is not None:
                self._settle(
                    run, op_id, "succeeded", _json(found, "result", MAX_RESULT_BYTES), None
                )
                return Operation(op_id, "succeeded", found, None, "recovered")
        else:
            self._start_operation(run, step_id, op_id)
        try:
            result = _json(execute(), "result", MAX_RESULT_BYTES)
        except Exception as exc:
            self._settle(run, op_id, "failed", None, type(exc).__name__)
            raise
        self._settle(run, op_id, "succeeded", result, None)
        return Operation(op_id, "succeeded", result, None, "ran")

    def finish(self, run_id: str, expected_version: int, outcome: str) -> RunView:
        """End the run: its scratch and checkpoints are erased (a retention-expiry
        request, with receipts), and the run's record is archived until its TTL."""
        if outcome not in FINISHED:
            raise InvalidWrite(f"a run finishes {', '.join(FINISHED)}", ["outcome"])

        def apply(body: dict[str, Any]) -> None:
            _unfinished(body)
            body["status"] = outcome
            body["pending"] = {}

        self._change(run_id, apply, expected_version)
        view = self.get(run_id)
        short_lived = _short_lived(view)
        if short_lived:
            self.erase(short_lived, "retention_expiry")
        item = self._item(run_id)
        if item.archive(period=0, strength=1.0, rule="run_finished"):
            self.items.save(item)
        return self.get(run_id)

    def context(self, run_id: str, step_id: str, query: str, **options: Any) -> RunContext:
        """The context for the running attempt of a step: built and recorded on its
        first call, the recorded snapshot again on every retry of the same attempt."""
        run = self._item(run_id)
        body = _body(self.items, run)
        attempt = _running_step(body, step_id)["attempts"][-1]
        if attempt.get("context") is not None:
            recorded = self._snapshot(attempt["context"]["snapshot_id"])
            context, dropped = replay(self.memories, recorded)
            now = digest(context)
            return RunContext(context, now, now == recorded["hash"], dropped, None)
        context = self.memories.context(query, **options)
        taken = snapshot(context)
        previous = _previous_snapshot(body, step_id)
        diff = step_diff(self._snapshot(previous), taken) if previous is not None else None
        made = self.items.record("run_checkpoint", "context_snapshot",
                                 {"context": json.dumps(taken)}, self._source(run),
                                 derived_from=[run])  # fmt: skip
        ref = {"snapshot_id": str(made.id), "hash": taken["hash"]}

        def apply(b: dict[str, Any]) -> None:
            latest = _running_step(b, step_id)["attempts"][-1]
            if latest["attempt"] != attempt["attempt"] or latest.get("context") is not None:
                raise StaleState("the attempt moved on while its context was built; ask again")
            latest["context"] = ref
            if diff is not None:
                latest["since_previous_step"] = diff

        self._change(run_id, apply, None)
        return RunContext(context, taken["hash"], False, [], diff)

    def _snapshot(self, snapshot_id: str) -> dict[str, Any]:
        found = self.items.fields(self.items.owned(snapshot_id, ("run_checkpoint",)))
        if found is None:
            raise NotFound(f"the context snapshot {snapshot_id} was erased")
        return dict(json.loads(found["context"]))

    # -- scratch and checkpoints: short-lived items of their own ---------------------

    def put_scratch(self, run_id: str, data: dict[str, Any]) -> str:
        """Replace the run's scratch (working) state; it is erased when the run ends."""
        value = json.dumps(_object(data, "scratch"), sort_keys=True)
        run = self._item(run_id)
        view = _view(run, self.items)
        _unfinished({"status": view.status})
        source = self._source(run)
        if view.scratch_id is not None:
            scratch = self.items.owned(view.scratch_id, ("run_scratch",))
            self.items.change(scratch, {"scratch": value}, source,
                              expected_version=scratch.version)  # fmt: skip
            return view.scratch_id
        made = self.items.record("run_scratch", "run_scratch", {"scratch": value}, source,
                                 derived_from=[run])  # fmt: skip
        self._change(run_id, lambda body: body.update(scratch_id=str(made.id)), None)
        return str(made.id)

    def scratch(self, run_id: str) -> dict[str, Any]:
        view = self.get(run_id)
        if view.scratch_id is None:
            return {}
        fields = self.items.fields(self.items.owned(view.scratch_id, ("run_scratch",)))
        return {} if fields is None else dict(json.loads(fields["scratch"]))

    def checkpoint(self, run_id: str, step_id: str, artifact: str) -> str:
        """Keep an artifact of a step (a draft, a tool's output) until the run ends."""
        if not isinstance(artifact, str) or len(artifact.encode("utf-8")) > MAX_RESULT_BYTES:
            raise InvalidWrite(f"an artifact is text of at most {MAX_RESULT_BYTES} bytes")
        run = self._item(run_id)
        body = _body(self.items, run)
        _running_step(body, step_id)
        if len(body["checkpoints"]) >= MAX_CHECKPOINTS:
            raise InvalidWrite(f"a run keeps at most {MAX_CHECKPOINTS} checkpoints")
        made = self.items.record("run_checkpoint", "run_checkpoint", {"artifact": artifact},
                                 self._source(run), derived_from=[run])  # fmt: skip
        entry = {"checkpoint_id": str(made.id), "step_id": step_id}
        self._change(run_id, lambda b: b["checkpoints"].append(entry), None)
        return str(made.id)

    def artifact(self, run_id: str, checkpoint_id: str) -> str | None:
        """A checkpoint's artifact, or None once it is erased."""
        if checkpoint_id not in [c["checkpoint_id"] for c in self.get(run_id).checkpoints]:
            raise NotFound(f"run {run_id} has no checkpoint {checkpoint_id}")
        fields = self.items.fields(self.items.owned(checkpoint_id, ("run_checkpoint",)))
        return None if fields is None else fields["artifact"]

    # -- into long-term memory, and out of everything -------------------------------

    def promote(self, run_id: str, step_id: str, write: dict[str, Any], confirmed_by: str) -> Any:
        """Make a step's result a memory, through the gate and the normal write
        boundary, with provenance pointing at the run and the step."""
        if not isinstance(write, dict) or "provenance" in write:
            raise InvalidWrite(
                "a promotion is a write without provenance: its provenance is the run's",
                ["provenance: not allowed"],
            )
        run = self._item(run_id)
        body = _body(self.items, run)
        made = dict(run.provenance)
        provenance = {
            "writer": made["writer"],
            "written_at": self.items.clock().isoformat(),
            "session_id": made.get("session_id"),
            "run_id": str(run.id),
            "step_id": step_id,
        }
        parsed = parse_write({**write, "provenance": provenance})
        try:
            self.gate.check(body["steps"], step_id, parsed, confirmed_by)
        except PromotionRefused as refused:
            note = {
                "step_id": step_id,
                "rule": refused.rule,
                "at": canonical_time(self.items.clock()),
            }
            self._change(run_id, lambda b: b["refusals"].append(note), None)
            raise
        stored = self.memories.remember(parsed)
        entry = {"item_id": stored.item_id, "step_id": step_id, "confirmed_by": confirmed_by}
        self._change(run_id, lambda b: b["promotions"].append(entry), None)
        return stored

    def forget(self, run_id: str) -> Any:
        """Erase the run, its scratch and checkpoints, and what was promoted from it."""
        run = self._item(run_id)
        ids = [str(run.id), *self._promoted(run)]
        if not run.erased:
            ids += _short_lived(_view(run, self.items))
        ids += [str(_operation_id(run.id, op)) for op in self._operations(run)]
        return self.erase(list(dict.fromkeys(ids)), "user_request")

    # -- inside --------------------------------------------------------------------

    def _item(self, run_id: str) -> MemoryItem:
        return self.items.owned(run_id, ("run",))

    def _source(self, run: MemoryItem) -> Provenance:
        made = run.provenance
        return self.items.source(
            made["writer"], session_id=made.get("session_id"), turn_id=made.get("turn_id"),
            tool_call_id=made.get("tool_call_id"),
        )  # fmt: skip

    def _change(
        self,
        run_id: str,
        apply: Callable[[dict[str, Any]], None],
        expected_version: int | None,
    ) -> RunView:
        """Apply one transition under compare-and-set. With `expected_version`, the
        caller's read decides; without, an internal transition re-reads and retries."""
        for _ in range(RETRIES):
            run = self._item(run_id)
            if expected_version is not None:
                self.items.expect(run, expected_version)
            body = _body(self.items, run)
            before = json.dumps(body, sort_keys=True)
            apply(body)
            if json.dumps(body, sort_keys=True) == before:
                return _shown(run, body, self._operations(run))  # a duplicate: no version
            try:
                self.items.change(run, _fields(body), self._source(run),
                                  expected_version=run.version, flags=_flags(body))  # fmt: skip
            except StaleState:
                if expected_version is not None:
                    raise
                continue
            return _shown(run, body, self._operations(run))
        raise StaleState(f"run {run_id} kept changing under this transition; try again")

    def _start_operation(self, run: MemoryItem, step_id: str, op_id: str) -> None:
        """Record the operation as started: an item whose id only this run and this
        operation id give, so a second start (a racing caller) cannot be recorded."""
        _running_step(_body(self.items, run), step_id)
        if len(self._operations(run)) >= MAX_OPERATIONS:
            raise InvalidWrite(f"a run records at most {MAX_OPERATIONS} operations")
        record = {"op_id": op_id, "step_id": step_id, "status": "started"}
        try:
            self.items.record("run_operation", op_id, {"operation": json.dumps(record)},
                              self._source(run), flags=["status:started"], derived_from=[run],
                              item_id=_operation_id(run.id, op_id),
                              subject=str(run.id))  # fmt: skip
        except StaleState:
            raise InvalidTransition(f"operation {op_id} was started by another caller") from None

    def _settle(
        self, run: MemoryItem, op_id: str, status: str, result: Any, error: str | None
    ) -> None:
        item = self.items.owned(_operation_id(run.id, op_id), ("run_operation",))
        record = self.items.fields(item)
        if record is None:
            raise NotFound(f"operation {op_id} was erased")
        body = dict(json.loads(record["operation"]))
        body.update(status=status, result=result, error=error)
        self.items.change(item, {"operation": json.dumps(body, sort_keys=True)},
                          self._source(run), expected_version=item.version,
                          flags=[f"status:{status}"])  # fmt: skip

    def _operations(self, run: MemoryItem) -> dict[str, Any]:
        """op id -> {status}: the run's operations as the catalog lists them."""
        self.catch_up()
        c = catalog.c
        query = select(c.predicate, c.flags).where(
            c.namespace == self.items.namespace,
            c.kind == "run_operation",
            c.subject == str(run.id),
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return {op: {"status": _codes(flags).get("status")} for op, flags in rows}

    def _promoted(self, run: MemoryItem) -> builtins.list[str]:  # `list` is a method here
        """What was promoted from the run: as the run lists it, and by the provenance of
        the namespace's facts (a crash between a promotion and its listing)."""
        listed = []
        if not run.erased:
            listed = [p["item_id"] for p in _view(run, self.items).promotions]
        self.catch_up()
        needle = f'"run_id": "{run.id}"'
        query = select(facts.c.item_id).where(
            facts.c.namespace == self.items.namespace, facts.c.provenance.contains(needle)
        )
        with self.engine.connect() as conn:
            found = [r[0] for r in conn.execute(query)]
        return list(dict.fromkeys([*listed, *found]))


def _previous_snapshot(body: dict[str, Any], step_id: str) -> str | None:
    """The id of the last snapshot another step recorded (steps keep their start order)."""
    found = None
    for name, step in body["steps"].items():
        if name == step_id:
            continue
        for attempt in step["attempts"]:
            if attempt.get("context"):
                found = attempt["context"]["snapshot_id"]
    return found


def _body(items: AgentItems, run: MemoryItem) -> dict[str, Any]:
    fields = items.fields(run)
    if fields is None:
        raise NotFound(f"run {run.id} was erased")
    return dict(json.loads(fields["state"]))


def _view(run: MemoryItem, items: AgentItems, operations: dict[str, Any] | None = None) -> RunView:
    return _shown(run, _body(items, run), operations)


def _shown(
    run: MemoryItem, body: dict[str, Any], operations: dict[str, Any] | None = None
) -> RunView:
    return RunView(
        run_id=str(run.id), version=int(run.version), operations=operations or {}, **body
    )


def _operation_id(run_id: UUID, op_id: str) -> UUID:
    """An operation's item id: the same for the same run and operation id, always."""
    return uuid5(run_id, f"operation:{op_id}")


def _short_lived(view: RunView) -> list[str]:
    """What ends with the run: scratch, checkpoints, and the context snapshots."""
    ids = [c["checkpoint_id"] for c in view.checkpoints]
    for step in view.steps.values():
        ids += [a["context"]["snapshot_id"] for a in step["attempts"] if a.get("context")]
    return ids + ([view.scratch_id] if view.scratch_id else [])


def _fields(body: dict[str, Any]) -> dict[str, str]:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    if len(text.encode("utf-8")) > MAX_STATE_BYTES:
        raise InvalidWrite(f"a run's state is at most {MAX_STATE_BYTES // 1024} KiB as JSON")
    return {"state": text}


def _flags(body: dict[str, Any]) -> list[str]:
    """The clear codes the catalog lists runs by: status and deadline, no content."""
    flags = [f"status:{body['status']}"]
    due = [d for d in (body.get("deadline"), *(p["deadline"] for p in body["pending"].values()))
           if d]  # fmt: skip
    if due:  # the earliest: the run's own, or an awaited event's
        flags.append(f"deadline:{min(due)}")
    return flags


def _codes(flags: str) -> dict[str, str]:
    out = {}
    for flag in filter(None, flags.split(",")):
        name, _, value = flag.partition(":")
        if value:
            out[name] = value
    return out


def _unfinished(body: dict[str, Any]) -> None:
    if body["status"] in FINISHED:
        raise InvalidTransition(f"the run is {body['status']}: a finished run does not change")


def _running_step(body: dict[str, Any], step_id: str) -> dict[str, Any]:
    _unfinished(body)
    step = body["steps"].get(step_id)
    if step is None or step["status"] != "running":
        raise InvalidTransition(f"step {step_id} is not running: begin it first")
    return step


def _id(value: object, name: str) -> None:
    if not is_identifier(value):
        raise InvalidWrite(f"{name} must be an identifier", [f"{name}: invalid"])


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidWrite("a deadline is a datetime with a time zone", ["deadline"])
    return canonical_time(value)


def _json(value: Any, name: str, limit: int = MAX_STATE_BYTES) -> Any:
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        raise InvalidWrite(f"{name} must be JSON (objects, lists, strings, numbers)") from None
    if len(text.encode("utf-8")) > limit:
        raise InvalidWrite(f"{name} is at most {limit // 1024} KiB as JSON")
    return json.loads(text)


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidWrite(f"{name} is a JSON object", [f"{name}: invalid"])
    return dict(_json(value, name))
