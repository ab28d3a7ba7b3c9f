"""`among()` selects exactly what `in_()` selects, on both backends, for any values."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import (
    BigInteger,
    Column,
    Engine,
    MetaData,
    Table,
    Text,
    create_engine,
    delete,
    insert,
    select,
)

from memory_ledger.projections.id_sets import among

metadata = MetaData()
rows = Table(
    "among_rows", metadata, Column("item_id", Text, primary_key=True), Column("term", BigInteger)
)
TEXTS = st.text(min_size=0, max_size=12)  # any text: quotes, NULs, brackets, non-ASCII
TERMS = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.fixture
def engine(backend: str, tmp_path, request: pytest.FixtureRequest) -> Iterator[Engine]:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'among.db'}"
    else:
        url = request.getfixturevalue("pg_url").replace("postgresql://", "postgresql+psycopg://")
    made = create_engine(url)
    metadata.create_all(made)
    yield made
    made.dispose()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    stored=st.dictionaries(TEXTS, TERMS, max_size=30),
    wanted=st.lists(TEXTS, max_size=30),
    terms=st.lists(TERMS, max_size=10),
)
def test_among_selects_what_in_selects(
    engine: Engine, stored: dict[str, int], wanted: list[str], terms: list[int]
) -> None:
    stored = {k.replace("\x00", ""): v for k, v in stored.items()}  # PostgreSQL text has no NUL
    wanted = [w.replace("\x00", "") for w in wanted]
    with engine.begin() as conn:
        conn.execute(delete(rows))
        if stored:
            conn.execute(insert(rows), [{"item_id": k, "term": v} for k, v in stored.items()])
        wanted_ids = sorted(
            conn.execute(select(rows.c.item_id).where(among(rows.c.item_id, wanted))).scalars()
        )
        assert wanted_ids == sorted(k for k in stored if k in set(wanted))
        others = sorted(
            conn.execute(select(rows.c.item_id).where(~among(rows.c.item_id, wanted))).scalars()
        )
        assert others == sorted(k for k in stored if k not in set(wanted))
        by_term = sorted(
            conn.execute(select(rows.c.item_id).where(among(rows.c.term, terms))).scalars()
        )
        assert by_term == sorted(k for k, v in stored.items() if v in set(terms))
        conn.execute(delete(rows).where(among(rows.c.item_id, wanted)))
        left = sorted(conn.execute(select(rows.c.item_id)).scalars())
        assert left == sorted(k for k in stored if k not in set(wanted))


def test_the_statement_is_compiled_once_whatever_the_number_of_values(engine: Engine) -> None:
    """The point of `among`: the SQL text does not grow with the list, so it is cached."""
    texts = set()
    with engine.connect() as conn:
        for n in (1, 10, 1000):
            query = select(rows.c.item_id).where(among(rows.c.item_id, [str(i) for i in range(n)]))
            texts.add(str(query.compile(dialect=conn.dialect)))
            conn.execute(query).all()
    assert len(texts) == 1
