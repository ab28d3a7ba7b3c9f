"""Access tokens for the HTTP service: create (shown once), list (never the secret),
revoke. A token maps to a namespace subtree, a role and grants (memory_ledger/access)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_ledger.cli.common import DataDir, Json, Url, app, emit, fail, out, shown
from memory_ledger.cli.tables import IdTable
from memory_ledger.config import Settings
from memory_ledger.errors import MemoryLedgerError

if TYPE_CHECKING:
    from memory_ledger.access import TokenStore

tokens_app = typer.Typer(help="Bearer tokens of the HTTP service: role, namespaces, grants.")
app.add_typer(tokens_app, name="tokens")
MAX_DAYS = 3650


@contextmanager
def _tokens(
    data_dir: Path | None, url: str | None, as_json: bool, *, create: bool = True
) -> Iterator[TokenStore]:
    from memory_ledger.access import TokenStore
    from memory_ledger.access.tokens import ACCESS_FILE
    from memory_ledger.times import now

    try:
        settings = Settings.resolve(data_dir, url)
        if not create:  # listing creates nothing where there are no tokens and no store
            settings.require_store(ACCESS_FILE)
        store = TokenStore(settings, now)
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    try:
        yield store
    except MemoryLedgerError as exc:
        fail(exc, as_json)
    finally:
        store.close()


@tokens_app.command("create")
def tokens_create(
    namespace: Annotated[
        str,
        typer.Option(
            "--namespace",
            "-n",
            # A help text is rich markup: the bracket is escaped, or --help crashes.
            help="tenant/user\\[/project] (agent), or a tenant (compliance, ops).",
        ),
    ],
    role: Annotated[str, typer.Option(help="agent | compliance | ops")],
    grant: Annotated[
        list[str] | None, typer.Option("--grant", help="forget (agent tokens only).")
    ] = None,
    expires_in_days: Annotated[
        int | None, typer.Option(min=1, max=MAX_DAYS, help="Days until it stops working.")
    ] = None,
    label: Annotated[str | None, typer.Option(help="Who or what it is for.")] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print the token only: TOKEN=$(...).")
    ] = False,
) -> None:
    """Create a token. It is printed once (`token` in --json) and stored only hashed."""
    with _tokens(data_dir, url, as_json) as store:
        days = timedelta(days=expires_in_days) if expires_in_days else None
        info, token = store.create(namespace, role, grant or [], expires_in=days, label=label)
        if quiet and not as_json:
            print(token)
            return
        emit(
            as_json,
            {**info.to_dict(), "token": token},
            lambda: out.print(
                f"token {info.token_id} ({info.role}, {info.namespace}): {token}\n"
                "It is shown once: store it now.",
                highlight=False,
            ),
        )


@tokens_app.command("list")
def tokens_list(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Every token: id, role, namespace, grants, times. Never a secret."""
    with _tokens(data_dir, url, as_json, create=False) as store:
        rows = store.list()

        def human() -> None:
            table = IdTable(
                "token", "role", "namespace", "grants", "created", "expires", "revoked",
                ids=("token",),
            )  # fmt: skip
            for r in rows:
                table.add_row(
                    shown(r.token_id), shown(r.role), shown(r.namespace), shown(",".join(r.grants)),
                    shown(r.created_at), shown(r.expires_at or ""), shown(r.revoked_at or ""),
                )  # fmt: skip
            out.print(table)

        emit(as_json, {"tokens": [r.to_dict() for r in rows]}, human)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (16 hex digits).")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Revoke a token: it is refused from now on; its row stays for the audit."""
    with _tokens(data_dir, url, as_json) as store:
        info = store.revoke(token_id)
        emit(as_json, info.to_dict(), lambda: out.print(f"token {token_id} revoked"))
