"""A directory of derived files kept beside the data, sealed: one mechanism for every
cache that a fresh process loads instead of rebuilding (the recall states,
memory_ledger/retrieval/state_files.py; the vector search codes,
projections/vector_codes.py).

Each file is one `marshal` blob sealed with AES-256-GCM under a key derived from the
master key for its kind (`label`), bound by the caller's associated data (its format,
Python's marshal version, what it is of), and named by a keyed hash of what it is of, so
no namespace appears in clear. A file that does not open (a rotated master key, a torn
write, another Python, another format) reads as absent and is never trusted. `marshal`
is safe here because nothing unauthenticated reaches it: only a holder of the master key
can write a file that opens.

These files are copies of derived data, so every erasure removes them all
(`remove_all`). A writer that read its data before such a removal must not write after
it: it passes the `epoch` it saw when it began, and a removal since then drops the write.
"""

from __future__ import annotations

import hashlib
import hmac
import marshal
import os
import secrets
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory_ledger.crypto import NONCE_BYTES, MasterKey


def marshal_version() -> str:
    """What a marshal blob's format depends on: part of every file's associated data."""
    return f"py{sys.version_info.major}.{sys.version_info.minor}"


class SealedFiles:
    """The sealed files of one kind in one directory (local files, on PostgreSQL
    deployments too: each process's own copies)."""

    def __init__(self, directory: Path, master: MasterKey, label: bytes, suffix: str) -> None:
        self.directory = directory
        key = master.subkey(label)
        self._cipher = AESGCM(key)
        self._names = key  # the file names are keyed hashes
        self._suffix = suffix
        #: Counts `remove_all` calls (see the module docstring).
        self.epoch = 0
        self._lock = threading.Lock()

    def path(self, name: str) -> Path:
        digest = hmac.new(self._names, name.encode("utf-8"), hashlib.sha256).hexdigest()
        return self.directory / f"{digest[:32]}{self._suffix}"

    def read(self, path: Path, aad: bytes) -> Any | None:
        """The value a file holds, or None if there is none or it does not open."""
        try:
            raw = path.read_bytes()
            return marshal.loads(self._cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad))
        except (OSError, InvalidTag, ValueError, EOFError, TypeError):
            return None

    def write(self, name: str, value: Any, aad: bytes, epoch: int) -> None:
        """Write atomically (a reader sees the old file or the new one, whole), unless
        files were removed since `epoch`. A store that cannot be written (read-only,
        full) only loses the speed-up."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = nonce + self._cipher.encrypt(nonce, marshal.dumps(value), aad)
        path = self.path(name)
        temporary = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
        with self._lock:
            if epoch != self.epoch:
                return
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                temporary.write_bytes(sealed)
                os.replace(temporary, path)
            except OSError:
                temporary.unlink(missing_ok=True)

    def remove_all(self) -> int:
        """Remove every file of this kind; returns how many were removed."""
        removed = 0
        with self._lock:
            self.epoch += 1
            for path in self.files():
                try:
                    path.unlink()
                    removed += 1
                except FileNotFoundError:
                    pass
        return removed

    def files(self) -> Sequence[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.name.endswith(self._suffix))
