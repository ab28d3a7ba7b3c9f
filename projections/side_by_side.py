"""A full rebuild with the vector index in a second process, beside the projections.

A whole rebuild (after a restore, in a drill, on `rebuild`) replays the log twice over:
once into the projection tables, once into the vector index. Both are mostly Python
work (decoding, sealing, tokenising, embedding), so threads would take turns on one
interpreter lock; a second process runs the vector index's replay on another core while
this one replays the projections. They write different files (the vector index has its
own directory and its own lock, and commits in one manifest switch, which the parent's
index notices by the manifest's token), so they cannot get in each other's way.

The child (`python -m projections.side_by_side`, not a `multiprocessing` child, which
would import the caller's main script again) opens the log itself with the same
settings and master key, read from its standard input (a pipe: never its environment
or command line), and the embedder the environment names. It is used only when that
embedder is the one this process holds (the child checks its name and dimension, and
otherwise does nothing), there is a second CPU, and the log is long enough for it to
pay (`MIN_EVENTS`). In any other case the projections' replay hands the vector index
each batch it has read, decoded and opened (`VectorIndex.replay`), so one process reads
and opens the log once for both; the index is then embedded and committed here, after
the projections. If the child fails, the vector index is rebuilt here on its own: the
result is the same either way.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_ledger.crypto import MasterKey
    from memory_ledger.projections.events import Progress
    from memory_ledger.projections.runner import BatchListener
    from memory_ledger.projections.vector_index import VectorIndex

from memory_ledger.config import PostgresLocation, Settings

log = logging.getLogger("memory_ledger")
#: "0": rebuild the vector index in this process, after the projections; "1": always
#: in a second process; unset: in a second process from MIN_EVENTS events on.
#: Below this, starting the second process (about half a second) costs more than it saves.
MIN_EVENTS = 20_000
#: How the child's progress lines start (its last line is its answer).
PROGRESS_PREFIX = "progress "


def rebuild_all(
    settings: Settings,
    master: MasterKey,
    vectors: VectorIndex,
    projections: Callable[[Progress | None, BatchListener | None], int],
    progress: Progress | None = None,
) -> int:
    """Run `projections(progress, also)` here and the vector index's rebuild beside it
    (or, in one process, fed by it through `also`); returns what `projections` returns."""
    choice = settings.rebuild_side_by_side
    small = choice != "1" and vectors.log.max_position() < MIN_EVENTS
    if (os.cpu_count() or 1) < 2 or choice == "0" or small:
        replay = vectors.replay()
        replayed = projections(progress, replay.feed)
        vectors.rebuild(progress, replay)
        return replayed
    order = {
        "data_dir": str(settings.data_dir),
        "postgres": asdict(settings.postgres) if settings.postgres else None,
        "master": base64.b64encode(master.material).decode(),
        "source": master.source,
        "directory": str(vectors.directory),
        "embedder": [vectors.embedder_name, vectors.dimension],
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen(
        [sys.executable, "-m", "memory_ledger.projections.side_by_side"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert child.stdin is not None
    child.stdin.write(json.dumps(order).encode())
    child.stdin.close()
    lines: list[str] = []
    reader = threading.Thread(target=_relay, args=(child, lines, progress), daemon=True)
    reader.start()
    try:
        replayed = projections(progress, None)
    finally:
        reader.join()
        assert child.stdout is not None
        answer = lines[-1] if lines else ""  # the last line: a library may print too
        child.stdout.close()
        child.wait()
    if child.returncode != 0 or answer != "ok":
        log.warning("vector index rebuilt in this process instead (%s)", answer or "no answer")
        vectors.rebuild(progress)
    elif progress is not None:
        head = vectors.log.max_position()
        progress("vector_index", head, head)
    return replayed


def _relay(child: subprocess.Popen[bytes], lines: list[str], progress: Progress | None) -> None:
    """Read the child's lines as they come: its progress goes on to `progress` (the
    vector index's bar moves while the projections replay beside it), the rest is kept
    for the answer."""
    assert child.stdout is not None
    for raw in child.stdout:
        line = raw.decode(errors="replace").strip()
        stage, _, counts = line.removeprefix(PROGRESS_PREFIX).partition(" ")
        position, _, head = counts.partition(" ")
        if line.startswith(PROGRESS_PREFIX) and position.isdigit() and head.isdigit():
            if progress is not None:
                progress(stage, int(position), int(head))
        elif line:
            lines.append(line)


def _report(stage: str, position: int, head: int) -> None:
    print(f"{PROGRESS_PREFIX}{stage} {position} {head}", flush=True)


def _child() -> int:
    """Rebuild the vector index the parent described on standard input; print `ok`, or
    why not (a code, never content)."""
    from memory_ledger.crypto import MasterKey
    from memory_ledger.embedders import load_embedder
    from memory_ledger.event_log import EventLog
    from memory_ledger.projections.vector_index import VectorIndex

    order = json.loads(sys.stdin.read())
    pg = order["postgres"]
    settings = Settings(Path(order["data_dir"]), PostgresLocation(**pg) if pg else None)
    master = MasterKey(base64.b64decode(order["master"]), order["source"])
    embedder = load_embedder(settings.embedder)  # its environment is the parent's
    if [embedder.name, embedder.dimension] != order["embedder"]:
        print("skipped: the environment names another embedder")
        return 0
    event_log = EventLog(settings, master)
    try:
        VectorIndex(event_log, Path(order["directory"]), embedder).rebuild(_report)
    finally:
        event_log.close()
    print("ok")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(_child())
    except Exception as exc:  # reported to the parent, which rebuilds the index itself
        print(f"error: {type(exc).__name__}")
        raise SystemExit(1) from None
