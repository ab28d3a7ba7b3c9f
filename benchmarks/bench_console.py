"""The compliance console's list API at scale (issue 29): one SQLite store whose ledger
holds `--requests` forget requests (default 10,000), the console's API timed through the
real app (FastAPI's TestClient, in-process: routing, auth, JSON, no socket).

The requests are written into ledger.sqlite directly (`fill`), not carried out: 10,000
real forgets take far longer than the reads measured here. Each is a realistic entry
sequence, every payload checked by the ledger's own models and every entry hash-chained
(`audit verify` passes): request, resolved, a tombstone per target, one receipt per store
(thirteen), the key proof, the status, and for most completed ones the verification
scan's receipt. Filing times are spread over `--days` days (default 120) and completion
takes seconds to days; a mix of statuses (completed, partial, pending, blocked, ...),
bases (user request, retention expiry, session end, operator) and scope kinds, over 3
tenants of 200 users. Each request's entries are written together, so a request's
completion time runs ahead of the next request's filing (seq order is filing order).

Timed, `--rounds` times each (p50/p95, milliseconds):

- `index_build`: the console's summary of the whole ledger built from nothing (once:
  what the first read after an upgrade pays); `catch_up`: a read after one more request;
The compliance token is `acme`'s; by default every request is in `acme` (`--tenants 3`
spreads them over three tenants, so the token sees a third).

- `first_page`: 50 newest; `filtered_page`: status=partial; `namespace_page`: one user's
  subtree; `deep_page`: the page before the oldest (keyset cursor); `search`: a request
  id prefix; `totals`: counts, overdue, median/p90; `detail`: one request's timeline;
  `csv`: the whole list as CSV (fewer rounds).

    python -m benchmarks.bench_console                 # 10,000 requests
    python -m benchmarks.bench_console --requests 300 --rounds 3   # the test's small mode

Writes a table and `benchmarks/results/console-LABEL.json` (or `--out`).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_ledger.config import Settings
from memory_ledger.ledger import (
    COLUMNS,
    GENESIS_HASH,
    LEDGER_FILE,
    TABLE,
    LifecycleLedger,
    canonical_payload,
    entry_hash,
)
from memory_ledger.times import canonical_time

RESULTS = Path(__file__).resolve().parent / "results"
STORES = [
    ("event_log", "tombstoned", {"new_tombstones": 1}),
    ("key_store", "keys_destroyed", {"items_with_live_keys": 0}),
    ("transcripts", "purged", {"rows_left": 0}),
    ("facts", "purged", {"rows_left": 0}),
    ("preferences", "purged", {"rows_left": 0}),
    ("catalog", "purged", {"rows_left": 0}),
    ("summaries", "purged", {"rows_left": 0}),
    ("keyword_index", "purged", {"rows_left": 0}),
    ("vector_index", "rows_removed", {"rows_left": 0}),
    ("context_cache", "evicted", {"entries_left": 0}),
    ("key_store", "key_bytes_gone", {"checked": True, "keys_found": 0}),
    ("files", "scan_scheduled", {"fingerprints_kept": True}),
]
STATUSES = [
    ("completed", 80), ("partial", 7), ("pending", 4), ("dry_run", 3),
    ("needs_clarification", 2), ("blocked", 2), ("refused", 1), ("nothing_matched", 1),
]  # fmt: skip
BASES = [("user_request", 60), ("retention_expiry", 25), ("session_end", 10),
         ("operator_request", 5)]  # fmt: skip
TENANTS = ("acme", "beta", "gamma")
KINDS = ["item", "predicate", "source", "category", "namespace", "redaction"]


def _pick(rng: random.Random, weighted: list[tuple[str, int]]) -> str:
    return rng.choices([k for k, _ in weighted], [w for _, w in weighted])[0]


def _scope(rng: random.Random, kind: str, targets: list[str]) -> dict[str, Any]:
    if kind == "item":
        return {"kind": "item", "item_ids": targets}
    if kind == "predicate":
        return {"kind": "predicate", "subject": "user", "predicate": "home_address", "which": "all"}
    if kind == "source":
        return {"kind": "source", "session_id": f"s{rng.randrange(1000)}"}
    if kind == "category":
        return {"kind": "category", "category": "health"}
    if kind == "redaction":
        return {"kind": "redaction", "item_ids": targets, "spans": 1}
    return {"kind": "namespace"}


def _request(
    rng: random.Random, number: int, filed: datetime, tenants: tuple[str, ...]
) -> list[tuple[str, dict, str]]:
    """(entry type, payload, recorded_at) of one synthetic request, in order."""
    status = _pick(rng, STATUSES)
    basis = _pick(rng, BASES)
    kind = "item" if basis != "user_request" else rng.choice(KINDS)
    if basis == "session_end":
        kind = "source"
    targets = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(rng.randint(1, 3))]
    namespace = f"{rng.choice(tenants)}/u{rng.randrange(200)}"
    if rng.random() < 0.1:
        namespace += "/p1"
    by = {"user_request": namespace.split("/")[1], "retention_expiry": "retention_job",
          "session_end": "session_job", "operator_request": "operator"}[basis]  # fmt: skip
    at = filed
    out: list[tuple[str, dict, str]] = []

    def add(kind_: str, payload: dict, step: float = 0.01) -> None:
        nonlocal at
        at += timedelta(seconds=step)
        out.append((kind_, payload, canonical_time(at)))

    request = {"namespace": namespace, "scope": _scope(rng, kind, targets), "requested_by": by,
               "basis": basis, "dry_run": status == "dry_run"}  # fmt: skip
    add("request", request, 0)
    if status == "needs_clarification":
        add("needs_clarification", {"candidates": targets + targets[:1] * 0})
        add("status", {"status": status})
        return out
    if status in ("refused", "nothing_matched"):
        if status == "refused":
            add("refusal", {"reason": "namespace_mismatch"})
        add("status", {"status": status})
        return out
    add("resolved", {"targets": targets, "cascaded": []})
    if status == "dry_run":
        add("status", {"status": "dry_run"})
        return out
    if status == "blocked":
        add("blocked", {"holds": ["case-17"], "items": targets})
        add("status", {"status": "blocked"})
        return out
    add("status", {"status": "pending"})
    if status == "pending":
        return out
    for n, item in enumerate(targets):
        add("tombstone", {"item_id": item, "position": number * 4 + n + 1})
    # Seconds to days: most within a minute, a tail past the deadline.
    span = rng.lognormvariate(2.0, 2.5)
    failed = status == "partial"
    for store, action, evidence in STORES:
        ok = not (failed and store == "vector_index")
        add("receipt", {"store": store, "action": action, "targets": len(targets),
                        "status": "ok" if ok else "failed",
                        "evidence": evidence if ok else {"error": "connectionerror"}},
            span / len(STORES))  # fmt: skip
    if failed:
        add("status", {"status": "partial", "failed_stores": ["vector_index"]})
        return out
    add("status", {"status": "completed"})
    if rng.random() < 0.7:
        add("receipt", {"store": "files", "action": "residue_scan", "targets": len(targets),
                        "status": "ok" if rng.random() < 0.99 else "failed",
                        "evidence": {"checked": True, "files_with_residue": 0}}, 3600)  # fmt: skip
    return out


def fill(
    data_dir: Path,
    requests: int,
    days: int = 120,
    seed: int = 29,
    tenants: tuple[str, ...] = ("acme", "beta", "gamma"),
) -> list[str]:
    """Append `requests` synthetic forget requests to the store's ledger, hash-chained and
    validated, in one transaction; returns their ids in filing order. Namespaces are
    `<tenant>/u<0..199>` (a tenth with a project `/p1`) over `tenants`."""
    rng = random.Random(seed)
    LifecycleLedger(Settings.resolve(data_dir)).close()  # the table and its triggers
    conn = sqlite3.connect(data_dir / LEDGER_FILE, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        head = conn.execute(f"SELECT seq, entry_hash FROM {TABLE} ORDER BY seq DESC LIMIT 1")
        row = head.fetchone()
        seq, prev = (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)
        start = datetime.now(UTC) - timedelta(days=days)
        step = timedelta(days=days) / max(requests, 1)
        ids, rows = [], []
        for number in range(requests):
            rid = f"req-{rng.getrandbits(64):016x}"
            ids.append(rid)
            for kind, payload, at in _request(rng, number, start + step * number, tenants):
                body = canonical_payload(kind, payload)
                seq += 1
                digest = entry_hash(prev, seq, rid, kind, at, body)
                rows.append((seq, rid, kind, body, at, prev, digest))
                prev = digest
        conn.executemany(f"INSERT INTO {TABLE} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return ids


def _times(action: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        out.append((time.perf_counter() - started) * 1000)
    return out


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 2), "p95": round(p95, 2), "n": len(ordered)}


def run(requests: int, rounds: int, tenants: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from memory_ledger.access import TokenStore
    from memory_ledger.api import MemoryService
    from memory_ledger.http.app import create_app
    from memory_ledger.times import now

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data"
        settings = Settings.resolve(data_dir)
        # The store is opened first: opening resumes unfinished requests, and these name
        # items that were never written.
        with MemoryService(settings) as service:
            started = time.perf_counter()
            ids = fill(data_dir, requests, tenants=TENANTS[:tenants])
            fill_seconds = time.perf_counter() - started
            tokens = TokenStore(settings, now)
            token = tokens.create("acme", "compliance")[1]
            tokens.close()
            tokens = TokenStore(settings, now)
            entries = service.ledger.entries()
            client = TestClient(create_app(service, tokens))
            client.headers["Authorization"] = f"Bearer {token}"

            def get(url: str, **params: Any) -> Any:
                answer = client.get(url, params=params)
                assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
                return answer

            results: dict[str, Any] = {}
            started = time.perf_counter()
            get("/compliance/api/requests", limit=1)
            results["index_build"] = _summary([(time.perf_counter() - started) * 1000])
            # Every row of the token's subtree, walked once: the deep page's cursor is
            # the 51st-oldest row's seq (the page before the oldest).
            seqs: list[int] = []
            cursor: int | None = None
            while True:
                params = {"limit": 500, **({"after": cursor} if cursor is not None else {})}
                page = get("/compliance/api/requests", **params).json()
                seqs += [r["filed_seq"] for r in page["requests"]]
                if page["next"] is None:
                    break
                cursor = page["next"]
            deep = {"after": seqs[-51]} if len(seqs) > 51 else {}
            prefix = ids[len(ids) // 2][:7]  # "req-" and 3 hex digits: ~1/4096 of ids
            user = get("/compliance/api/requests", limit=1).json()["requests"][0]["namespace"]
            detail_id = get("/compliance/api/requests", limit=1).json()["requests"][0]["request_id"]
            cases: dict[str, tuple[str, dict[str, Any], int]] = {
                "first_page": ("/compliance/api/requests", {}, rounds),
                "filtered_page": ("/compliance/api/requests", {"status": "partial"}, rounds),
                "namespace_page": ("/compliance/api/requests", {"namespace": user}, rounds),
                "deep_page": ("/compliance/api/requests", deep, rounds),
                "search": ("/compliance/api/requests", {"search": prefix}, rounds),
                "totals": ("/compliance/api/totals", {}, rounds),
                "detail": (f"/compliance/api/requests/{detail_id}", {}, rounds),
                "csv": ("/compliance/api/requests.csv", {}, max(3, rounds // 10)),
            }
            for name, (url, params, n) in cases.items():
                get(url, **params)  # warm
                results[name] = _summary(_times(lambda u=url, p=params: get(u, **p), n))
            # One more request filed, then a read: the summary catches up by one.
            fill(data_dir, 1, seed=7)
            results["catch_up"] = _summary(_times(lambda: get("/compliance/api/requests"), 1))
            client.close()
            tokens.close()
        return {
            "requests": requests,
            "ledger_entries": len(entries),
            "acme_requests": len(seqs),
            "fill_seconds": round(fill_seconds, 2),
            "rounds": rounds,
            "timings_ms": results,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument(
        "--tenants",
        type=int,
        default=1,
        choices=(1, 2, 3),
        help="1: every request in the token's tenant (the heaviest list)",
    )
    parser.add_argument("--label", default="local")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = run(args.requests, args.rounds, args.tenants)
    print(
        f"{result['requests']:,} requests, {result['ledger_entries']:,} ledger entries "
        f"({result['acme_requests']:,} in the token's subtree 'acme'), filled in "
        f"{result['fill_seconds']} s"
    )
    print(f"{'case':<16}{'p50 ms':>10}{'p95 ms':>10}{'n':>6}")
    for name, t in result["timings_ms"].items():
        print(f"{name:<16}{t['p50']:>10}{t['p95']:>10}{t['n']:>6}")
    out = args.out or RESULTS / f"console-{args.label}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
