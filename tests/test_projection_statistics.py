"""On PostgreSQL the projection runner analyses its tables as they grow: their id-list
statements are planned from table statistics, and a table filled faster than autovacuum
analyses it (or with autovacuum off, as on this CI machine) was planned as empty, so one
lookup of 1,000 ids read every row once per id."""

from __future__ import annotations

import psycopg
import pytest
from factories import fact

from memory_ledger.api import MemoryService
from memory_ledger.principal import Principal
from memory_ledger.projections import runner as runner_module

pytestmark = pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres)]
)


def _rows_known(url: str) -> dict[str, float]:
    """The planner's row count of each table: -1 until the table is first analysed."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, reltuples FROM pg_class "
            "WHERE relname IN ('facts', 'catalog', 'keyword_docs')"
        ).fetchall()
    return {str(name): float(count) for name, count in rows}


def test_the_tables_are_analysed_after_many_events(
    service: MemoryService, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "ANALYZE_EVERY", 40)
    alice = service.for_principal(Principal("acme", "alice"))
    alice.remember_many([fact(f"p{n}", f"value {n}") for n in range(30)])
    service.runner.catch_up()
    assert set(_rows_known(pg_url).values()) == {-1}  # 30 < 40: not analysed

    alice.remember_many([fact(f"q{n}", f"value {n}") for n in range(30)])
    service.runner.catch_up()  # passes 40 events: the next batch starts with ANALYZE
    alice.remember(fact("r", "one more"))
    service.runner.catch_up()
    known = _rows_known(pg_url)  # as analysed before that batch: 60 rows
    assert known["facts"] == 60 and known["catalog"] == 60 and known["keyword_docs"] == 60
