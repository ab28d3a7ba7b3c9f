"""An agent's memory files and run state over HTTP (memory_ledger/agent_state), for
agent tokens: the same commands and actions, with the same validation, as the agent
tools `memory` and `run_state`; changes are recorded as written by `token:<id>`.
Erasing a file or a run needs the forget grant, as every erasure does."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import Field, StrictStr

from memory_ledger.agents.tools import AgentTools, MemoryArgs, RunArgs
from memory_ledger.http.auth import Caller, ForgettingLedger, Ledger
from memory_ledger.http.routes.forget import answer_status
from memory_ledger.operations.shapes import ItemId, StrictModel

router = APIRouter(prefix="/v1", tags=["agent state"])


def _tools(ledger: Any, caller: Any) -> AgentTools:
    return AgentTools(ledger, writer=f"token:{caller.token_id}")


@router.post("/memory-files")
def memory_file_command(ledger: Ledger, caller: Caller, body: MemoryArgs) -> dict[str, Any]:
    """One memory-tool command (`view`, `create`, `str_replace`, `insert`, `delete`,
    `rename`) in the tool's own shape; the answer is the tool's text, as `result`."""
    return _tools(ledger, caller).invoke("memory", body)


@router.get("/memory-files/changes")
def memory_file_changes(
    ledger: Ledger,
    turn_id: Annotated[str | None, Query(max_length=200)] = None,
    session_id: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """What a turn (or a session) changed in the memory files, as diffs, for the user."""
    found = ledger.files.changes(turn_id=turn_id, session_id=session_id)
    return {"changes": [c.to_dict() for c in found]}


class ForgetFileBody(StrictModel):
    path: Annotated[StrictStr, Field(min_length=1, max_length=1024)]


@router.post("/memory-files/forget")
def forget_memory_file(
    ledger: ForgettingLedger, body: ForgetFileBody, response: Response
) -> dict[str, Any]:
    """Erase a file (or a directory's files), every version; 202 until completed."""
    report = ledger.files.forget(body.path)
    response.headers["Location"] = f"/v1/forget-requests/{report.request_id}"
    response.status_code = answer_status(report.status)
    return report.to_dict()


@router.post("/runs")
def run_action(ledger: Ledger, caller: Caller, body: RunArgs) -> dict[str, Any]:
    """Any run action (`start`, `get`, `list`, `begin_step`, ...), as the `run_state`
    tool takes it; transitions name `expected_version`, and a stale one is a 409."""
    return _tools(ledger, caller).invoke("run_state", body)


@router.get("/runs")
def list_runs(
    ledger: Ledger, status: Annotated[str | None, Query(max_length=20)] = None
) -> dict[str, Any]:
    return {"runs": ledger.runs.list(status)}


@router.get("/runs/{run_id}")
def get_run(ledger: Ledger, run_id: ItemId) -> dict[str, Any]:
    """The run's current state, read from the log (what resuming reads)."""
    return ledger.runs.get(str(run_id)).to_dict()


@router.post("/runs/{run_id}/forget")
def forget_run(ledger: ForgettingLedger, run_id: ItemId, response: Response) -> dict[str, Any]:
    """Erase the run with its scratch, checkpoints and promotions; 202 until completed."""
    report = ledger.runs.forget(str(run_id))
    response.headers["Location"] = f"/v1/forget-requests/{report.request_id}"
    response.status_code = answer_status(report.status)
    return report.to_dict()
