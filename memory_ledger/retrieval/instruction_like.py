"""Does a memory's text read like an instruction to the model?

Memories are data. A turn or a fact that says "ignore all previous instructions" is
still stored (it is what the user or a document said), but it must never reach a model
as an instruction: it is flagged when it is written, and the context builder returns it
quoted and marked untrusted. The check is a short list of patterns in English and
Chinese, deliberately broad: a false positive only adds a label, a false negative lets
injected text through unlabelled. The flag is a clear attribute of the event (one bit,
no content), so it survives erasure like the other clear attributes.

The patterns are matched against the text as a reader sees it, not as it is spelled
(`normalise`): compatibility forms folded (NFKD: full-width, mathematical and circled
letters), combining marks and invisible format characters removed (a zero-width space
inside a word, a soft hyphen), letters of other scripts that look Latin read as Latin
(confusables.toml: Cyrillic `о` is `o`), case folded, and every run of whitespace,
line breaks too, one space (a phrase broken over two lines, or written by two edits,
is one phrase). A word hyphenated across a line break ("instruc-\\ntions", with a
hyphen, U+2010/U+2011 or a soft hyphen before the break) is read once joined and once as
written (joining always could hide a role marker that starts the next line). A role
marker (`system:`) counts only at the start of a line, so that pattern is matched line
by line.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from functools import cache
from importlib import resources

CONFUSABLES = "confusables.toml"
#: Removed before matching: combining and enclosing marks (an accent on a letter is the
#: letter). Format characters (zero-width spaces and joiners, U+2060, U+FEFF, the soft
#: hyphen, bidirectional controls) are read once as nothing and once as a space.
_MARKS = frozenset({"Mn", "Me"})
_WHITESPACE = re.compile(r"\s+")
#: A hyphen (ASCII, U+2010, U+2011, the soft hyphen) ending a word, then whitespace and
#: invisible characters that hold a line break, then the word's rest: hyphenation.
_GAP = r"[\s\u00ad\u200b-\u200f\u2060\ufeff]"
_HYPHEN_BREAK = re.compile(rf"(?<=\w)[-\u2010\u2011\u00ad]{_GAP}*(?=\w)")
_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")

_PATTERNS = [
    # English
    r"\b(ignore|disregard|forget|override)\b.{0,40}\b(instructions?|prompts?|rules|guidelines|"
    r"directions|context)\b",
    r"\b(you are|you're) (now|no longer)\b",
    r"\bfrom now on\b",
    r"\b(system|developer) (prompt|message|instructions?)\b",
    r"\bact as\b|\bpretend (to be|you are)\b",
    r"\bdo not (tell|inform|warn) the user\b",
    r"\b(reveal|print|repeat|leak)\b.{0,30}\b(prompt|instructions|secrets?|api keys?|passwords?)\b",
    r"\b(send|email|forward|upload|post)\b.{0,60}\b(to|at)\b.{0,40}(@|https?://)",
    r"<\|?(im_start|im_end|system|endoftext)\|?>|\[/?(inst|sys)\]|###\s*instruction",
    # Chinese
    r"(忽略|无视|忘记|忘掉|不要理会).{0,12}(指令|指示|提示|要求|规则|设定)",
    r"(系统|开发者)(提示|指令|消息)",
    r"从现在(起|开始)",
    r"你(现在)?是一个?.{0,12}(助手|机器人|模型|AI)",
    r"(扮演|假装)(一个|一名|成|你是)",
    r"不要告诉用户",
    r"(泄露|输出|打印|告诉我).{0,12}(提示词|指令|密码|密钥)",
]
_COMPILED = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)
#: Matched at the start of a line, in the text folded but for its line breaks.
_LINE_PATTERNS = [
    r"^\s*(system|assistant)\s*:",
]
_LINE_COMPILED = re.compile(
    "|".join(f"(?:{p})" for p in _LINE_PATTERNS), re.IGNORECASE | re.MULTILINE
)

FLAG = "instruction_like"


def looks_like_instruction(text: str | None) -> bool:
    if not text:
        return False
    # An invisible character inside a word ("Ig\u200bnore") hides it, and so does one
    # in place of a space ("Ignore\u200bprevious"): read it as nothing, then as a space.
    # A word hyphenated over a line break is read as written, then joined.
    joined = _join_hyphenated(text)
    for written in (text, joined) if joined != text else (text,):
        for gap in ("", " "):
            folded = _fold(written, gap)
            if (
                _COMPILED.search(_WHITESPACE.sub(" ", folded)) is not None
                or _LINE_COMPILED.search(folded) is not None
            ):
                return True
    return False


def content_flags(text: str | None) -> list[str]:
    """The codes recorded with a write's content (its event's clear `flags`)."""
    return [FLAG] if looks_like_instruction(text) else []


def normalise(text: str) -> str:
    """`text` as the matcher reads it: folded (see the module's doc) and each run of
    whitespace, line breaks included, one space."""
    return _WHITESPACE.sub(" ", _fold(text)).strip()


def _join_hyphenated(text: str) -> str:
    """`text` with each word hyphenated across a line break joined ("instruc-\\ntions"
    is "instructions"); a hyphen with no line break after it ("well- and ill-kept")
    stays. Full-width and other compatibility hyphens are folded (NFKC) first."""
    text = unicodedata.normalize("NFKC", text)
    return _HYPHEN_BREAK.sub(lambda m: "" if _LINE_BREAK.search(m.group()) else m.group(), text)


def _fold(text: str, gap: str = "") -> str:
    """`text` folded, its line breaks kept (each as `\\n`) for the line patterns; each
    format character (zero-width space, joiner...) becomes `gap`."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(
        gap if category == "Cf" else ch
        for ch in text
        if (category := unicodedata.category(ch)) not in _MARKS
    )
    table = _confusables()  # before case folding (Greek Η is H, η is n), and after it
    text = text.translate(table).casefold().translate(table)  # (Armenian Օ folds to օ)
    return "\n".join(unicodedata.normalize("NFKC", text).splitlines())


@cache
def _confusables() -> dict[int, str]:
    """The lookalike table (confusables.toml), as `str.translate` takes it."""
    data = resources.files(__package__).joinpath(CONFUSABLES).read_text(encoding="utf-8")
    table = tomllib.loads(data)["confusables"]
    for key, value in table.items():
        if len(key) != 1 or not (value.isascii() and len(value) <= 1):
            raise ValueError(f"{CONFUSABLES}: {key!r} = {value!r} is not one character to one")
    return {ord(key): value for key, value in table.items()}
