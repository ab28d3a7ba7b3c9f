"""The byte scan finds every needle wherever it sits in a file, with or without Hyperscan.

Both search paths are held to the plain definition (`needle in file bytes`), including
matches that straddle the windows Hyperscan scans in, which the tests make tiny.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger import residue

ENGINES = ["hyperscan", "find"]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "hyperscan":
        if residue.hyperscan is None:
            pytest.skip("Hyperscan is installed on x86-64 Linux only")
        monkeypatch.setattr(residue, "_PIECE", 7)  # most matches straddle two pieces
        monkeypatch.setattr(residue, "_CHUNK", 7)
    else:
        monkeypatch.setattr(residue, "hyperscan", None)
        monkeypatch.setattr(residue, "_PIECE", 11)  # pieces of several chunks
        monkeypatch.setattr(residue, "_CHUNK", 3)
    return str(request.param)


def test_finds_each_needle_in_each_file(tmp_path: Path, engine: str) -> None:
    (tmp_path / "a.sqlite").write_bytes(b"\x00page\x00 18 Haisong Road \x00 window seat")
    (tmp_path / "a.sqlite-wal").write_bytes(b"")  # a truncated WAL: nothing to read
    (tmp_path / "b.sqlite").write_bytes(b"only the window seat here, twice: window seat")
    needles = [b"18 Haisong Road", b"window seat", b"not anywhere"]

    findings = residue.scan(residue.files_under(tmp_path), needles)

    assert {(Path(f.path).name, f.needle_index) for f in findings} == {
        ("a.sqlite", 0),
        ("a.sqlite", 1),
        ("b.sqlite", 1),
    }


def test_a_file_that_vanished_is_skipped(tmp_path: Path, engine: str) -> None:
    kept = tmp_path / "kept"
    kept.write_bytes(b"secret value")
    findings = residue.scan([tmp_path / "gone-wal", kept], [b"secret value"])
    assert [(Path(f.path).name, f.needle_index) for f in findings] == [("kept", 0)]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.binary(min_size=1, max_size=300),
    needles=st.lists(st.binary(min_size=4, max_size=12), min_size=1, max_size=6, unique=True),
    planted=st.lists(st.integers(min_value=0, max_value=5), max_size=4),
)
def test_agrees_with_plain_containment(
    tmp_path: Path, engine: str, data: bytes, needles: list[bytes], planted: list[int]
) -> None:
    for index in planted:  # make some needles present, at varied offsets
        if index < len(needles):
            cut = len(data) * (index + 1) // 7
            data = data[:cut] + needles[index] + data[cut:]
    path = tmp_path / "store.sqlite"
    path.write_bytes(data)

    found = {f.needle_index for f in residue.scan([path], needles)}

    assert found == {i for i, n in enumerate(needles) if n in data}
