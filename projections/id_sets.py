"""`column IN (values)` with the values bound as ONE parameter, for set operations.

Erasure, catch-up and verification select and delete rows by lists of thousands of ids.
SQLAlchemy's `in_()` makes a bound parameter of every value when the statement is built
and expands them into the SQL text at every execution: for a list of 500 ids that costs
more than the statement itself (a third of a 1,000-item forget went there). `among()`
binds the whole list once: on SQLite as a JSON array read by `json_each`, on PostgreSQL
as an array read by `unnest`. The statement's text no longer depends on the list's
length, so it is compiled once and cached like any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, ClassVar

from sqlalchemy import bindparam
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import UserDefinedType


class _ValueList(UserDefinedType[list[Any]]):
    """The bound list, as each backend reads it."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "TEXT"

    def bind_processor(self, dialect: Dialect) -> Any:
        if dialect.name == "sqlite":
            return lambda value: json.dumps(list(value))
        return lambda value: list(value)


class _ValueSet(ColumnElement[Any]):
    """The bound list as a row source: `(SELECT value FROM json_each(?))` on SQLite,
    `(SELECT unnest(CAST(? AS type[])))` on PostgreSQL."""

    inherit_cache = True
    # SQLAlchemy declares this on HasTraverseInternals as an instance attribute, though
    # it is read from the class (every clause class of its own sets it there).
    _traverse_internals: ClassVar = [  # type: ignore[misc]
        ("column", InternalTraversal.dp_clauseelement),
        ("values", InternalTraversal.dp_clauseelement),
    ]

    def __init__(
        self, column: ColumnElement[Any], values: Iterable[Any] | None, name: str | None = None
    ) -> None:
        self.column = column  # its type names the array's on PostgreSQL
        if name is not None:  # bound at each execution, by name
            self.values = bindparam(name, type_=_ValueList())
        else:
            self.values = bindparam(None, list(values or ()), type_=_ValueList(), unique=True)


def among(column: Any, values: Iterable[Any]) -> ColumnElement[bool]:
    """`column IN values`, the values bound as one parameter (any number of them; an
    empty list matches nothing). A comparison, so SQLite's planner uses the column's
    index (a plain boolean expression would be compared with 1)."""
    return column.op("IN", is_comparison=True)(_ValueSet(column, values))  # type: ignore[no-any-return]


def among_bound(column: Any, name: str) -> ColumnElement[bool]:
    """`among(column, ...)` with the list bound at execution as the parameter `name`: a
    statement built once (per projection, say) and executed with `{name: ids}`, so a
    forget does not construct the same SQL expression ten times over."""
    return column.op("IN", is_comparison=True)(_ValueSet(column, None, name))  # type: ignore[no-any-return]


@compiles(_ValueSet, "sqlite")
def _sqlite(element: _ValueSet, compiler: SQLCompiler, **kw: Any) -> str:
    return f"(SELECT value FROM json_each({compiler.process(element.values, **kw)}))"


@compiles(_ValueSet)
def _default(element: _ValueSet, compiler: SQLCompiler, **kw: Any) -> str:
    array = f"{compiler.dialect.type_compiler_instance.process(element.column.type)}[]"
    return f"(SELECT unnest(CAST({compiler.process(element.values, **kw)} AS {array})))"


def unindexed(column: Any) -> ColumnElement[Any]:
    """The column's value, which no index can serve (`column || ''`), for a filter that
    must not steer the plan: next to `among(item_id, ...)`, SQLite without statistics
    takes `namespace = ?` for the more selective term and scans a heavy namespace's
    every row (100,000 for a one-item forget) instead of looking the ids up."""
    return column.concat("")  # type: ignore[no-any-return]
