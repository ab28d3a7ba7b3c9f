"""Lifecycle commands: the retention policy (`policy show|diff|install`), legal holds
(`hold place|lift|list`), `explain ID`, `decay` and `end-session`. Thin: each calls the
library (memory_ledger/policy, memory_ledger/forgetting/holds.py, jobs/decay.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memory_ledger.cli.common import (
    Actor,
    DataDir,
    Json,
    Namespace,
    Now,
    Url,
    app,
    as_of,
    emit,
    open_ledger,
    open_operations,
    out,
    shown,
    terminal_safe,
)

policy_app = typer.Typer(help="The retention policy: show it, diff a new version, install it.")
hold_app = typer.Typer(help="Legal holds: block every deletion in a scope until lifted.")
app.add_typer(policy_app, name="policy")
app.add_typer(hold_app, name="hold")


@policy_app.command("show")
def policy_show(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """The retention policy in force: version, classes, protect list, decay."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        policy = ops.policies.in_force()
        data = ops.policies.shown()

        def human() -> None:
            out.print(f"retention policy version {policy.version}")
            for c in policy.table.classes:
                selects = {
                    k: v
                    for k, v in c.model_dump().items()
                    if k not in ("name", "ttl") and v is not None
                }
                out.print(f"  class {c.name}: ttl {c.ttl}  {terminal_safe(selects)}")
            out.print(f"  default ttl: {policy.table.default_ttl}")
            protect = policy.table.protect
            out.print(f"  protect: predicates {list(protect.predicates)}")
            out.print(f"           categories {list(protect.categories)}")

        emit(as_json, data, human)


