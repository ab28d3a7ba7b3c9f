"""The retention policy, legal holds, decay and `explain`: issue 12's lifecycle rules.

Time is injected everywhere: reads take `service.clock`, the jobs take `now`. Nothing
sleeps. Items' lives count from the store's own recording time (real now), so the tests
move the clock forward from it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from factories import cli, fact, file_bytes_contain, preference, provenance, sqlite_files, turn
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Column, MetaData, Table, Text, create_engine, insert, select

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.errors import ConfigurationError, InvalidWrite, NotFound
from memory_ledger.jobs.decay import decay_pass
from memory_ledger.jobs.retention import due_items, expire_due
from memory_ledger.policy import POLICY_FILE, policy_from_text
from memory_ledger.policy.review import diff, install, read_candidate
from memory_ledger.principal import Principal
from memory_ledger.times import canonical_time

ALICE = Principal("acme", "alice")
DAY = timedelta(days=1)


def _later(service: MemoryService, delta: timedelta) -> datetime:
    """Move the service's read clock `delta` past real now; returns that time."""
    at = datetime.now(UTC) + delta
    service.clock = lambda: at
    return at


def _policy(version: int, body: str = "") -> str:
    return f"[retention]\nversion = {version}\n{textwrap.dedent(body)}"


def _install(service: MemoryService, text: str, tmp_path: Path) -> None:
    _, candidate = read_candidate(_write(tmp_path / f"p-{secrets.token_hex(3)}.toml", text))
    service.runner.catch_up()
    install(*_installing(service), text, candidate, "operator")


def _installing(service: MemoryService) -> tuple[Any, ...]:
    """What `install` is given before the proposed policy: engine, ledger, dir, current."""
    return service.engine, service.ledger, service.settings.data_dir, service.retention


def _ids(ledger: MemoryLedger, **options: Any) -> set[str]:
    return {m.item_id for m in ledger.recall(**options)}


# -- expiry: read-time predicate, then the sweep ----------------------------------------


