"""Bearer tokens, stored hashed.

A token is `mlt_<id>_<secret>`: the id names its row, the secret (32 random bytes) is
shown once at creation and stored only as its SHA-256 (a random secret that long needs
no slow hash: there is nothing to guess). Authentication compares in constant time and
answers every failure the same way (`Unauthenticated`), so a caller learns nothing about
which tokens exist. Revoking keeps the row (ids and times only), for the audit.

Tokens are kept beside the stores (`access.sqlite`, or the PostgreSQL schema: see
memory_ledger/side_tables.py), not in a backup: a restore never brings back a revoked
token.

A token verified once is remembered in memory (`TokenCache`), because reading its row
for every request was a large part of what an HTTP call cost. The cache never outlives a
revocation: on SQLite every lookup first asks the file whether anything was committed
to it since (`PRAGMA data_version`, microseconds, and it sees commits of other
processes too, such as `memory-ledger tokens revoke`), and forgets everything if so; a
revocation through this store drops its entry at once. On PostgreSQL there is no such
cheap question, so nothing is cached there and every lookup reads the row. Expiry is
checked on every use, cached or not.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import Column, MetaData, Table, Text, select, update

from memory_ledger import side_tables
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite, NotFound, Unauthenticated
from memory_ledger.identifiers import NAMESPACE_PART_RULE, is_namespace, is_namespace_part
from memory_ledger.principal import Principal
from memory_ledger.times import canonical_time

Role = Literal["agent", "compliance", "ops"]
Grant = Literal["forget"]
ROLES: tuple[Role, ...] = ("agent", "compliance", "ops")
GRANTS: tuple[Grant, ...] = ("forget",)
PREFIX = "mlt_"
_TOKEN = re.compile(r"mlt_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
MAX_LABEL = 100
ACCESS_FILE = "access.sqlite"

tokens_metadata = MetaData()
tokens_table = Table(
    "memory_ledger_tokens",
    tokens_metadata,
    Column("token_id", Text, primary_key=True),
    Column("secret_sha256", Text, nullable=False),
    Column("namespace", Text, nullable=False),  # a tenant, a user, or a project: a subtree
    Column("role", Text, nullable=False),
    Column("grants", Text, nullable=False),  # JSON list
    Column("label", Text),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text),
    Column("revoked_at", Text),
)


@dataclass(frozen=True)
class Access:
    """What an authenticated token may reach."""

    token_id: str
    namespace: str
    role: Role
    grants: frozenset[str]

    def covers(self, namespace: str) -> bool:
        """Whether `namespace` is the token's own or inside its subtree."""
        return namespace == self.namespace or namespace.startswith(self.namespace + "/")

    def may_forget(self, namespace: str) -> bool:
        return self.role == "agent" and "forget" in self.grants and self.covers(namespace)

    def principal(self) -> Principal:
        """The principal an agent token acts as: its namespace, which must name a user."""
        return Principal.from_namespace(self.namespace)


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never its secret."""

    token_id: str
    namespace: str
    role: str
    grants: list[str]
    label: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def check_subtree(namespace: object, role: str) -> str:
    """An agent token names a user (tenant/user or tenant/user/project); compliance and
    ops tokens may name a whole tenant."""
    if role == "agent":
        if not is_namespace(namespace):
            raise InvalidWrite(
                "an agent token's namespace is tenant/user or tenant/user/project",
                ["namespace: invalid"],
            )
    elif not (is_namespace(namespace) or is_namespace_part(namespace)):
        raise InvalidWrite(
            f"a namespace is a tenant, tenant/user or tenant/user/project ({NAMESPACE_PART_RULE})",
            ["namespace: invalid"],
        )
    return str(namespace)


@dataclass(frozen=True)
class _Verified:
    """A token whose row was read and matched: enough to check a later use without the row."""

    secret_sha256: str
    access: Access
    expires_at: str | None
    verified_at: float  # time.monotonic()


class TokenCache:
    """Tokens verified recently, in memory: at most `max_entries` (least recently used
    go first), each for at most `max_age` seconds, and all of them only while the
    tokens' file is unchanged (see the module's docstring). A lookup that is not here
    reads the row; a refusal is never remembered, so an unknown token always costs a read."""

    def __init__(self, path: str, max_entries: int = 1024, max_age: float = 60.0) -> None:
        self.max_entries = max_entries
        self.max_age = max_age
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Verified] = OrderedDict()
        # Read-only, used only for `data_version`, from any thread under the lock.
        self._probe = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._version = self._data_version()

    def _data_version(self) -> int:
        return int(self._probe.execute("PRAGMA data_version").fetchall()[0][0])

    def version(self) -> int:
        """The file's version now; a change since the last look empties the cache, since
        the change may be a revocation."""
        with self._lock:
            version = self._data_version()
            if version != self._version:
                self._entries.clear()
                self._version = version
            return version

    def get(self, token_id: str) -> _Verified | None:
        with self._lock:
            found = self._entries.get(token_id)
            if found is None:
                return None
            if time.monotonic() - found.verified_at > self.max_age:
                del self._entries[token_id]
                return None
            self._entries.move_to_end(token_id)
            return found

    def put(self, token_id: str, verified: _Verified, version: int) -> None:
        """Remember a token read under `version`, unless the file has changed since."""
        with self._lock:
            if version != self._version:
                return
            self._entries[token_id] = verified
            self._entries.move_to_end(token_id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def drop(self, token_id: str) -> None:
        with self._lock:
            self._entries.pop(token_id, None)

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
            self._probe.close()


class TokenStore:
    """The tokens of one store."""

    def __init__(self, settings: Settings, clock: Callable[[], datetime]) -> None:
        self.engine = side_tables.open_engine(settings, ACCESS_FILE)
        self.clock = clock
        side_tables.create_tables(self.engine, settings, [tokens_table])
        self.cache = (
            TokenCache(str(settings.data_dir / ACCESS_FILE)) if settings.postgres is None else None
        )

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
        self.engine.dispose()

    def create(
        self,
        namespace: str,
        role: str,
        grants: list[str] | tuple[str, ...] = (),
        *,
        expires_in: timedelta | None = None,
        label: str | None = None,
    ) -> tuple[TokenInfo, str]:
        """A new token: its listing, and the token itself (shown once, never stored)."""
        if role not in ROLES:
            raise InvalidWrite(f"unknown role; expected one of {', '.join(ROLES)}", ["role"])
        namespace = check_subtree(namespace, role)
        unknown = [g for g in grants if g not in GRANTS]
        if unknown:
            raise InvalidWrite(f"unknown grant; expected one of {', '.join(GRANTS)}", ["grant"])
        if grants and role != "agent":
            raise InvalidWrite("the forget grant is for agent tokens", ["grant"])
        if label is not None and (len(label) > MAX_LABEL or not label.isprintable()):
            raise InvalidWrite(f"a label is printable text of at most {MAX_LABEL}", ["label"])
        if expires_in is not None and expires_in <= timedelta(0):
            raise InvalidWrite("expires_in must be positive", ["expires_in"])
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        now = self.clock()
        info = TokenInfo(
            token_id,
            namespace,
            role,
            sorted(set(grants)),
            label,
            canonical_time(now),
            canonical_time(now + expires_in) if expires_in else None,
            None,
        )
        with self.engine.begin() as conn:
            conn.execute(
                tokens_table.insert().values(
                    token_id=token_id,
                    secret_sha256=_digest(secret),
                    namespace=namespace,
                    role=role,
                    grants=json.dumps(info.grants),
                    label=label,
                    created_at=info.created_at,
                    expires_at=info.expires_at,
                )
            )
        return info, f"{PREFIX}{token_id}_{secret}"

    def authenticate(self, token: object) -> Access:
        refused = Unauthenticated("a valid bearer token is needed")
        if not isinstance(token, str):
            raise refused
        match = _TOKEN.fullmatch(token)
        if match is None:
            raise refused
        token_id, secret = match.groups()
        digest = _digest(secret)
        cache = self.cache
        # Taken before the row is read: a revocation committed after the read changes it,
        # and what was read under the old version is then not kept.
        version = cache.version() if cache is not None else 0
        known = cache.get(token_id) if cache is not None else None
        if known is None:
            with self.engine.connect() as conn:
                row = (
                    conn.execute(select(tokens_table).where(tokens_table.c.token_id == token_id))
                    .mappings()
                    .first()
                )
            if row is None or row["revoked_at"] is not None:
                raise refused
            access = Access(
                token_id, row["namespace"], row["role"], frozenset(json.loads(row["grants"]))
            )
            known = _Verified(row["secret_sha256"], access, row["expires_at"], time.monotonic())
            if cache is not None and hmac.compare_digest(known.secret_sha256, digest):
                cache.put(token_id, known, version)
        if not hmac.compare_digest(known.secret_sha256, digest):
            raise refused
        if known.expires_at and known.expires_at <= canonical_time(self.clock()):
            raise refused
        return known.access

    def list(self) -> list[TokenInfo]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(tokens_table).order_by(tokens_table.c.created_at))
            return [_info(r) for r in rows.mappings()]

    def revoke(self, token_id: str) -> TokenInfo:
        if not isinstance(token_id, str) or not re.fullmatch(r"[0-9a-f]{16}", token_id):
            raise InvalidWrite("a token id is 16 hex digits", ["token_id"])
        with self.engine.begin() as conn:
            conn.execute(  # revoking twice is harmless: the first time stands
                update(tokens_table)
                .where(tokens_table.c.token_id == token_id, tokens_table.c.revoked_at.is_(None))
                .values(revoked_at=canonical_time(self.clock()))
            )
            row = (
                conn.execute(select(tokens_table).where(tokens_table.c.token_id == token_id))
                .mappings()
                .first()
            )
        if self.cache is not None:
            self.cache.drop(token_id)
        if row is None:
            raise NotFound(f"no token {token_id}")
        return _info(row)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _info(row: object) -> TokenInfo:
    r = dict(row)  # type: ignore[call-overload]
    return TokenInfo(
        r["token_id"],
        r["namespace"],
        r["role"],
        json.loads(r["grants"]),
        r["label"],
        r["created_at"],
        r["expires_at"],
        r["revoked_at"],
    )
