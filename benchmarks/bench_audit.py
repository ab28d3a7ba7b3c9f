"""Evidence packs (issue 29): a signed head, one request's pack and its verification, at
a lifecycle ledger of `--entries` entries (default 100,000; `--quick`: 2,000).

The ledger is a real one (SQLite, `ledger.sqlite`, with its triggers): the filler
entries (requests with a status each, valid payloads) are inserted with one prepared
statement in one transaction, the chain hashes computed here, because appending 100,000
entries one request at a time through `LifecycleLedger.append_many` (validation, one
transaction each) takes minutes and measures nothing of the audit. The request packed is
appended through the ledger's API half-way through the filling, so its entries sit in
the middle of the tree. Timed, one after the other:

- `tree_cold`: the first signed head of a freshly opened ledger: every entry's chain
  hash read (no payload) and the tree's perfect subtrees built;
- `head_warm`: a signed head again (the tree is kept; nothing new to read);
- `pack`: the request's evidence pack (its entries read, re-hashed, proofs made);
- `verify_pack`: `verifier.check_pack` of the pack, in process (median of `--rounds`);
- `verifier_alone`: `python -I verifier.py pack.json` in a fresh interpreter, as an
  auditor runs it (interpreter and `cryptography` start-up included).

Wall and CPU seconds are both recorded: on a shared 2-core machine the CPU time of the
process is the steadier figure.

    python -m benchmarks.bench_audit                 # 100,000 entries
    python -m benchmarks.bench_audit --quick         # 2,000, for the test run

Writes a table and `benchmarks/results/audit-LABEL.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.append(str(Path(__file__).resolve().parents[1]))  # by path: after PYTHONPATH

from memory_ledger.audit import verifier
from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.pack import build_pack
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.ledger import GENESIS_HASH, LEDGER_FILE, LifecycleLedger, canonical_payload
from memory_ledger.times import canonical_time

RESULTS = Path(__file__).resolve().parent / "results"


def _timed(call: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = call()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def _fill(path: Path, count: int) -> None:
    """Append `count` filler entries (a request and its status, alternately) directly."""
    request = canonical_payload(
        "request",
        {
            "namespace": "acme/filler",
            "scope": {"kind": "item", "item_ids": [str(uuid.UUID(int=1))]},
            "requested_by": "filler",
        },
    )
    status = canonical_payload("status", {"status": "completed"})
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT seq, entry_hash FROM ledger_entries ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        seq, prev = (row[0], row[1]) if row else (0, GENESIS_HASH)
        at = canonical_time(datetime.now(UTC))
        rows = []
        for i in range(count):
            seq += 1
            rid = f"req-fill-{seq - i % 2}"
            kind, body = ("request", request) if i % 2 == 0 else ("status", status)
            digest = verifier.chain_hash(prev, seq, rid, kind, at, body)
            rows.append((seq, rid, kind, body, at, prev, digest))
            prev = digest
        conn.executemany(
            "INSERT INTO ledger_entries (seq, request_id, entry_type, payload, recorded_at, "
            "prev_hash, entry_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _request(ledger: LifecycleLedger) -> str:
    """A request about three items: 8 entries, as a forget records them."""
    items = [str(uuid.uuid4()) for _ in range(3)]
    rid = "req-audited"
    scope = {"kind": "item", "item_ids": items}
    receipt = {"action": "purged", "targets": 3, "status": "ok", "evidence": ["rows_absent"]}
    ledger.append_many(
        rid,
        [
            ("request", {"namespace": "acme/alice", "scope": scope, "requested_by": "alice"}),
            ("resolved", {"targets": items}),
            *[("tombstone", {"item_id": item, "position": n + 1}) for n, item in enumerate(items)],
            ("receipt", {"store": "event_log", **receipt}),
            ("receipt", {"store": "facts", **receipt}),
            ("status", {"status": "completed"}),
        ],
    )
    return rid


def run(entries: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        settings = Settings.resolve(data, None)
        master = MasterKey.generate()
        with LifecycleLedger(settings) as ledger:
            pass  # creates the file and its triggers
        fill_wall = time.perf_counter()
        _fill(data / LEDGER_FILE, entries // 2)
        with LifecycleLedger(settings) as ledger:
            request_id = _request(ledger)
        _fill(data / LEDGER_FILE, entries - entries // 2 - 8)
        fill_wall = time.perf_counter() - fill_wall

        rows: dict[str, Any] = {"entries": entries, "fill_wall_s": round(fill_wall, 2)}
        with LifecycleLedger(settings) as ledger:
            auditor = Auditor(ledger, master)
            wall, cpu, head = _timed(auditor.head)  # records the key: one entry more
            rows["tree_cold"] = {"wall_s": wall, "cpu_s": cpu}
            wall, cpu, _ = _timed(auditor.head)
            rows["head_warm"] = {"wall_s": wall, "cpu_s": cpu}
            wall, cpu, pack = _timed(lambda: build_pack(auditor, request_id, [entries // 2]))
            rows["pack"] = {"wall_s": wall, "cpu_s": cpu}
        assert head.size == entries + 1
        walls, cpus = [], []
        for _ in range(rounds):
            wall, cpu, failures = _timed(lambda: verifier.check_pack(pack))
            assert failures == [], failures
            walls.append(wall)
            cpus.append(cpu)
        rows["verify_pack"] = {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus)}
        pack_file = Path(tmp) / "pack.json"
        pack_file.write_text(json.dumps(pack))
        script = Path(verifier.__file__)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-I", str(script), str(pack_file)], capture_output=True, text=True
        )
        rows["verifier_alone"] = {"wall_s": time.perf_counter() - start, "cpu_s": None}
        assert done.returncode == 0, done.stdout + done.stderr
        rows["pack_bytes"] = pack_file.stat().st_size
        rows["pack_entries"] = len(pack["entries"])
        rows["proof_nodes"] = max(len(e["inclusion_proof"]) for e in pack["entries"])
        rows["consistency_nodes"] = len(pack["consistency"][0]["proof"])
    return rows


STEPS = ("tree_cold", "head_warm", "pack", "verify_pack", "verifier_alone")


def render(label: str, rows: dict[str, Any], console: Console) -> None:
    title = (
        f"evidence packs at {rows['entries']:,} ledger entries ({label}); pack: "
        f"{rows['pack_entries']} entries, {rows['pack_bytes']:,} bytes, inclusion proofs of "
        f"{rows['proof_nodes']} nodes, consistency proof of {rows['consistency_nodes']}"
    )
    table = Table(title=title)
    for column in ("step", "wall ms", "cpu ms"):
        table.add_column(column, justify="right" if column != "step" else "left")
    for step in STEPS:
        r = rows[step]
        cpu = f"{r['cpu_s'] * 1000:,.1f}" if r["cpu_s"] is not None else "-"
        table.add_row(step, f"{r['wall_s'] * 1000:,.1f}", cpu)
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_audit")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2,000 entries")
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.entries = 2_000
    if not 100 <= args.entries <= 10_000_000 or not 1 <= args.rounds <= 100:
        parser.error("--entries 100-10,000,000, --rounds 1-100")
    rows = run(args.entries, args.rounds)
    import memory_ledger

    rows |= {
        "label": args.label,
        "code": str(Path(memory_ledger.__file__).parent.parent),
        "load_average": os.getloadavg(),
        "argv": list(argv or sys.argv[1:]),
    }
    render(args.label, rows, Console())
    out = args.out or RESULTS / f"audit-{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
