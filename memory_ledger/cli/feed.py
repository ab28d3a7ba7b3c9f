"""Feed commands: `feed` (the change feed, as JSON lines or a table), `subscribers
list|add|retire` and `ack`. Thin: each calls memory_ledger/feed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from memory_ledger.bounds import DEFAULT_DEADLINE_HOURS, MAX_DEADLINE_HOURS
from memory_ledger.cli.common import (
    Actor,
    DataDir,
    Json,
    Url,
    app,
    dump_json,
    emit,
    open_operations,
    out,
    terminal_safe,
)

if TYPE_CHECKING:
    from memory_ledger.operations import ChangeFeed, Notice

subscribers_app = typer.Typer(help="Subscribers that keep copies and acknowledge erasures.")
app.add_typer(subscribers_app, name="subscribers")

Subscriber = Annotated[
    str | None,
    typer.Option(
        "--subscriber", help="Read as this registered subscriber (content of its namespaces)."
    ),
]


@app.command()
def feed(
    after: Annotated[
        str | None, typer.Option("--after", help="Continue after this cursor (from a notice).")
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep waiting for new notices (Ctrl-C stops).")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0.1, max=86_400.0, help="With --follow: stop after this many idle seconds."
        ),
    ] = None,
    subscriber: Subscriber = None,
    commit: Annotated[
        bool,
        typer.Option("--commit", help="Store the last cursor for --subscriber, and start from it."),
    ] = False,
    snapshot: Annotated[
        str | None,
        typer.Option(
            "--snapshot", help="Print this namespace's live items and the cursor to continue from."
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """The change feed: one JSON line per notice with --json (each with its `cursor`).
    Without --follow it prints what is there and exits."""
    if commit and subscriber is None:
        raise typer.BadParameter("--commit needs --subscriber", param_hint="--commit")
    with open_operations(data_dir, url, as_json, create=False) as ops:
        changes = ops.feed
        if snapshot is not None:
            taken = changes.snapshot(snapshot, subscriber=subscriber)
            emit(as_json, taken, lambda: out.print(terminal_safe(taken)))
            return
        if commit and after is None:
            after = changes.committed(subscriber)  # type: ignore[arg-type]
        if follow:
            notices = changes.subscribe(after, subscriber=subscriber, timeout=timeout)
        else:
            notices = _everything(changes, after, subscriber)
        last = after
        try:
            for notice in notices:
                data = notice.to_dict()
                if as_json:
                    print(dump_json(data), flush=True)
                else:
                    out.print(
                        f"{notice.cursor}  {notice.type:<18} {notice.namespace or '-'}  "
                        f"{notice.item_id or notice.request_id or ''}",
                        highlight=False,
                    )
                last = notice.cursor
                if commit:
                    changes.commit(subscriber, last)  # type: ignore[arg-type]
        except KeyboardInterrupt:
            pass
        if not as_json and last is not None:
            out.print(f"cursor: {last}", highlight=False)


def _everything(changes: ChangeFeed, after: str | None, subscriber: str | None) -> Iterator[Notice]:
    """Every notice there is now, page by page."""
    cursor = after
    while True:
        page = changes.read(cursor, subscriber=subscriber)
        yield from page.notices
        cursor = page.cursor
        if page.caught_up:
            return


@subscribers_app.command("list")
def subscribers_list(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """Registered subscribers, and the requests waiting for their acknowledgement."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        rows = []
        for subscriber in ops.subscribers():
            pending = ops.pending(subscriber)
            rows.append({**subscriber.to_dict(), "pending": [r for r, _ in pending]})

        def human() -> None:
            for row in rows:
                out.print(
                    f"{row['name']}: {', '.join(row['namespaces'])}; deadline "
                    f"{row['deadline_hours']} h; {len(row['pending'])} ack(s) pending",
                    highlight=False,
                )
            if not rows:
                out.print("no subscribers registered")

        emit(as_json, {"subscribers": rows}, human)


@subscribers_app.command("add")
def subscribers_add(
    name: Annotated[str, typer.Argument(help="The subscriber's name (a-z, 0-9, _ and -).")],
    namespace: Annotated[
        list[str],
        typer.Option(
            "--namespace", "-n", help="A namespace (or tenant) it keeps copies of; repeatable."
        ),
    ],
    deadline_hours: Annotated[
        int,
        typer.Option(min=1, max=MAX_DEADLINE_HOURS, help="Hours it has to acknowledge an erasure."),
    ] = DEFAULT_DEADLINE_HOURS,
    by: Actor = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Register a subscriber: forget requests in its namespaces wait for its ack."""
    with open_operations(data_dir, url, as_json) as ops:
        added = ops.add_subscriber(name, namespace, added_by=by, deadline_hours=deadline_hours)
        emit(as_json, added.to_dict(), lambda: out.print(f"subscriber {name} registered"))


@subscribers_app.command("retire")
def subscribers_retire(
    name: Annotated[str, typer.Argument(help="The subscriber's name.")],
    by: Actor = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Retire a subscriber; its pending acks end with an operator receipt saying so."""
    with open_operations(data_dir, url, as_json) as ops:
        ended = ops.retire_subscriber(name, retired_by=by)
        emit(
            as_json,
            {"retired": name, "acks_ended": ended},
            lambda: out.print(f"subscriber {name} retired; {len(ended)} pending ack(s) ended"),
        )


@app.command()
def ack(
    subscriber: Annotated[str, typer.Argument(help="The registered subscriber.")],
    request_id: Annotated[str, typer.Argument(help="The forget request it acknowledges.")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """A subscriber acknowledges that it dropped a request's targets."""
    with open_operations(data_dir, url, as_json) as ops:
        done = ops.ack(subscriber, request_id)
        emit(
            as_json,
            done,
            lambda: out.print(f"{request_id}: acknowledged by {subscriber}; {done['status']}"),
        )