def test_an_inferred_fact_expires_by_class_before_and_after_the_sweep(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    token = f"zq{secrets.token_hex(6)}"
    inferred = alice.remember(fact("employer", f"Works at {token}", origin="inferred")).item_id
    explicit = alice.remember(fact("city", "Hangzhou")).item_id
    for _ in range(3):  # reads never extend an item's life
        assert inferred in _ids(alice)
        assert alice.get(inferred).text is not None
    _later(service, 91 * DAY)
    assert _ids(alice) == {explicit}  # expired: never recalled, before any sweep
    shown = alice.get(inferred)
    assert shown.expired and shown.text is None and not shown.erased
    assert alice.context(token, rank="keyword").items == []
    assert alice.history(inferred) == []
    [report] = expire_due(service.job_context, datetime.now(UTC) + 91 * DAY)
    assert report.completed and report.targets == [inferred]
    assert report.basis == "retention_expiry"
    assert alice.get(inferred).erased
    if settings.postgres is None:
        _, scan = service.requests.scan_files(report.request_id)
        assert scan is not None and scan.status == "ok"
        assert file_bytes_contain(sqlite_files(settings), token) == []


def test_a_context_that_serves_an_item_does_not_extend_its_life(
    alice: MemoryLedger, service: MemoryService
) -> None:
    inferred = alice.remember(fact("employer", "Acme Robotics", origin="inferred")).item_id
    turn_id = alice.remember(turn("where do I work?", turn_id="t9")).item_id
    served = alice.context("Acme Robotics", for_turn=turn_id, rank="keyword")
    assert inferred in {i.item_id for i in served.items}
    assert due_items(service.job_context, datetime.now(UTC) + 91 * DAY) == {
        "acme/alice": [inferred]
    }


def test_a_cached_context_is_not_served_past_an_items_expiry(
    alice: MemoryLedger, service: MemoryService
) -> None:
    inferred = alice.remember(fact("employer", "Acme Robotics", origin="inferred")).item_id
    first = alice.context("Acme Robotics", rank="keyword")
    assert [i.item_id for i in first.items] == [inferred] and first.valid_until is not None
    assert alice.context("Acme Robotics", rank="keyword") is first  # cached
    _later(service, 91 * DAY)  # the log has not moved; the clock has
    assert alice.context("Acme Robotics", rank="keyword").items == []


def test_session_basis_items_end_with_their_session(alice: MemoryLedger) -> None:
    session = {"basis": "session"}
    scratch = alice.remember(fact("draft", "pick up dry cleaning", retention=session)).item_id
    other = alice.remember(
        {**fact("draft", "other session"), "provenance": provenance(session="s2")}
        | {"retention": session}
    ).item_id
    kept = alice.remember(fact("city", "Hangzhou")).item_id
    [report] = alice.end_session("s1")
    assert report.completed and report.targets == [scratch]
    assert report.basis == "session_end"
    assert _ids(alice) == {other, kept}
    assert alice.end_session("s1") == []


# -- protect list and legal holds ----------------------------------------------------------


def test_the_protect_list_is_never_auto_forgotten_but_a_user_request_wins(
    alice: MemoryLedger, service: MemoryService
) -> None:
    allergy = alice.remember(fact("allergy", "peanuts", origin="inferred")).item_id
    _later(service, 400 * DAY)
    assert allergy in _ids(alice)  # the inferred class would have expired it
    assert due_items(service.job_context, datetime.now(UTC) + 400 * DAY) == {}
    explained = service.for_principal(ALICE).explain(allergy, datetime.now(UTC) + 400 * DAY)
    assert explained["state"] == "protected"
    assert explained["retention"]["protected_by"] == "protect:predicate:allergy"
    report = alice.forget(allergy)
    assert report.completed
    [decided] = [r for r in report.receipts if r.store == "retention_policy"]
    assert decided.action == "erasure_over_protect"
    assert decided.evidence["rule"] == "protect:predicate:allergy"
    assert decided.evidence["legal_hold"] is False


def test_a_legal_hold_blocks_a_request_until_it_is_lifted(
    alice: MemoryLedger, service: MemoryService
) -> None:
    record = alice.remember(fact("diagnosis", "asthma", category="health")).item_id
    other = alice.remember(fact("city", "Hangzhou")).item_id
    service.holds.place(
        "case-44", namespace="acme", reason="case-2026-044", placed_by="legal", category="health"
    )
    blocked = alice.forget(record, other)
    assert blocked.status == "blocked" and blocked.held_by == ["case-44"]
    assert "case-44" in blocked.message and "nothing was erased" in blocked.message
    assert alice.get(record).text == "asthma" and alice.get(other).text == "Hangzhou"
    entries = service.ledger.entries(blocked.request_id)
    [entry] = [e for e in entries if e.entry_type == "blocked"]
    assert entry.payload == {"holds": ["case-44"], "items": [record]}
    assert service.requests.report(blocked.request_id).status == "blocked"
    with pytest.raises(InvalidWrite, match="already in force"):
        service.holds.place("case-44", namespace="acme", reason="x", placed_by="legal")
    [resumed] = service.operations.lift_hold("case-44", lifted_by="legal")
    assert resumed.request_id == blocked.request_id and resumed.completed
    assert alice.get(record).erased and alice.get(other).erased
    assert service.holds.active() == []


def test_a_redaction_of_a_held_item_is_refused_and_changes_nothing(
    alice: MemoryLedger, service: MemoryService
) -> None:
    item = alice.remember(fact("note", "call Dr. Wang at 555-0199", category="health")).item_id
    service.holds.place("case-9", namespace="acme/alice", reason="case-9", placed_by="legal")
    report = alice.redact(item, spans=["555-0199"])
    assert report.status == "refused"
    [refusal] = [e for e in service.ledger.entries(report.request_id) if e.entry_type == "refusal"]
    assert refusal.payload["reason"] == "legal_hold"
    assert alice.get(item).text == "call Dr. Wang at 555-0199"


def test_a_held_item_is_unreadable_once_expired_but_the_sweep_keeps_it(
    alice: MemoryLedger, service: MemoryService
) -> None:
    inferred = alice.remember(fact("employer", "Acme", origin="inferred")).item_id
    service.holds.place("audit-1", namespace="acme/alice", reason="audit", placed_by="legal")
    later = _later(service, 91 * DAY)
    assert _ids(alice) == set()
    assert expire_due(service.job_context, later) == []
    assert service.for_principal(ALICE).explain(inferred, later)["state"] == "held"
    service.operations.lift_hold("audit-1", lifted_by="legal")
    [report] = expire_due(service.job_context, later)
    assert report.completed and report.targets == [inferred]


def test_hold_names_are_unique_within_the_subtree_they_are_placed_in(
    alice: MemoryLedger, service: MemoryService
) -> None:
    bob = service.for_principal(Principal("acme", "bob"))
    held = bob.remember(fact("city", "Ningbo")).item_id
    service.holds.place("case-1", namespace="acme/alice", reason="a", placed_by="legal")
    service.holds.place("case-1", namespace="acme/bob", reason="b", placed_by="legal")
    service.holds.place("case-1", namespace="acme/alice/p1", reason="p", placed_by="legal")
    with pytest.raises(InvalidWrite, match="already in force in acme/bob or below"):
        service.holds.place("case-1", namespace="acme/bob", reason="x", placed_by="legal")
    with pytest.raises(InvalidWrite, match="already in force in acme or below"):
        service.holds.place("case-1", namespace="acme", reason="x", placed_by="legal")
    blocked = bob.forget(held)
    assert blocked.status == "blocked" and blocked.held_by == ["case-1"]
    with pytest.raises(InvalidWrite, match=r"3 holds named case-1 .*acme/alice, acme/alice/p1"):
        service.operations.lift_hold("case-1", lifted_by="legal")  # ambiguous: nothing is lifted
    with pytest.raises(InvalidWrite, match="2 holds named case-1"):
        service.operations.lift_hold(
            "case-1", lifted_by="legal", within=lambda ns: ns.startswith("acme/a")
        )
    assert len(service.holds.active()) == 3
    with pytest.raises(NotFound):
        service.operations.lift_hold("case-1", lifted_by="legal", namespace="acme/carol")
    [resumed] = service.operations.lift_hold("case-1", lifted_by="legal", namespace="acme/bob")
    assert resumed.request_id == blocked.request_id and resumed.completed
    assert sorted(h.namespace for h in service.holds.active()) == ["acme/alice", "acme/alice/p1"]
    lifted = service.operations.lift_hold(
        "case-1", lifted_by="legal", within=lambda ns: ns == "acme/alice/p1"
    )
    assert lifted == [] and [h.namespace for h in service.holds.active()] == ["acme/alice"]


def test_a_hold_on_another_tenant_or_category_does_not_block(
    alice: MemoryLedger, service: MemoryService
) -> None:
    item = alice.remember(fact("city", "Hangzhou")).item_id
    service.holds.place("h1", namespace="other", reason="x", placed_by="legal")
    service.holds.place("h2", namespace="acme", reason="x", placed_by="legal", category="health")
    service.holds.place("h3", namespace="acme/alicia", reason="x", placed_by="legal")
    assert alice.forget(item).completed


# -- policy versions -------------------------------------------------------------------


def test_a_new_policy_version_applies_to_existing_items_after_a_diff(
    alice: MemoryLedger, service: MemoryService, tmp_path: Path
) -> None:
    kept = alice.remember(fact("city", "Hangzhou")).item_id
    note = alice.remember(fact("note", "buy milk", category="errands")).item_id
    assert alice.get(note).text == "buy milk"
    text = _policy(
        2,
        """
        [[retention.class]]
        name = "errands"
        category = "errands"
        ttl = "1d"
        """,
    )
    candidate = policy_from_text(text).retention
    assert candidate is not None
    service.runner.catch_up()  # a diff reads the catalog as the caller brought it
    preview = diff(service.engine, service.retention, candidate, datetime.now(UTC) + 2 * DAY)
    assert preview.newly_due == 1 and preview.newly_due_ids == [note]
    assert preview.rule_changes == {"default -> class:errands": 1}
    assert _ids(alice) == {kept, note}  # a diff changes nothing
    _install(service, text, tmp_path)
    assert service.retention.version == 2
    [entry] = [e for e in service.ledger.entries("policy-v2")]
    assert entry.payload["version"] == 2 and entry.payload["counts"]["items"] == 2
    later = _later(service, 2 * DAY)
    assert _ids(alice) == {kept}
    assert service.for_principal(ALICE).explain(note, later)["retention"]["rule"] == "class:errands"
    written = service.log.get(__import__("uuid").UUID(note)).policy_version
    assert written == 1  # the version it was written under stays on the item
    [report] = expire_due(service.job_context, later)
    assert report.targets == [note] and report.completed


def test_an_invalid_policy_is_rejected_whole_and_the_old_one_stays(
    service: MemoryService, tmp_path: Path
) -> None:
    _install(service, _policy(3), tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_text(_policy(4, '\n[[retention.class]]\nname = "x"\nkind = "fact"\nttl = "0d"\n'))
    with pytest.raises(ConfigurationError, match=r"retention.class.0.ttl: .* \(line 7\)"):
        read_candidate(bad)
    for ttl in ("-3d", "0h", "1.5d", "30", "forever", "36601d"):
        with pytest.raises(ConfigurationError, match="ttl"):
            policy_from_text(_policy(4, f'[[retention.class]]\nname="x"\nkind="fact"\nttl="{ttl}"'))
    lower = _policy(2)
    _, candidate = read_candidate(_write(tmp_path / "lower.toml", lower))
    with pytest.raises(ConfigurationError, match="must be higher"):
        install(*_installing(service), lower, candidate, "op")
    assert [e.request_id for e in service.ledger.entries() if e.entry_type == "policy"] == [
        "policy-v3"
    ]
    assert service.retention.version == 3
    # A hand-edited file that became invalid: the running service keeps the policy in force.
    (service.settings.data_dir / POLICY_FILE).write_text("[retention]\nversion = 'x'\n")
    assert service.retention.version == 3


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_policy_commands_diff_and_install_from_the_cli(
    alice: MemoryLedger, where: list[str], tmp_path: Path
) -> None:
    alice.remember(fact("note", "buy milk", category="errands"))
    good = _write(
        tmp_path / "p.toml",
        _policy(2, '[[retention.class]]\nname="e"\ncategory="errands"\nttl="1d"\n'),
    )
    bad = _write(tmp_path / "bad.toml", _policy(3, "default_ttl = '-1d'\n"))
    cli = [sys.executable, "-m", "memory_ledger.cli"]
    shown = subprocess.run(
        [*cli, "policy", "diff", str(good), "--json", *where], capture_output=True
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["rule_changes"] == {"default -> class:e": 1}
    refused = subprocess.run(
        [*cli, "policy", "install", str(bad), *where], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "default_ttl" in refused.stderr and "line 3" in refused.stderr
    done = subprocess.run(
        [*cli, "policy", "install", str(good), "--json", *where], capture_output=True
    )
    assert done.returncode == 0, done.stderr
    version = subprocess.run([*cli, "policy", "show", "--json", *where], capture_output=True)
    assert json.loads(version.stdout)["version"] == 2


def test_holds_explain_and_end_session_from_the_cli(alice: MemoryLedger, where: list[str]) -> None:
    record = alice.remember(fact("diagnosis", "asthma", category="health")).item_id
    draft = alice.remember(fact("draft", "scratch", retention={"basis": "session"})).item_id
    code, output = cli(
        "hold", "place", "case-3", "--scope", "acme", "--reason", "case-3",
        "--category", "health", "--by", "legal", *where, "--json",
    )  # fmt: skip
    assert code == 0, output
    assert json.loads(output)["namespace"] == "acme"
    code, output = cli("hold", "place", "bad", "--scope", "acme", "--reason", "Free text!", *where)
    assert code != 0 and "reason" in output and "Traceback" not in output
    code, output = cli("hold", "list", *where, "--json")
    assert [h["name"] for h in json.loads(output)["holds"]] == ["case-3"]
    code, output = cli("forget", "-n", "acme/alice", "--memory", record, *where, "--json")
    assert json.loads(output)["status"] == "blocked"
    code, output = cli("explain", record, "-n", "acme/alice", *where, "--json")
    assert code == 0 and json.loads(output)["holds"] == ["case-3"]
    assert "asthma" not in output  # explain shows rules, never content
    code, output = cli("explain", record, "-n", "acme/bob", *where)
    assert code == 5  # another namespace's item: not found
    code, output = cli("hold", "lift", "case-3", "--by", "legal", *where, "--json")
    assert code == 0 and [r["status"] for r in json.loads(output)["resumed"]] == ["completed"]
    code, output = cli("hold", "lift", "case-3", *where)
    assert code == 5
    code, output = cli("end-session", "s1", "-n", "acme/alice", *where, "--json")
    assert code == 0 and json.loads(output)["requests"][0]["erased"] == 1
    assert alice.get(draft).erased and alice.get(record).erased


def test_a_blocked_forget_exits_with_its_own_code(alice: MemoryLedger, where: list[str]) -> None:
    """A legal hold is not an unexpected failure (1): `blocked` exits 14, from a scope,
    from a resumed request and from an executed plan alike."""
    from memory_ledger.cli.forget import EXIT_FOR_STATUS

    record = alice.remember(fact("diagnosis", "asthma", category="health")).item_id
    code, output = cli("hold", "place", "case-7", "--scope", "acme/alice", "--reason", "case-7",
                       *where)  # fmt: skip
    assert code == 0, output
    code, output = cli("forget", "-n", "acme/alice", "--memory", record, *where, "--json")
    assert json.loads(output)["status"] == "blocked" and code == 14
    assert EXIT_FOR_STATUS.get("blocked") == 14
    request = json.loads(output)["request_id"]
    code, output = cli("forget", "-n", "acme/alice", "--resume", request, *where)
    assert code == 14 and "case-7" in output
    code, output = cli("forget", "-n", "acme/alice", "--request", "forget my diagnosis",
                       *where, "--json")  # fmt: skip
    assert code == 0, output
    plan = json.loads(output)
    code, output = cli("forget", "-n", "acme/alice", "--plan", plan["plan_id"], *where, "--json")
    assert code == 14 and json.loads(output)["status"] == "blocked", output
    assert alice.get(record).text == "asthma"
    assert sorted(set(EXIT_FOR_STATUS.values()) - {0}) == [7, 8, 14]  # 1 stays unexpected


def test_show_says_an_expired_item_is_withheld(alice: MemoryLedger, where: list[str]) -> None:
    item = alice.remember(fact("employer", "Acme Robotics", origin="inferred")).item_id
    code, output = cli("show", "-n", "acme/alice", item, *where)
    assert code == 0 and "Acme Robotics" in output
    later = (datetime.now(UTC) + 91 * DAY).isoformat()
    code, output = cli("explain", item, "-n", "acme/alice", "--now", later, *where)
    assert code == 0 and "expired" in output and "class:inferred" in output


# -- the SQL clause and the Python decision agree --------------------------------------

_POLICY = policy_from_text(
    _policy(
        5,
        """
        default_ttl = "400d"
        [[retention.class]]
        name = "inferred"
        origin = "inferred"
        ttl = "30d"
        [[retention.class]]
        name = "health"
        category = ["health", "medical"]
        kind = "fact"
        ttl = "2w"
        [[retention.class]]
        name = "keep_contracts"
        basis = "contract"
        ttl = "never"
        [retention.protect]
        predicates = ["allergy"]
        categories = ["legal"]
        """,
    )
).retention
_T = datetime(2026, 1, 1, tzinfo=UTC)
_rows = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["fact", "preference", "turn"]),
        "category": st.sampled_from(["health", "medical", "legal", "general"]),
        "predicate": st.sampled_from(["allergy", "city", "turn"]),
        "sensitivity": st.sampled_from(["public", "personal"]),
        "basis": st.sampled_from(["session", "contract", "indefinite"]),
        "origin": st.sampled_from(["explicit", "inferred", "observed"]),
        "recorded_at": st.integers(0, 900).map(lambda d: canonical_time(_T + timedelta(days=d))),
        "expires_at": st.none()
        | st.integers(0, 900).map(lambda d: canonical_time(_T + timedelta(days=d, hours=3))),
    }
)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_rows, min_size=1, max_size=30), day=st.integers(0, 1400))
def test_the_sql_clause_decides_as_the_python_rule_does(rows: list[dict], day: int) -> None:
    assert _POLICY is not None
    engine = create_engine("sqlite://")
    meta = MetaData()
    names = ["item_id", *rows[0].keys()]
    table = Table("c", meta, *(Column(n, Text) for n in names))
    meta.create_all(engine)
    now = _T + timedelta(days=day)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"item_id": str(i), **r} for i, r in enumerate(rows)])
        found = set(
            conn.execute(
                select(table.c.item_id).where(_POLICY.expired_clause(table.c)),
                _POLICY.cutoffs(now),
            ).scalars()
        )
    expected = {str(i) for i, r in enumerate(rows) if _POLICY.decide(r).expired(now)}
    assert found == expected


