"""Several processes catching up the same projections never apply a batch twice."""

from __future__ import annotations

import subprocess
import sys

from factories import fact, later, preference
from waits import HUNG

from memory_ledger.api import MemoryService
from memory_ledger.config import Settings
from memory_ledger.principal import Principal

CATCH_UP = """
import sys
from memory_ledger.api import MemoryService
with MemoryService.open(sys.argv[1], sys.argv[2] or None) as service:
    service.runner.batch_size = 7
    service.runner.catch_up()
"""


def test_parallel_catch_up_in_three_processes(settings: Settings) -> None:
    with MemoryService(settings) as service:
        ledger = service.for_principal(Principal("acme", "alice"))
        ledger.remember_many(
            [fact(f"p{i % 13}", f"value number {i}", at=later(i % 5)) for i in range(150)]
            + [preference(f"pref{i}", f"choice {i}") for i in range(50)]
        )
    pg = settings.postgres
    url = f"postgresql://{pg.user}@{pg.host}:{pg.port}/{pg.dbname}" if pg else ""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", CATCH_UP, str(settings.data_dir), url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for worker in workers:
        _, stderr = worker.communicate(timeout=HUNG)
        assert worker.returncode == 0, stderr
    with MemoryService(settings) as service:
        assert all(s.behind == 0 for s in service.runner.status())
        incremental = service.runner.snapshot()
        assert len(incremental["facts"]) == 150 and len(incremental["preferences"]) == 50
        service.rebuild()
        assert service.runner.snapshot() == incremental
