"""Memory-file paths: normalised, and confined to the namespace's `/memories` root.

A path is a key in the log, never a path on a disk: nothing here opens a file, so no
symlink can be followed and no `..` can climb out of a directory. A path is still
refused unless it is plainly inside the root, because an agent (or a page it read)
that writes `/memories/../../secrets.env` means something else than a note, and
the answer must say so rather than quietly store it under another name.

Every command checks its paths with `check` (the one path check): a path is kept in its
NFC form, but each name is judged by its NFKC fold too, so a full-width `．env` is hidden
like `.env` and `．．` climbs like `..`. A path a file is put at (create, rename's new
path, a revert that brings a file back) is also refused under a name that is a file
(`notes.md/child` while `notes.md` is one) or where it is a directory.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection

from memory_ledger.errors import InvalidWrite

ROOT = "/memories"
MAX_PATH_BYTES = 512
MAX_NAME_BYTES = 128
MAX_DEPTH = 8

#: Characters that are never part of a name: separators of other systems, and marks
#: that make a name display unlike what it is.
_FORBIDDEN = frozenset('\\\x00:*?"<>|')


def check(
    path: object, *, directory: bool = False, placed_among: Collection[str] | None = None
) -> str:
    """The canonical form of `path`, or InvalidWrite saying what is wrong with it: the
    one check of every command that takes a path. `directory` allows the root itself
    (for `view`, `delete`). `placed_among`, for a path a file is put at: the paths of the
    files in the directory now; the path is refused under a name that is one of them
    (a file is not a directory), and where it is a directory itself."""
    canonical = normalise(path, directory=directory)
    if placed_among is None:
        return canonical
    names = canonical.split("/")
    for depth in range(3, len(names)):  # "", "memories", then the names above the last
        above = "/".join(names[:depth])
        if above in placed_among:
            raise InvalidWrite(
                f"{above} is a file, not a directory: nothing goes under it; nothing changed",
                ["path: parent is a file"],
            )
    if any(inside(other, canonical) and other != canonical for other in placed_among):
        raise InvalidWrite(f"{canonical} is a directory", ["path: a directory"])
    return canonical


def normalise(path: object, *, directory: bool = False) -> str:
    """The canonical form of `path`, or InvalidWrite saying what is wrong with it.
    `directory` allows the root itself (for `view`)."""
    if not isinstance(path, str):
        raise InvalidWrite("a path is a string under /memories", ["path: invalid"])
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidWrite(f"a path is at most {MAX_PATH_BYTES} bytes", ["path: too long"])
    text = unicodedata.normalize("NFC", path)
    if text.rstrip("/") == ROOT:
        if directory:
            return ROOT
        raise InvalidWrite(f"{ROOT} is the root directory, not a file", ["path: a directory"])
    if not text.startswith(ROOT + "/"):
        raise InvalidWrite(
            f"paths are confined to {ROOT}: give one that starts with {ROOT}/",
            ["path: outside the root"],
        )
    # The root is ASCII, which no fold changes, and no name folds to one holding a `/`
    # (_check_name): so the folded path is confined, name for name, as this one is.
    parts = text[len(ROOT) + 1 :].split("/")
    if directory and parts[-1] == "":
        parts = parts[:-1]
    if len(parts) > MAX_DEPTH:
        raise InvalidWrite(f"a path is at most {MAX_DEPTH} names deep", ["path: too deep"])
    for part in parts:
        _check_name(part)
    return "/".join([ROOT, *parts])


def _check_name(part: str) -> None:
    """Refuse a name that is, or folds to, one that means something else: judged by its
    NFKC fold as well as by itself (a full-width `．．` is `..`, `．env` is hidden)."""
    if part == "":
        raise InvalidWrite("a path has no empty names (`//` or a trailing /)", ["path: empty name"])
    folded = unicodedata.normalize("NFKC", part)
    if folded in (".", "..") or part in (".", ".."):
        raise InvalidWrite(
            f"`.` and `..` are refused: paths are confined to {ROOT}", ["path: traversal"]
        )
    if "/" in folded or any(ch in _FORBIDDEN for ch in folded):
        raise InvalidWrite('a name holds no \\ / : * ? " < > | or NUL', ["path: bad character"])
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in part + folded):
        raise InvalidWrite(
            "a name holds no control or invisible formatting characters",
            ["path: bad character"],
        )
    if any(name.startswith((".", " ")) or name.endswith(" ") for name in (part, folded)):
        raise InvalidWrite(
            "a name does not start with `.` (hidden) or start or end with a space",
            ["path: bad name"],
        )
    if len(part.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidWrite(f"a name is at most {MAX_NAME_BYTES} bytes", ["path: name too long"])


def inside(path: str, directory: str) -> bool:
    """Whether normalised `path` lies under normalised `directory`."""
    return directory == ROOT or path == directory or path.startswith(directory + "/")