# -- decay and the archived tier -------------------------------------------------------

DECAY = """
[decay]
period = "1d"
archive_below = 0.2
reinforce_step = 0.1
[[decay.class]]
name = "seats"
kind = "preference"
half_life = "10d"
"""


def test_decay_archives_once_per_period_and_reinforcement_brings_it_back(
    settings: Settings,
) -> None:
    (settings.data_dir).mkdir(parents=True, exist_ok=True)
    (settings.data_dir / POLICY_FILE).write_text(_policy(2) + DECAY)
    with MemoryService(settings) as service:
        alice = service.for_principal(ALICE)
        seat = alice.remember(preference("seat", "aisle", origin="observed")).item_id
        city = alice.remember(fact("city", "Hangzhou")).item_id
        _, start = service.retention.period_start(datetime.now(UTC) + 7 * DAY)
        first = decay_pass(service.job_context, start + timedelta(hours=1))
        assert first["archived"] == 1 and first["unarchived"] == 0
        again = decay_pass(service.job_context, start + timedelta(hours=20))  # the same period
        assert again["archived"] == again["unarchived"] == 0
        archived = [e for e in service.log.events_of(__import__("uuid").UUID(seat))]
        assert [type(e).__name__ for e in archived].count("Archived") == 1
        assert _ids(alice) == {city}
        assert _ids(alice, include_archived=True) == {seat, city}
        assert alice.get(seat).archived and alice.get(seat).text == "aisle"
        explained = service.for_principal(ALICE).explain(seat, start)
        assert explained["state"] == "archived" and explained["decay"]["rule"] == "decay:seats"
        assert alice.context("aisle seat", rank="keyword").items == []
        for n in range(3):  # served three times (asked for the archived tier explicitly)
            t = alice.remember(turn("which seat?", turn_id=f"r{n}")).item_id
            ctx = alice.context("aisle", for_turn=t, rank="keyword", include_archived=True)
            assert seat in {i.item_id for i in ctx.items}
        back = decay_pass(service.job_context, datetime.now(UTC) + 8 * DAY)
        assert back["unarchived"] == 1
        assert seat in _ids(alice)


