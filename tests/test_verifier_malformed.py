"""The verifier and the `audit` commands given what no `audit pack` makes: every field of
a real pack, kept head and signed document replaced by a value of another shape, JSON
nested too deeply to parse, and text that would drive a terminal. The answer is always
a verdict (`malformed` or a named failure, exit 9) or "cannot read" (exit 2): never a
traceback, and nothing of the file printed raw (issue 35, items 1, 2 and 8).

The pack is made by the real Auditor over a small SQLite ledger (no service: the audit
key's own entries are a ledger id with entries), so each test costs milliseconds."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memory_ledger.audit import verifier
from memory_ledger.audit.heads import Auditor
from memory_ledger.audit.pack import build_pack
from memory_ledger.audit.signed import signed
from memory_ledger.cli import app
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.ledger import LifecycleLedger

ESC = "\x1b]0;owned\x07\x1b[2J"
DEEP = "[" * 100_000
#: Values of every JSON shape, and strings a field of the right type must still refuse.
ODD: list[Any] = [
    None, True, 0, -1, 2**64, 1.5, "", "x", "\ud800", ESC, "é" * 3, [], {}, [1, "a"],
    {"a": 1}, [[[[[[[[[[[]]]]]]]]]]],
]  # fmt: skip


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real pack of `audit-key-1` with a consistency proof from a head kept at size 1
    (same key), and a document signed with the same master key."""
    master = MasterKey.generate()
    with LifecycleLedger(Settings.resolve(tmp_path_factory.mktemp("ledger"))) as ledger:
        auditor = Auditor(ledger, master)
        kept = auditor.head().to_dict()
        Auditor(ledger, MasterKey.generate()).record_key()  # the tree grows past the head
        pack = build_pack(auditor, "audit-key-1", since=[kept["size"]])
    document = signed("drill report", {"passed": True, "findings": [{"code": "x"}]}, master)
    assert verifier.check_pack(pack, kept, kept["key_id"]) == []
    assert verifier.check_document(document, kept["key_id"]) == []
    return {"pack": pack, "kept": kept, "document": document}


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside `value` (dict keys and list indexes)."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, inner in items:
        yield (*path, key)
        yield from _paths(inner, (*path, key))


def _replaced(value: Any, path: tuple[Any, ...], new: Any, delete: bool = False) -> Any:
    changed = copy.deepcopy(value)
    parent = changed
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return changed


def _verdict(check: Any, *args: Any) -> list[tuple[str, str]]:
    """The failures a check reports; Malformed is the `malformed` failure. Any other
    exception fails the test: it would be a traceback for the person verifying."""
    try:
        failures = check(*args)
    except verifier.Malformed as exc:
        failures = [("malformed", str(exc))]
    assert all(reason in verifier.REASONS for reason, _ in failures), failures
    return failures


def _mutations(value: Any) -> Iterator[tuple[tuple[Any, ...], Any, bool]]:
    """(path, new value, delete instead): each field deleted, and replaced by each odd
    value that is not the value it holds."""
    for path in _paths(value):
        yield path, None, True
        held = value
        for key in path:
            held = held[key]
        for new in ODD:
            if not (type(new) is type(held) and new == held):
                yield path, new, False


# -- every field of another shape: a verdict, never an exception -----------------------------


def test_every_field_of_a_pack_and_a_kept_head_replaced_gives_a_verdict(
    evidence: dict[str, Any],
) -> None:
    pack, kept = evidence["pack"], evidence["kept"]
    checked = 0
    for path, new, delete in _mutations(pack):
        changed = _replaced(pack, path, new, delete)
        failures = _verdict(verifier.check_pack, changed, kept, kept["key_id"])
        checked += 1
        if path[0] != "consistency" or delete:  # a proof's content is only read against
            assert failures, (path, new)  # the kept head; an extra item is no failure
    for path, new, delete in _mutations(kept):
        changed = _replaced(kept, path, new, delete)
        assert _verdict(verifier.check_pack, pack, changed), (path, new)
    for odd in ODD:  # the whole file of another shape
        _verdict(verifier.check_pack, odd, kept)
        _verdict(verifier.check_pack, pack, odd)
    assert checked > 500  # every field of the pack, each replaced by every odd value


def test_every_field_of_a_signed_document_replaced_gives_a_verdict(
    evidence: dict[str, Any],
) -> None:
    document = evidence["document"]
    for path, new, delete in _mutations(document):
        changed = _replaced(document, path, new, delete)
        assert _verdict(verifier.check_document, changed), (path, new)
    for odd in ODD:
        _verdict(verifier.check_document, odd)
    deep: Any = []
    for _ in range(5_000):  # parsed (below the parser's limit) but too deep to sign again
        deep = [deep]
    assert _verdict(verifier.check_document, {**document, "x": deep})


