"""`audit head`, `consistency`, `pack`, `verify-pack`, `verify-document`: evidence an
auditor checks alone (memory_ledger/audit). They join `audit verify` (the hash chain,
in forget.py) under the same `audit` group."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from memory_ledger.cli.common import (
    DataDir,
    Json,
    Url,
    dump_json,
    emit,
    fail,
    markup_safe,
    open_operations,
    out,
    shown,
    whole_number,
)
from memory_ledger.cli.forget import audit
from memory_ledger.errors import InvalidWrite
from memory_ledger.views import verifier

Out = Annotated[Path | None, typer.Option("--out", help="Write the JSON to this file.")]


def _read(path: Path, as_json: bool) -> Any:
    """A pack, head or signed document: JSON, read whole (a pack is kilobytes), by the
    verifier's own reader, so a file nested too deeply to parse is unreadable (exit 2)
    here as it is for verifier.py."""
    try:
        return verifier.load_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        fail(InvalidWrite(f"cannot read {path}: {exc}"), as_json)


def _write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


@audit.command("head")
def audit_head(
    out_file: Out = None, data_dir: DataDir = None, url: Url = None, as_json: Json = False
) -> None:
    """Sign the ledger's Merkle tree head now: keep it outside, check against it later."""
    with open_operations(data_dir, url, as_json) as ops:
        auditor = ops.auditor()
        data = {**auditor.head().to_dict(), "public_key": auditor.key.public_key}
    if out_file is not None:
        _write(out_file, data)

    def human() -> None:
        out.print(shown(f"ledger tree head: {data['size']} entries, root {data['root']}"))
        out.print(shown(f"signed {data['time']} by key {data['key_id']}"))
        if out_file is not None:
            out.print(shown(f"written to {out_file}: keep it outside the ledger"))

    emit(as_json, data, human)


@audit.command("consistency")
def audit_consistency(
    old_head: Annotated[Path, typer.Argument(help="A head kept from `audit head --json`.")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Check the ledger's tree now extends a head kept earlier (exit 9 when it does not)."""
    kept = _read(old_head, as_json)
    with open_operations(data_dir, url, as_json) as ops:
        result = ops.auditor().consistency(kept)

    def human() -> None:
        old, new = result["kept"], result["head"]
        if result["ok"]:
            out.print(
                f"ledger [green]consistent[/]: the tree of {old['size']} entries (root "
                f"{markup_safe(old['root'][:16])}…) is a prefix of the tree of {new['size']} now"
            )
        for failure in result["failures"]:
            out.print(f"ledger [red]NOT consistent[/]: {markup_safe(failure['detail'])}")
        if not result["key_checked"]:
            out.print(
                "note: the kept head was signed by another key; its signature was not checked"
            )

    emit(as_json, result, human)
    if not result["ok"]:
        raise typer.Exit(verifier.EXIT_FAILED)


@audit.command("pack")
def audit_pack(
    request_id: Annotated[str, typer.Argument(help="The request (or other ledger id).")],
    out_file: Annotated[Path, typer.Option("--out", help="Where to write the pack (JSON).")],
    since: Annotated[
        list[int] | None,
        typer.Option(
            help="The size of a head the auditor kept: include a consistency proof from it.",
            parser=whole_number(0, 10**15),
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Write an evidence pack of one request: its ledger entries, their inclusion proofs
    and a signed head. `audit verify-pack` (or verifier.py alone) checks it."""

    with open_operations(data_dir, url, as_json) as ops:
        pack = ops.evidence_pack(request_id, since)
    _write(out_file, pack)
    summary = {
        "request_id": request_id,
        "out": str(out_file),
        "entries": len(pack["entries"]),
        "head": pack["head"],
    }

    def human() -> None:
        out.print(
            shown(
                f"evidence pack of {request_id}: {summary['entries']} entries, head of "
                f"{pack['head']['size']} entries, written to {out_file}"
            )
        )

    emit(as_json, summary, human)


@audit.command("verify-pack")
def audit_verify_pack(
    pack_file: Annotated[Path, typer.Argument(help="A pack from `audit pack`.")],
    head: Annotated[
        Path | None, typer.Option("--head", help="A head kept earlier (`audit head --json`).")
    ] = None,
    key_id: Annotated[
        str | None, typer.Option("--key-id", help="The ledger key's id, known independently.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Check an evidence pack with nothing but the pack (and a kept head): the same
    checks as memory_ledger/audit/verifier.py. Exit 9 names each failure."""
    pack = _read(pack_file, as_json)
    kept = _read(head, as_json) if head is not None else None

    def held() -> str:
        h = pack["head"]
        return (
            f"evidence pack holds: {len(pack['entries'])} entries of {pack['request_id']} "
            f"are in the ledger tree of size {h['size']}, signed by key {h['key_id']}"
            + (f"; it extends the kept head of size {kept['size']}" if kept else "")
        )

    _verdict(
        lambda: verifier.check_pack(pack, kept, key_id),
        held,
        as_json,
        request_id=verifier.request_id_of(pack),
    )


def _verdict(
    check: Callable[[], list[tuple[str, str]]],
    held: Callable[[], str],
    as_json: bool,
    **extra: Any,
) -> None:
    """Run a verifier check and say what it found, as `verify-pack` and
    `verify-document` both do; exit 9 naming each failure."""
    try:
        failures = check()
    except verifier.Malformed as exc:
        failures = [("malformed", str(exc))]
    result = {
        "ok": not failures,
        "failures": [
            {"reason": r, "detail": d, "meaning": verifier.REASONS[r]} for r, d in failures
        ],
        **extra,
    }
    if as_json:
        print(dump_json(result, indent=2))
    elif failures:
        for reason, detail in failures:
            out.print(
                f"[red]FAILED[/] {reason}: {markup_safe(verifier.REASONS[reason])} "
                f"({markup_safe(detail)})"
            )
    else:
        out.print(shown(held()))
    if failures:
        raise typer.Exit(verifier.EXIT_FAILED)


@audit.command("verify-document")
def audit_verify_document(
    document_file: Annotated[
        Path,
        typer.Argument(help="A backup's manifest.json, or a drill report's .json or .md."),
    ],
    key_id: Annotated[
        str | None, typer.Option("--key-id", help="The ledger key's id, known independently.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Check a signed document (a backup manifest, a drill report) with nothing but the
    file: the same check as `python verifier.py --document FILE`. Exit 9 names each
    failure."""
    try:
        document: Any = verifier.load_document(document_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # not text, or JSON nested too deeply to read
        fail(InvalidWrite(f"cannot read {document_file}: {exc}"), as_json)
    except verifier.Malformed as exc:  # neither JSON nor signed markdown: a failure
        document = exc

    def check() -> list[tuple[str, str]]:
        if isinstance(document, verifier.Malformed):
            raise document
        return verifier.check_document(document, key_id)

    def held() -> str:
        signature = document["signature"]
        return f"signed {signature['kind']} holds: signed by key {signature['key_id']}"

    _verdict(check, held, as_json)
