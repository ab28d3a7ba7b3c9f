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
        if not residue.HYPERSCAN:
            pytest.skip("Hyperscan is installed on x86-64 Linux only")
        monkeypatch.setattr(residue, "_PIECE", 7)  # most matches straddle two pieces
        monkeypatch.setattr(residue, "_CHUNK", 7)
    else:
        monkeypatch.setattr(residue, "HYPERSCAN", False)
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


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(st.binary(min_size=0, max_size=30), min_size=1, max_size=8),
    needles=st.lists(st.binary(min_size=4, max_size=6), min_size=1, max_size=3, unique=True),
    planted=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2)), max_size=5),
)
def test_small_files_packed_together_are_each_named_correctly(
    tmp_path: Path,
    engine: str,
    files: list[bytes],
    needles: list[bytes],
    planted: list[tuple[int, int]],
) -> None:
    """Files smaller than a piece share one task; a finding must still name its file."""
    for file_index, needle_index in planted:
        if file_index < len(files) and needle_index < len(needles):
            files[file_index] += needles[needle_index]
    folder = tmp_path / "packed"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    paths = []
    for index, data in enumerate(files):
        paths.append(folder / f"f{index}")
        paths[-1].write_bytes(data)

    found = {(Path(f.path).name, f.needle_index) for f in residue.scan(paths, needles)}

    expected = {
        (f"f{i}", n)
        for i, data in enumerate(files)
        for n, needle in enumerate(needles)
        if needle in data
    }
    assert found == expected


def test_files_under_lists_nested_files_and_skips_symlinks(tmp_path: Path) -> None:
    (tmp_path / "vectors").mkdir()
    (tmp_path / "vectors" / "seg-1.f32").write_bytes(b"\x00" * 8)
    (tmp_path / "events.sqlite").write_bytes(b"x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret").write_text("not ours")
    (tmp_path / "link-to-dir").symlink_to(outside, target_is_directory=True)
    (tmp_path / "link-to-file").symlink_to(outside / "secret")

    names = [p.relative_to(tmp_path).as_posix() for p in residue.files_under(tmp_path)]

    assert names == ["events.sqlite", "vectors/seg-1.f32"]
    assert residue.files_under(tmp_path / "missing") == []
