"""Who is asking. The namespace of every read and write comes from here, and only here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_ledger.errors import InvalidWrite

_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: tenant and user, optionally narrowed to a project."""

    tenant: str
    user: str
    project: str | None = None

    def __post_init__(self) -> None:
        for name in ("tenant", "user", "project"):
            value = getattr(self, name)
            if value is None and name == "project":
                continue
            if not isinstance(value, str) or not _PART.match(value):
                raise InvalidWrite(
                    f"invalid principal {name} {value!r}: use letters, digits, '_', '.', '-'"
                )

    @property
    def namespace(self) -> str:
        parts = [self.tenant, self.user] + ([self.project] if self.project else [])
        return "/".join(parts)

    @classmethod
    def from_namespace(cls, namespace: str) -> Principal:
        """For operators (the CLI) who name a namespace explicitly: tenant/user[/project]."""
        parts = namespace.strip().split("/")
        if len(parts) not in (2, 3):
            raise InvalidWrite(
                f"invalid namespace {namespace!r}: expected tenant/user or tenant/user/project"
            )
        return cls(*parts)