# -- kill -9 in the middle of a sweep --------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("count", [5, 1_200])  # 1,200: a bulk erasure, chunks of 500 ids
def test_a_sweep_killed_mid_fan_out_resumes_to_completion(
    settings: Settings, plugin_path: Path, count: int
) -> None:
    with MemoryService(settings) as service:
        ledger = service.for_principal(ALICE)
        writes = [fact(f"guess_{n}", f"value {n}", origin="inferred") for n in range(count)]
        ids = {
            s.item_id
            for i in range(0, count, 500)
            for s in ledger.remember_many(writes[i : i + 500])
        }
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg else ""
    script = textwrap.dedent(f"""
        import sys
        from datetime import UTC, datetime, timedelta
        sys.path.insert(0, {str(plugin_path)!r})
        from memory_ledger.jobs.retention import expire_due
        from memory_ledger.api import MemoryService
        with MemoryService.open({str(settings.data_dir)!r}, {url!r} or None) as service:
            expire_due(service.job_context, datetime.now(UTC) + timedelta(days=91))
    """)
    # Only the swept process has the store that never returns.
    env = {**os.environ, "MEMORY_LEDGER_EXTRA_STORES": "ml_test_plugins:slow"}
    worker = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)
    entered = plugin_path / "slow-store-entered"
    for _ in range(600):
        if entered.exists() or worker.poll() is not None:
            break
        time.sleep(0.05)
    assert entered.exists(), worker.communicate()[1].decode()
    worker.kill()  # SIGKILL mid fan-out
    worker.wait()
    with MemoryService(settings) as service:  # the next start finishes the request
        [request_id] = service.ledger.request_ids()
        assert service.ledger.latest_status(request_id) == "completed"
        assert set(service.requests.report(request_id).targets) == ids
        assert expire_due(service.job_context, datetime.now(UTC) + 91 * DAY) == []
        assert all(service.for_principal(ALICE).get(i).erased for i in ids)


