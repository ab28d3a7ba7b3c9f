"""One planning call's state, fixed before any planner runs (`PlanningRequest`).

Each call of the flow (plan, choose, find_information, forget_information) builds one
and hands the same object to every planner it uses: the item planner, the information
planner, the model protocol's planner and the size check. It says whose memory is read
(`namespace`), on whose behalf (`requested_by`), at what time (`now`), what was asked
(`reading`, `text`, `session_id`) and what planning may read of the store, on one
connection. Frozen, so no planner changes it for another, and nothing is set onto a
planner from outside after it is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from memory_ledger.event_log import EventLog
    from memory_ledger.forgetting.planning.lexicon import Lexicon
    from memory_ledger.forgetting.planning.pool import PoolRows
    from memory_ledger.forgetting.planning.reading import Reading
    from memory_ledger.projections.base import Projection
    from memory_ledger.projections.vector_index import VectorIndex


@dataclass(frozen=True)
class StoreReads:
    """What planning reads of the store, on one connection: the catalog and facts
    (through `conn`), item texts (the `log`), meaning (`vectors`) and the mention
    lookup (`projections`; None plans requests about items only)."""

    conn: Connection
    log: EventLog
    vectors: VectorIndex | None
    projections: Sequence[Projection] | None = None
    #: The namespaces' clear attributes kept between plans (pool.py), or None.
    kept_rows: PoolRows | None = None


@dataclass(frozen=True)
class PlanningRequest:
    """One call's request, as every planner of the call sees it."""

    namespace: str
    requested_by: str
    now: datetime
    #: What the words were read as (a reading of the chosen plan, for a choice; a
    #: deletion in the protocol's language, for the model protocol).
    reading: Reading
    store: StoreReads
    lex: Lexicon
    #: The words read (locations and statements cut), "" when none were given.
    text: str = ""
    #: The conversation the request was made in ("this conversation").
    session_id: str | None = None
