"""Which server answers on a port: the instance file `memory-ledger serve` writes.

A client that starts a server and waits for `/v1/health` cannot tell its own server
from another already on the same port (an earlier run left in the background, another
program): a loop that only waits for a `200` goes on talking to the wrong one. So each
`serve` process draws a random instance id, answers `/v1/health` with it, and once it
listens writes it to a small file beside the store (`serve.json` in the data directory,
or `--instance-file`) with its pid, host, port and URL. A waiter is talking to its own
server when the health answer's instance is the file's. The file is removed when that
server stops (unless another server has written it since); one left by a killed server
names an instance nothing answers with, so it is never mistaken for a live one.

The id is no secret and grants nothing: it only tells one process from another."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

#: The instance file's name in the data directory when `--instance-file` is not given.
INSTANCE_FILE = "serve.json"
#: Every instance id starts with this, so a shell can find it in the file with
#: `grep -o 'mli-[0-9a-f]*'` (the quick start's wait loop does).
PREFIX = "mli-"


@dataclass(frozen=True)
class Instance:
    """One `serve` process, as its instance file records it."""

    instance: str
    pid: int
    host: str
    port: int
    url: str
    started_at: str

    @classmethod
    def new(cls, host: str, port: int, url: str) -> Instance:
        return cls(
            instance=PREFIX + secrets.token_hex(16),
            pid=os.getpid(),
            host=host,
            port=port,
            url=url,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )


def write(path: Path, instance: Instance) -> None:
    """Write the file whole or not at all (a reader never sees half of it)."""
    partial = path.with_name(f".{path.name}.{instance.pid}.tmp")
    partial.write_text(json.dumps(asdict(instance), indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read(path: Path) -> Instance | None:
    """The instance the file names; None when there is no file or it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Instance(**data)
    except (OSError, ValueError, TypeError):
        return None


def remove_if_ours(path: Path, instance: Instance) -> None:
    """Remove the file if it still names `instance` (another server may have written it
    since: then it is that server's to remove)."""
    found = read(path)
    if found is not None and found.instance == instance.instance:
        path.unlink(missing_ok=True)
