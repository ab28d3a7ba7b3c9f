"""A forget of a few items in a heavy namespace looks the ids up; it never walks the
namespace. SQLite without table statistics took `namespace = ?` for the more selective
term beside `item_id IN (list)` and read a heavy namespace's every row: a one-item
forget at 100,000 items cost 3 s instead of 0.1 s, with no test noticing. Here every
statement a one-item forget runs with an id list is planned by SQLite and the plan
checked: the ids lead (a key or id index), never a namespace index alone."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from factories import fact, turn
from sqlalchemy import event

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.principal import Principal


def test_a_one_item_forget_looks_ids_up(tmp_path: Path) -> None:
    settings = Settings.resolve(tmp_path / "data")
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "heavy"))
        writes = [turn(f"note {n} about the garden", turn_id=f"t{n}") for n in range(300)]
        ledger.remember_many([*writes, fact("phone", "206-555-0148")])
        target = ledger.remember(fact("badge", "B-7731")).item_id
        service.runner.catch_up()
        service.vectors.catch_up()

        seen: list[tuple[str, tuple[object, ...]]] = []

        def capture(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
            if "json_each" in statement and not executemany:
                seen.append((statement, tuple(parameters or ())))

        event.listen(service.runner.engine, "before_cursor_execute", capture)
        try:
            assert ledger.forget(target).status == "completed"
        finally:
            event.remove(service.runner.engine, "before_cursor_execute", capture)
        database = Path(str(service.runner.engine.url.database))

    assert seen, "a forget selects its rows by id lists"
    walked = []
    with sqlite3.connect(database) as db:
        for statement, parameters in seen:
            if statement.lstrip().upper().startswith(("INSERT", "UPDATE")):
                continue
            plan = db.execute(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
            steps = [str(row[-1]) for row in plan]
            by_namespace = [s for s in steps if "(namespace=?)" in s or s.startswith("SCAN ")]
            by_namespace = [s for s in by_namespace if "json_each" not in s]
            if by_namespace:
                walked.append((statement.split("FROM")[1][:80], by_namespace))
    assert not walked, walked