@policy_app.command("diff")
def policy_diff(
    file: Annotated[Path, typer.Argument(help="The proposed policy.toml.")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
    now: Now = None,
) -> None:
    """What installing FILE would change for the items held now; changes nothing."""
    at = as_of(now)
    with open_operations(data_dir, url, as_json, create=False) as ops:
        result = ops.policies.diff(file, at)

        def human() -> None:
            out.print(
                f"version {result.current_version} -> {result.new_version}: "
                f"{result.items} item(s) checked"
            )
            for change, count in result.rule_changes.items():
                out.print(f"  {count:>7}  {change}")
            out.print(
                f"  newly due now: {result.newly_due}; no longer due: {result.no_longer_due}; "
                f"newly protected: {result.newly_protected}; "
                f"no longer protected: {result.no_longer_protected}"
            )

        emit(as_json, result.to_dict(), human)


@policy_app.command("install")
def policy_install(
    file: Annotated[Path, typer.Argument(help="The new policy.toml (a higher version).")],
    by: Actor = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Validate FILE whole and install it; the old policy stays if anything is wrong."""
    with open_operations(data_dir, url, as_json) as ops:
        candidate, changes = ops.policies.install(file, by)
        data = {"installed": candidate.version, **changes.counts()}
        emit(
            as_json,
            data,
            lambda: out.print(
                f"installed retention policy version {candidate.version}: "
                f"{changes.newly_due} item(s) newly due (the retention job erases them)"
            ),
        )


@hold_app.command("place")
def hold_place(
    name: Annotated[str, typer.Argument(help="The hold's name (an identifier).")],
    scope: Annotated[
        str, typer.Option("--scope", help="A namespace (tenant/user) or a whole tenant.")
    ],
    reason: Annotated[str, typer.Option(help="A code, e.g. a case number: case-2026-044.")],
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    predicate: Annotated[str | None, typer.Option(help="Only this predicate.")] = None,
    by: Actor = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Place a legal hold: nothing in its scope is erased until it is lifted."""
    with open_operations(data_dir, url, as_json) as ops:
        hold = ops.place_hold(
            name,
            namespace=scope,
            reason=reason,
            placed_by=by,
            category=category,
            predicate=predicate,
        )
        emit(as_json, hold.to_dict(), lambda: out.print(f"hold {hold.name} placed"))


@hold_app.command("lift")
def hold_lift(
    name: Annotated[str, typer.Argument(help="The hold's name.")],
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope",
            help="Where it was placed; needed when holds of this name are in force in "
            "several namespaces (a name is unique within a subtree, not the store).",
        ),
    ] = None,
    by: Actor = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Lift a hold; the requests it blocked (and no other hold does) run now."""
    with open_operations(data_dir, url, as_json) as ops:
        hold = ops.find_hold(name, namespace=scope)
        resumed = ops.lift_hold(name, lifted_by=by, namespace=hold.namespace)
        rows = [{"request_id": r.request_id, "status": r.status} for r in resumed]
        waiting = sum(r["status"] == "blocked" for r in rows)
        still = f", {waiting} still blocked by another hold" if waiting else ""
        emit(
            as_json,
            {"lifted": name, "namespace": hold.namespace, "resumed": rows},
            lambda: out.print(
                shown(
                    f"hold {name} lifted in {hold.namespace}; "
                    f"{len(rows) - waiting} blocked request(s) resumed{still}"
                )
            ),
        )


@hold_app.command("list")
def hold_list(data_dir: DataDir = None, url: Url = None, as_json: Json = False) -> None:
    """The holds in force."""
    with open_operations(data_dir, url, as_json, create=False) as ops:
        holds = [h.to_dict() for h in ops.holds()]

        def human() -> None:
            if not holds:
                out.print("no holds in force")
            for h in holds:
                narrowed = "".join(
                    f" {k}={h[k]}" for k in ("category", "predicate") if h[k] is not None
                )
                out.print(
                    f"{h['name']}  {terminal_safe(h['namespace'])}{narrowed}  "
                    f"reason {h['reason']}  since {h['placed_at']}"
                )

        emit(as_json, {"holds": holds}, human)


@app.command()
def explain(
    item_id: Annotated[str, typer.Argument(help="The item's id.")],
    namespace: Namespace,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
    now: Now = None,
) -> None:
    """Why an item is kept, archived, due to expire, held or protected, with the rule."""
    at = as_of(now)
    with open_ledger(namespace, data_dir, url, as_json, create=False) as ledger:
        found = ledger.explain(item_id, at)

        def human() -> None:
            out.print(f"{found['item_id']}: {found['state']}")
            for reason in found["reasons"]:
                out.print(f"  - {terminal_safe(reason)}")
            out.print(
                f"  policy in force: version {found['policy_in_force']}; "
                f"written under version {found['written_under_policy']}"
            )

        emit(as_json, found, human)


@app.command()
def decay(
    data_dir: DataDir = None, url: Url = None, as_json: Json = False, now: Now = None
) -> None:
    """Run the decay pass once: archive what decayed, bring back what was reinforced.
    Idempotent per decay period."""
    at = as_of(now)
    with open_operations(data_dir, url, as_json) as ops:
        counts = ops.policies.decay(at)
        emit(
            as_json,
            counts,
            lambda: out.print(
                f"decay period {counts['period']}: {counts['archived']} archived, "
                f"{counts['unarchived']} unarchived"
            ),
        )


@app.command("end-session")
def end_session(
    session_id: Annotated[str, typer.Argument(help="The session that ended.")],
    namespace: Namespace,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Erase the session-basis items of a session that ended (basis `session_end`)."""
    with open_ledger(namespace, data_dir, url, as_json) as ledger:
        reports = ledger.end_session(session_id)
        rows: list[dict[str, Any]] = [
            {"request_id": r.request_id, "erased": len(r.all_targets), "status": r.status}
            for r in reports
        ]
        emit(
            as_json,
            {"requests": rows},
            lambda: out.print(f"{sum(r['erased'] for r in rows)} session item(s) erased"),
        )
        if any(r.status != "completed" for r in reports):
            raise typer.Exit(7)