def test_the_decay_job_runs_once_through_the_scheduler_path(
    alice: MemoryLedger, where: list[str]
) -> None:
    alice.remember(preference("seat", "aisle", origin="observed"))
    now = (datetime.now(UTC) + 400 * DAY).isoformat()
    cli = [sys.executable, "-m", "memory_ledger.cli", "jobs", "run-once", "decay", "--now", now]
    first = subprocess.run([*cli, *where, "--json"], capture_output=True)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["counts"]["archived"] == 1
    again = subprocess.run([*cli, *where, "--json"], capture_output=True)
    assert json.loads(again.stdout)["counts"]["archived"] == 0
    assert _ids(alice) == set() and len(_ids(alice, include_archived=True)) == 1


def test_a_merge_never_gives_its_inputs_a_new_life(
    alice: MemoryLedger, service: MemoryService
) -> None:
    from memory_ledger.jobs.dedupe import merge_duplicates

    first = alice.remember(fact("employer", "Acme Robotics", origin="inferred")).item_id
    alice.remember(fact("employer", "acme robotics.", origin="inferred", turn="t2"))
    now = datetime.now(UTC)
    due = service.for_principal(ALICE).explain(first, now)["retention"]["expires_at"]
    assert (
        merge_duplicates(service.job_context, now + 91 * DAY)["merged"] == 0
    )  # expired: not merged
    assert merge_duplicates(service.job_context, now)["merged"] == 1
    [merged] = alice.recall()
    assert merged.item_id != first and merged.expires_at == due
    # The merged item and its (suppressed, still held) members end together.
    [due_ids] = due_items(service.job_context, now + 91 * DAY).values()
    assert merged.item_id in due_ids and first in due_ids and len(due_ids) == 3
