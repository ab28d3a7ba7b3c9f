"""Location phrases ("from the shared assistant memory", "from your notes",
"在共享记忆里") say where to forget, not what.

Read as content they widen a plan to everything stored there (every item of the
namespace, once: "the shared assistant memory" named all 154 of them). The planner
already looks everywhere the principal's memory is, so the phrase is cut from the
request before it is read; what is left names the values. The phrases are data
(`[locations]` in lexicon.toml).
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import resources

from memory_ledger.forgetting.planning.lexicon import LEXICON_FILE
from memory_ledger.phrases import Phrases


@functools.cache
def _phrases() -> Phrases:
    text = resources.files(__package__).joinpath(LEXICON_FILE).read_text(encoding="utf-8")
    return Phrases({"location": list(tomllib.loads(text)["locations"]["words"])})


def without_locations(text: str) -> str:
    """`text` with its location phrases cut out (matched as the lexicon matches: case
    and width folded), or `text` itself when nothing else would be left."""
    folded = _fold(text)
    hits = sorted(
        ((m.start(), m.end()) for ps in _phrases().entries.values() for p in ps
         for m in p.finditer(folded)),
        key=lambda s: (s[0], -s[1]),
    )  # fmt: skip
    if not hits:
        return text
    out, last = [], 0
    for start, end in hits:
        if start < last:
            continue
        out.append(text[last:start])
        last = end
    out.append(text[last:])
    cut = re.sub(r"[ \t]{2,}", " ", "".join(out))
    cut = re.sub(r"\s+([,.;:!?，。；！？])", r"\1", cut).strip()
    return cut if re.search(r"\w", cut) else text


def _fold(text: str) -> str:
    """Case folded with the same length as `text`, so offsets found in it cut `text`.
    (`phrases.normalise` also joins spaces and applies NFKC, which can move offsets.)"""
    folded = text.replace("\u2019", "'").replace("\u2018", "'")
    out = "".join(c.casefold() if len(c.casefold()) == 1 else c for c in folded)
    return out
