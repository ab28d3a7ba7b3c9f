"""The request and argument shapes the surfaces validate input with, and the bounds they
announce, re-exported from where the library defines them: a surface imports these from
the library's public modules and nothing of its internals, so a shape can move inside
the library without touching the CLI or the HTTP routes."""

from __future__ import annotations

from memory_ledger.forgetting.planning.flow import MAX_CHOICES, MAX_REQUEST_CHARS
from memory_ledger.forgetting.planning.located import (
    MAX_CHOSEN,
    MAX_DESCRIPTION_CHARS,
    MAX_REASON_CHARS,
    MAX_VALUE_CHARS,
    MAX_VALUES,
)
from memory_ledger.forgetting.scope import ForgetScope
from memory_ledger.identifiers import Identifier, ItemId, is_identifier, is_namespace
from memory_ledger.retrieval.context import ContextRequest
from memory_ledger.write_policy import MemoryUpdate, MemoryWrite, Origin, Sensitivity, StrictModel

__all__ = [
    "MAX_CHOICES",
    "MAX_CHOSEN",
    "MAX_DESCRIPTION_CHARS",
    "MAX_REASON_CHARS",
    "MAX_REQUEST_CHARS",
    "MAX_VALUES",
    "MAX_VALUE_CHARS",
    "ContextRequest",
    "ForgetScope",
    "Identifier",
    "ItemId",
    "MemoryUpdate",
    "MemoryWrite",
    "Origin",
    "Sensitivity",
    "StrictModel",
    "is_identifier",
    "is_namespace",
]
