"""The Claude memory tool's commands (`memory_20250818`) as strict models, so the
handler takes exactly what the tool sends and refuses anything else, field by field."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, RootModel, StrictInt, StrictStr

from memory_ledger.write_policy import StrictModel, parse_input

_Path = Annotated[StrictStr, Field(min_length=1, max_length=1024)]
_Text = Annotated[StrictStr, Field(max_length=256 * 1024)]


class View(StrictModel):
    command: Literal["view"]
    path: _Path
    view_range: Annotated[tuple[StrictInt, StrictInt], Field()] | None = None


class Create(StrictModel):
    command: Literal["create"]
    path: _Path
    file_text: _Text


class StrReplace(StrictModel):
    command: Literal["str_replace"]
    path: _Path
    old_str: _Text
    new_str: _Text


class Insert(StrictModel):
    command: Literal["insert"]
    path: _Path
    insert_line: Annotated[StrictInt, Field(ge=0, le=1_000_000)]
    insert_text: _Text


class Delete(StrictModel):
    command: Literal["delete"]
    path: _Path


class Rename(StrictModel):
    command: Literal["rename"]
    old_path: _Path
    new_path: _Path


Command = Annotated[
    View | Create | StrReplace | Insert | Delete | Rename, Field(discriminator="command")
]


class MemoryCommand(RootModel[Command]):
    """Any one command; its JSON schema is the tool's input schema."""


def parse_command(data: object) -> Any:
    """One command, or InvalidWrite naming the failing field; nothing is run."""
    return parse_input(MemoryCommand, data, "memory command", "nothing changed").root  # type: ignore[arg-type]
