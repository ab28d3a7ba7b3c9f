"""Which backups a store knows: the registry file beside its data (`backups.json`).

Taking a backup registers it (restore/backup.py), retention unregisters it
(jobs/backup_retention.py), and the data map's backups store reads it (restore/store.py):
a module of its own so that the backup code and the store that lists it do not import
each other.
"""

from __future__ import annotations

import json
from pathlib import Path

from memory_ledger.errors import ConfigurationError
from memory_ledger.projections.vector_files import write_atomic

REGISTRY = "backups.json"


def register(data_dir: Path, path: Path) -> None:
    paths = [p for p in registry_paths(data_dir) if p != path.resolve()] + [path.resolve()]
    _write(data_dir, paths)


def unregister(data_dir: Path, path: Path) -> None:
    _write(data_dir, [p for p in registry_paths(data_dir) if p != path.resolve()])


def registry_paths(data_dir: Path) -> list[Path]:
    try:
        raw = json.loads((Path(data_dir) / REGISTRY).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"the backup registry {data_dir}/{REGISTRY}: {exc}") from None
    return [Path(p) for p in raw.get("backups", []) if isinstance(p, str)]


def _write(data_dir: Path, paths: list[Path]) -> None:
    listed = json.dumps({"backups": [str(p) for p in paths]}, indent=2)
    write_atomic(Path(data_dir), REGISTRY, listed.encode("utf-8"))
