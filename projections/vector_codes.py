"""A large namespace's search codes, persisted sealed, so a fresh process opens only the
rows a search scores (issue 37).

The first search of a namespace used to open every row (one AES-GCM open under each
item's key, one key unwrap each) and compute every row's SimHash code: about 5 s at
100,000 rows, before the first recall of a process could answer. A search of a large
namespace scores exactly only the ~1,000 rows whose codes are nearest the query's
(`vector_search`), so with the codes at hand only those rows need opening. The codes
are kept here: one file per namespace, `vector-codes/<keyed hash>.codes`, holding each
row's identity (item, key generation, version) and its 64-byte code, in one `marshal`
blob sealed with AES-256-GCM under a key derived from the master key (`CODES_LABEL`;
memory_ledger/sealed_files.py, shared with the recall states).

A code is a 512-bit sketch of a vector (the signs of random projections), so it is
treated as the vector is: sealed, and gone with the item. Every erasure of the vector
index removes every codes file (`VectorIndex.erase`), as does a rebuild and a master-key
rotation; the next first search of a namespace opens it whole once and writes its file
again. A code is used only for a row whose identity it names: a row written since (a new
version, a new key generation) is opened and coded afresh. A row whose key is destroyed
is never served whatever its code: its vector does not open (`NamespaceView`), and
`VectorIndex.search` checks the keys of what it returns. `marshal` is safe here because
nothing unauthenticated reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memory_ledger.crypto import MasterKey
from memory_ledger.sealed_files import SealedFiles, marshal_version

CODES_DIR = "vector-codes"
CODES_LABEL = b"memory-ledger/vector-codes/v1"
FORMAT = 1
_SUFFIX = ".codes"

RowKey = tuple[str, int, int]  # item id, key generation, version


@dataclass(frozen=True)
class NamespaceCodes:
    """Rows' identities and their codes (rows x code bytes, uint8), in the same order."""

    keys: list[RowKey]
    codes: np.ndarray


class CodeFiles(SealedFiles):
    """The sealed codes files of one vector index (local files, like the index)."""

    def __init__(self, directory: Path, master: MasterKey, embedder: str, bits: int) -> None:
        super().__init__(directory, master, CODES_LABEL, _SUFFIX)
        self._kind = f"{embedder}/{bits}"  # codes of another embedder never match

    def _aad(self, namespace: str) -> bytes:
        return f"vector-codes/{FORMAT}/{marshal_version()}/{self._kind}/{namespace}".encode()

    def load(self, namespace: str, width: int) -> NamespaceCodes | None:
        found = self.read(self.path(namespace), self._aad(namespace))
        if found is None:
            return None
        try:
            ids, generations, versions, packed = found
            codes = np.frombuffer(packed, dtype=np.uint8).reshape(-1, width)
        except (TypeError, ValueError):  # not this format's tuple
            return None
        if not len(ids) == len(generations) == len(versions) == len(codes):
            return None
        return NamespaceCodes(list(zip(ids, generations, versions, strict=True)), codes)

    def save(self, namespace: str, found: NamespaceCodes, epoch: int) -> None:
        """Not written if files were removed since `epoch` (read before the rows were):
        the rows may hold an item erased meanwhile. (Another process's erasure is not
        seen here: a file written from its older rows keeps an erased row's sealed code,
        never used as no row names it, until this namespace's next erasure or rebuild.)"""
        ids = [k[0] for k in found.keys]
        generations = [k[1] for k in found.keys]
        versions = [k[2] for k in found.keys]
        packed = np.ascontiguousarray(found.codes, dtype=np.uint8).tobytes()
        self.write(namespace, (ids, generations, versions, packed), self._aad(namespace), epoch)
