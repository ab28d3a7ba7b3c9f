"""A namespace's recall state, persisted sealed, so a fresh process loads it in one pass.

Reading a namespace's recall state (`usable.NamespaceState`) means one row per item of
the catalog and its kind's table, each judged by the retention policy: about 75 ms per
1,000 items, so the first recall of a process at 100,000 items spent seconds on it
(issue 37). What it builds depends only on the log position and the policy, so it is
kept on disk beside the data: one file per namespace, `recall/<keyed hash>.state`, the
entries in one `marshal` blob sealed with AES-256-GCM under a key derived from the master
key (`STATE_LABEL`). A fresh process opens it (one decryption, one `marshal.loads`) and
brings it up to date from the events after its position, as a warm process does.

What it holds is what the catalog already holds in clear (ids, kinds, subjects,
predicates, categories, times, flags; never content), sealed all the same, and it is
only ever read with the checks below, so it is never served out of date:

- the file names its log position and the event at that position (id and version of the
  aggregate): a log that is shorter, or another log (a restore), discards it;
- it names the retention policy it was judged under (a digest of its repr): another
  policy discards it;
- it names its namespace inside the seal, and the seal binds its format; a file that does
  not open (a rotated master key, a torn write, another Python's marshal) is discarded,
  never trusted.

An erasure removes every state file (`RecallStates.evict`), whatever namespace it was in:
no sealed copy of an erased item's attributes outlives the request, and the next recall
of each namespace reads it whole once and writes it again. `marshal` is safe here because
nothing unauthenticated reaches it: only a holder of the master key can write a file
that opens.
"""

from __future__ import annotations

import hashlib
import hmac
import marshal
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory_ledger.crypto import NONCE_BYTES, MasterKey

STATE_DIR = "recall"
STATE_LABEL = b"memory-ledger/recall-state/v1"
#: Bumped when the entries' fields change: a file of another format is read again whole.
FORMAT = 2  # 2: a turn's session
_SUFFIX = ".state"


@dataclass(frozen=True)
class Snapshot:
    """What a state file holds: the entries as tuples (`usable.Entry` fields, in order)."""

    position: int
    head: str  # the event at `position`: "<aggregate id>:<version>"
    policy: str  # digest of the retention policy the entries were judged under
    rows: list[tuple[Any, ...]]


class StateFiles:
    """The sealed state files of one store (local files, on PostgreSQL deployments too)."""

    def __init__(self, directory: Path, master: MasterKey) -> None:
        self.directory = directory
        key = master.subkey(STATE_LABEL)
        self._cipher = AESGCM(key)
        self._names = key  # the file names are keyed hashes: no namespace in clear

    def path(self, namespace: str) -> Path:
        digest = hmac.new(self._names, namespace.encode("utf-8"), hashlib.sha256).hexdigest()
        return self.directory / f"{digest[:32]}{_SUFFIX}"

    @staticmethod
    def _aad() -> bytes:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"  # marshal's format
        return f"recall-state/{FORMAT}/py{version}".encode()

    def _open(self, path: Path) -> tuple[str, Snapshot] | None:
        try:
            raw = path.read_bytes()
            plain = self._cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], self._aad())
            namespace, position, head, policy, rows = marshal.loads(plain)
        except (OSError, InvalidTag, ValueError, EOFError, TypeError):
            return None
        return str(namespace), Snapshot(int(position), str(head), str(policy), rows)

    def load(self, namespace: str) -> Snapshot | None:
        """The namespace's snapshot, or None if there is none or it does not open (or
        names another namespace: the file name is only a hash)."""
        found = self._open(self.path(namespace))
        if found is None or found[0] != namespace:
            return None
        return found[1]

    def holding(self, item_ids: set[str]) -> tuple[int, int]:
        """(entries of these items in any state file, files that did not open): what an
        erasure's verification reads, from the files themselves."""
        held = unreadable = 0
        for path in self.files():
            found = self._open(path)
            if found is None:
                unreadable += path.exists()
                continue
            held += sum(1 for row in found[1].rows if row[0] in item_ids)
        return held, unreadable

    def save(self, namespace: str, snapshot: Snapshot) -> None:
        """Write atomically (a reader sees the old file or the new one, whole). A store
        that cannot be written (read-only, full) only loses the speed-up."""
        plain = marshal.dumps(
            (namespace, snapshot.position, snapshot.head, snapshot.policy, snapshot.rows)
        )
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = nonce + self._cipher.encrypt(nonce, plain, self._aad())
        path = self.path(namespace)
        temporary = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(sealed)
            os.replace(temporary, path)
        except OSError:
            temporary.unlink(missing_ok=True)

    def remove_all(self) -> int:
        """Remove every state file (an erasure); returns how many were removed."""
        removed = 0
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
        return sorted(p for p in self.directory.iterdir() if p.name.endswith(_SUFFIX))


def policy_digest(policy: object) -> str:
    """A retention policy's fingerprint: its repr (frozen dataclasses of values)."""
    return hashlib.sha256(repr(policy).encode("utf-8")).hexdigest()
