"""Sealed everywhere, end to end: after hundreds of forgets no byte anywhere holds them.

Hundreds of items each carry a token found nowhere else (random). After forgetting most
of them (by category, then one by one), then consolidation, a rebuild and a restart,
no file under the data directory holds any forgotten token in clear, nor its random
part (a fragment), on SQLite; on PostgreSQL, a `pg_dump` of the store's database holds
none. The kept items' tokens are in no file either (they are sealed too), yet a new
process still recalls every kept item.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest
from factories import fact, preference, turn

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.jobs.consolidation import Consolidator
from memory_ledger.principal import Principal
from memory_ledger.residue import files_under, needles_for, scan

ALICE = Principal("acme", "alice")
ERASED, KEPT = 240, 30


def _token() -> str:
    return f"zq{secrets.token_hex(8)}"


def _writes(tokens: list[str], category: str) -> list[dict]:
    out = []
    for i, token in enumerate(tokens):
        if i % 3 == 0:
            out.append(fact(f"note_{category}_{i}", f"{token} is the code", category=category))
        elif i % 3 == 1:
            out.append(preference(f"pref_{category}_{i}", f"{token} please", category=category))
        else:
            out.append(turn(f"I told you {token} once", turn_id=f"t_{category}_{i}"))
    return out


def _held(settings: Settings, tokens: list[str]) -> set[str]:
    """The tokens (or their random parts) found in the store's bytes."""
    needles = needles_for([*tokens, *(t[2:] for t in tokens)])
    if settings.postgres is None:
        found = scan(files_under(settings.data_dir), needles)
        return {needles[f.needle_index].decode() for f in found}
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}"
    dump = subprocess.run(
        ["pg_dump", "--dbname", url, "--data-only", "--schema", pg.schema],
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    return {n.decode() for n in needles if n in dump}


def test_no_forgotten_token_survives_anywhere(settings: Settings) -> None:
    erased = [_token() for _ in range(ERASED)]
    kept = [_token() for _ in range(KEPT)]
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        writes = _writes(erased, "health")
        for w in writes:  # the turn factory takes no category: every write gets it here
            w["category"] = "health"
        stored = alice.remember_many(writes)
        kept_writes = _writes(kept, "travel")
        for w in kept_writes:
            w["category"] = "travel"
        alice.remember_many(kept_writes)
        service.runner.catch_up()
        service.vectors.catch_up()
        assert {i.text for i in alice.context(erased[0], limit=5).items}, "recall sees them"

        by_category = alice.forget_scope({"kind": "category", "category": "health"})
        assert by_category.completed, by_category.to_dict()
        assert len(by_category.all_targets) == ERASED
        again = alice.forget(stored[0].item_id)  # idempotent, one more request
        assert again.completed

        Consolidator(service.job_context).run_all()
        service.rebuild()
        _, scan_receipt = service.requests.scan_files(by_category.request_id)
        if settings.postgres is None:
            assert scan_receipt is not None and scan_receipt.status == "ok", scan_receipt
    with MemoryService(settings) as service:  # a restart
        alice = service.for_principal(ALICE)
        assert alice.recall(category="health") == []
        assert len(alice.recall(category="travel", limit=100)) == KEPT
    assert _held(settings, erased) == set()
    assert _held(settings, kept) == set(), "kept items are sealed too"
    recalled = _recall_in_new_process(settings, kept[:5])
    assert all(any(t in text for text in recalled) for t in kept[:5])


def _recall_in_new_process(settings: Settings, queries: list[str]) -> list[str]:
    code = (
        "import json, sys\n"
        "from memory_ledger.api import MemoryService\n"
        "from memory_ledger.config import Settings\n"
        "from memory_ledger.principal import Principal\n"
        "settings = Settings.resolve(sys.argv[1], sys.argv[2] or None)\n"
        "with MemoryService(settings) as s:\n"
        "    a = s.for_principal(Principal('acme', 'alice'))\n"
        "    out = [i.text for q in json.loads(sys.argv[3]) for i in a.context(q).items]\n"
        "print(json.dumps(out))\n"
    )
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg is not None else ""
    run = subprocess.run(
        [sys.executable, "-c", code, str(settings.data_dir), url, json.dumps(queries)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    return list(json.loads(run.stdout))


@pytest.mark.parametrize("backend", ["sqlite"])
def test_the_byte_scan_is_not_blind(settings: Settings) -> None:
    """The check above means something only if the scan sees a token that is there."""
    token = _token()
    (settings.data_dir).mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "export.json").write_text(json.dumps({"note": token}))
    assert _held(settings, [token]) == {token, token[2:]}
