"""A namespace's recall state, persisted sealed, so a fresh process loads it in one pass.

Reading a namespace's recall state (`usable.NamespaceState`) means one row per item of
the catalog and its kind's table, each judged by the retention policy: about 75 ms per
1,000 items, so the first recall of a process at 100,000 items spent seconds on it
(issue 37). What it builds depends only on the log position and the policy, so it is
kept on disk beside the data: one file per namespace, `recall/<keyed hash>.state`, the
entries in one `marshal` blob sealed with AES-256-GCM under a key derived from the master
key (`STATE_LABEL`; the mechanism is memory_ledger/sealed_files.py, shared with the vector
search codes). A fresh process opens it (one decryption, one `marshal.loads`) and
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_ledger.crypto import MasterKey
from memory_ledger.sealed_files import SealedFiles, marshal_version

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


class StateFiles(SealedFiles):
    """The sealed state files of one store (local files, on PostgreSQL deployments too)."""

    def __init__(self, directory: Path, master: MasterKey) -> None:
        super().__init__(directory, master, STATE_LABEL, _SUFFIX)

    @staticmethod
    def _aad() -> bytes:
        return f"recall-state/{FORMAT}/{marshal_version()}".encode()

    def _open(self, path: Path) -> tuple[str, Snapshot] | None:
        found = self.read(path, self._aad())
        if found is None:
            return None
        try:
            namespace, position, head, policy, rows = found
            return str(namespace), Snapshot(int(position), str(head), str(policy), rows)
        except (TypeError, ValueError):  # not this format's tuple
            return None

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
        """Written by `RecallStates` under the lock its erasures take too, so the epoch
        it sees now is the one its rows were read under."""
        value = (namespace, snapshot.position, snapshot.head, snapshot.policy, snapshot.rows)
        self.write(namespace, value, self._aad(), self.epoch)


def policy_digest(policy: object) -> str:
    """A retention policy's fingerprint: its repr (frozen dataclasses of values)."""
    return hashlib.sha256(repr(policy).encode("utf-8")).hexdigest()
