"""Memory-file paths: normalised, and confined to the namespace's `/memories` root.

A path is a key in the log, never a path on a disk: nothing here opens a file, so no
symlink can be followed and no `..` can climb out of a directory. A path is still
refused unless it is plainly inside the root, because an agent (or a page it read)
that writes `/memories/../../secrets.env` means something else than a note, and
the answer must say so rather than quietly store it under another name.
"""

from __future__ import annotations

import unicodedata

from memory_ledger.errors import InvalidWrite

ROOT = "/memories"
MAX_PATH_BYTES = 512
MAX_NAME_BYTES = 128
MAX_DEPTH = 8

#: Characters that are never part of a name: separators of other systems, and marks
#: that make a name display unlike what it is.
_FORBIDDEN = frozenset('\\\x00:*?"<>|')


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
    parts = text[len(ROOT) + 1 :].split("/")
    if directory and parts[-1] == "":
        parts = parts[:-1]
    if len(parts) > MAX_DEPTH:
        raise InvalidWrite(f"a path is at most {MAX_DEPTH} names deep", ["path: too deep"])
    for part in parts:
        _check_name(part)
    return "/".join([ROOT, *parts])


def _check_name(part: str) -> None:
    if part == "":
        raise InvalidWrite("a path has no empty names (`//` or a trailing /)", ["path: empty name"])
    folded = unicodedata.normalize("NFKC", part)  # a full-width `．．` is `..` too
    if folded in (".", "..") or part in (".", ".."):
        raise InvalidWrite(
            f"`.` and `..` are refused: paths are confined to {ROOT}", ["path: traversal"]
        )
    if "/" in folded or any(ch in _FORBIDDEN for ch in folded):
        raise InvalidWrite('a name holds no \\ / : * ? " < > | or NUL', ["path: bad character"])
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in part):
        raise InvalidWrite(
            "a name holds no control or invisible formatting characters",
            ["path: bad character"],
        )
    if part.startswith(".") or part.startswith(" ") or part.endswith(" "):
        raise InvalidWrite(
            "a name does not start with `.` (hidden) or start or end with a space",
            ["path: bad name"],
        )
    if len(part.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidWrite(f"a name is at most {MAX_NAME_BYTES} bytes", ["path: name too long"])


def inside(path: str, directory: str) -> bool:
    """Whether normalised `path` lies under normalised `directory`."""
    return directory == ROOT or path == directory or path.startswith(directory + "/")
