"""An agent's own work, beside its memories: run state (runs.py) and memory files
(files.py), in the same log and under the same forgetting (items.py)."""

from memory_ledger.agent_state.files import FileChange, MemoryFiles
from memory_ledger.agent_state.items import AgentItems, StaleState
from memory_ledger.agent_state.promotion import PromotionGate, PromotionRefused
from memory_ledger.agent_state.runs import Operation, OperationInDoubt, Runs, RunView

AGENT_KINDS = ("run", "run_operation", "run_scratch", "run_checkpoint", "file")

__all__ = [
    "AGENT_KINDS",
    "AgentItems",
    "FileChange",
    "MemoryFiles",
    "Operation",
    "OperationInDoubt",
    "PromotionGate",
    "PromotionRefused",
    "RunView",
    "Runs",
    "StaleState",
]
