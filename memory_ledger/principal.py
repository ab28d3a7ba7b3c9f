"""Who is asking. The namespace of every read and write comes from here, and only here."""

from __future__ import annotations

from dataclasses import dataclass

from memory_ledger.errors import InvalidWrite
from memory_ledger.identifiers import NAMESPACE_PART_RULE, is_namespace_part


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
            if not is_namespace_part(value):
                # Not echoed: it may be anything a caller typed, control characters too.
                raise InvalidWrite(f"invalid principal {name}: use {NAMESPACE_PART_RULE}")

    @property
    def namespace(self) -> str:
        parts = [self.tenant, self.user] + ([self.project] if self.project else [])
        return "/".join(parts)

    @classmethod
    def from_namespace(cls, namespace: str) -> Principal:
        """For operators (the CLI) who name a namespace explicitly: tenant/user[/project].
        Taken exactly as given: a padded or newline-ended namespace is refused, not
        trimmed into another one."""
        parts = namespace.split("/") if isinstance(namespace, str) else []
        if len(parts) not in (2, 3):
            raise InvalidWrite("invalid namespace: expected tenant/user or tenant/user/project")
        return cls(*parts)