def test_a_consistency_that_is_a_number_is_malformed_not_a_crash(
    evidence: dict[str, Any],
) -> None:
    """The adversarial case of item 2: `"consistency": 5` checked with a kept head."""
    pack, kept = evidence["pack"], evidence["kept"]
    failures = _verdict(verifier.check_pack, {**pack, "consistency": 5}, kept)
    assert failures == [("malformed", "pack.consistency: not a list")]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["pack", "kept", "document"]),
    st.sampled_from(["format", "head", "entries", "statement", "signature", "size", "x"]),
    _json,
)
def test_any_json_in_any_place_gives_a_verdict(where: str, key: str, value: Any) -> None:
    """Arbitrary JSON at the top of each input, or under one of its known fields."""
    base = {"format": verifier.PACK_FORMAT, "head": {}, "entries": [], "statement": {}}
    given_value = {**base, key: value}
    if where == "pack":
        _verdict(verifier.check_pack, given_value)
        _verdict(verifier.check_pack, value)
    elif where == "kept":
        _verdict(verifier.check_pack, base, value)
    else:
        _verdict(verifier.check_document, {"signature": {key: value}})
        _verdict(verifier.check_document, value)


# -- JSON too deep to parse: unreadable, exit 2 ------------------------------------------------


def test_json_nested_too_deeply_is_unreadable_exit_2_in_every_command(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(ValueError, match="nested too deeply"):
        verifier.load_json(DEEP)
    runner = CliRunner()
    for args in (
        ["audit", "verify-pack", str(deep)],
        ["audit", "verify-pack", str(deep), "--json"],
        ["audit", "verify-document", str(deep)],
        ["audit", "consistency", str(deep), "--data-dir", str(tmp_path / "none")],
    ):
        done = runner.invoke(app, args)
        assert done.exit_code == verifier.EXIT_UNREADABLE, (args, done.output)
        assert isinstance(done.exception, SystemExit), (args, done.exception)
        assert "nested too deeply" in done.output, done.output


def test_the_standalone_verifier_says_unreadable_without_a_traceback(tmp_path: Path) -> None:
    """The process as an auditor runs it: `python -I verifier.py` on a copy."""
    (tmp_path / "verifier.py").write_bytes(Path(verifier.__file__).read_bytes())
    (tmp_path / "deep.json").write_text(DEEP)
    (tmp_path / "pack.json").write_text(json.dumps({"format": verifier.PACK_FORMAT}))
    done = subprocess.run(
        [sys.executable, "-I", "verifier.py", "pack.json", "--head", "deep.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == verifier.EXIT_UNREADABLE, done
    assert "Traceback" not in done.stderr and "nested too deeply" in done.stderr, done.stderr


def test_a_consistency_that_is_a_number_is_exit_9_in_verify_pack(
    evidence: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack_file, head_file = tmp_path / "pack.json", tmp_path / "head.json"
    pack_file.write_text(json.dumps({**evidence["pack"], "consistency": 5}))
    head_file.write_text(json.dumps(evidence["kept"]))
    done = CliRunner().invoke(
        app, ["audit", "verify-pack", str(pack_file), "--head", str(head_file), "--json"]
    )
    assert done.exit_code == verifier.EXIT_FAILED, done.output
    assert json.loads(done.output)["failures"][0]["reason"] == "malformed"
    assert verifier.main([str(pack_file), "--head", str(head_file)]) == verifier.EXIT_FAILED
    assert "FAILED malformed" in capsys.readouterr().out


# -- nothing of the file reaches the terminal raw -----------------------------------------------


def test_the_verifier_prints_no_escape_from_a_document_or_a_pack(
    evidence: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A document signed with a kind that holds terminal escapes, valid or changed, a
    pack whose entry holds them, a file named with them: every line printed shows them
    as `\\x1b`."""
    master = MasterKey.generate()
    document = signed(ESC, {"passed": True}, master)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(document))
    bad.write_text(json.dumps({**document, "passed": False}))
    pack = tmp_path / "pack.json"
    changed = copy.deepcopy(evidence["pack"])
    changed["entries"][0]["request_id"] = ESC
    pack.write_text(json.dumps(changed))
    runs = [
        (["--document", str(good)], 0),
        (["--document", str(bad)], verifier.EXIT_FAILED),
        ([str(pack)], verifier.EXIT_FAILED),
        ([str(tmp_path / ESC)], verifier.EXIT_UNREADABLE),
    ]
    for args, code in runs:
        assert verifier.main(args) == code, args
        out, err = capsys.readouterr()
        assert "\x1b" not in out + err and "\x07" not in out + err, (args, out, err)
        assert "\\x1b" in out + err, (args, out, err)
    runner = CliRunner()
    for args in (["audit", "verify-document", str(good)], ["audit", "verify-pack", str(pack)]):
        done = runner.invoke(app, args)
        assert "\x1b" not in done.output and "\\x1b" in done.output, done.output
