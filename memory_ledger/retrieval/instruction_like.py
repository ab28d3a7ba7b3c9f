"""Does a memory's text read like an instruction to the model?

Memories are data. A turn or a fact that says "ignore all previous instructions" is
still stored (it is what the user or a document said), but it must never reach a model
as an instruction: it is flagged when it is written, and the context builder returns it
quoted and marked untrusted. The check is a short list of patterns in English and
Chinese, deliberately broad: a false positive only adds a label, a false negative lets
injected text through unlabelled. The flag is a clear attribute of the event (one bit,
no content), so it survives erasure like the other clear attributes.
"""

from __future__ import annotations

import re
import unicodedata

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
    r"^\s*(system|assistant)\s*:",
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
_COMPILED = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE | re.MULTILINE)

FLAG = "instruction_like"


def looks_like_instruction(text: str | None) -> bool:
    if not text:
        return False
    return _COMPILED.search(unicodedata.normalize("NFKC", text)) is not None


def content_flags(text: str | None) -> list[str]:
    """The codes recorded with a write's content (its event's clear `flags`)."""
    return [FLAG] if looks_like_instruction(text) else []
