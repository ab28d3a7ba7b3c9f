"""A rebuild killed with SIGKILL part way finishes (or is redone) to a clean rebuild's view.

A full rebuild resets every projection to position 0 and replays the log in batches, each
committed with its positions; the vector index is planned from the same batches and
committed in one manifest switch at the end. A child process runs `rebuild` and kills
itself (SIGKILL: no cleanup, no `finally`) at one of three points: after two batches
were committed, in the last batch's settle (its transaction never commits), and just
before the vector index's new manifest is written. A restarted process's catch-up must
then bring every projection to what a clean rebuild gives, the vector index must serve
exactly the clean rebuild's rows, and a second rebuild must give the same again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
from factories import fact, later, preference, provenance, turn
from waits import HUNG

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.principal import Principal

ALICE = Principal("acme", "alice")
KILL_POINTS = ("mid_replay", "settle", "vector_commit")


def _fill(service: MemoryService) -> None:
    """Enough history for several small batches, with every kind of later event: a
    superseding fact, an update, a suppression, a redaction and an erasure."""
    ledger = service.for_principal(ALICE)
    ids = []
    for day in range(6):
        ids.append(ledger.remember(fact("home_city", f"city number {day}", at=later(day))).item_id)
        ids.append(ledger.remember(turn(f"we talked about topic {day} today")).item_id)
        ids.append(ledger.remember(preference(f"tone_{day}", f"tone {day}")).item_id)
    ledger.update(ids[2], {"value": "brisk tone", "provenance": provenance(at=later(9))})
    ledger.suppress(ids[5])
    ledger.redact(ids[4], ["content"])
    ledger.forget(ids[7])
    service.runner.catch_up()
    service.vectors.catch_up()


def _vector_rows(service: MemoryService) -> list[tuple[Any, ...]]:
    return [
        (r.item_id, r.namespace, r.kind, r.version, np.asarray(r.vector).tobytes())
        for r in sorted(service.vectors.snapshot(), key=lambda r: r.item_id)
    ]


def _kill_during_rebuild(settings: Settings, point: str) -> None:
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg else ""
    script = textwrap.dedent(f"""
        import os, signal
        import memory_ledger.projections.runner as runner
        import memory_ledger.projections.vector_index as vi
        from memory_ledger.api import MemoryService
        from memory_ledger.projections.keyword_index import KeywordIndexProjection

        def die(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)

        point = {point!r}
        if point == "mid_replay":
            real_decode, calls = runner.decode_batch, []
            def decode_batch(*args, **kwargs):
                calls.append(1)
                if len(calls) == 3:  # two batches committed, the third never
                    die()
                return real_decode(*args, **kwargs)
            runner.decode_batch = decode_batch
        elif point == "settle":
            KeywordIndexProjection.settle = die
        else:
            real_write = vi.write_atomic
            def write_atomic(directory, name, data):
                if name == "manifest.json":
                    die()
                return real_write(directory, name, data)
            vi.write_atomic = write_atomic
        with MemoryService.open({str(settings.data_dir)!r}, {url!r} or None) as service:
            service.runner.batch_size = 4
            service.rebuild()
    """)
    env = {**os.environ, "MEMORY_LEDGER_REBUILD_SIDE_BY_SIDE": "0"}
    worker = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, timeout=HUNG
    )
    assert worker.returncode == -9, worker.stderr.decode()


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_rebuild_killed_part_way_is_finished_by_the_next_catch_up(
    settings: Settings, point: str
) -> None:
    with MemoryService(settings) as service:
        _fill(service)
        service.rebuild()
        clean, clean_vectors = service.runner.snapshot(), _vector_rows(service)
        assert clean_vectors and any(clean.values())

    _kill_during_rebuild(settings, point)

    with MemoryService(settings) as again:
        if point != "vector_commit":  # the projections' replay stopped part way
            assert any(s.behind > 0 for s in again.runner.status())
        again.runner.catch_up()
        again.vectors.catch_up()
        assert again.runner.snapshot() == clean
        assert _vector_rows(again) == clean_vectors
        again.rebuild()  # or redone from the start: the same again
        assert again.runner.snapshot() == clean
        assert _vector_rows(again) == clean_vectors
