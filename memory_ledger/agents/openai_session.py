"""An OpenAI Agents SDK `Session` whose history is a principal's transcript in the ledger.

The SDK reads a session's items before each run (`get_items`) and appends the run's new
items after it (`add_items`); `pop_item` undoes the last one and `clear_session` drops
them all. Here each item is one transcript event (kind `turn`) of the principal's
ledger: the item sealed as the turn's content (losslessly: its text, then its JSON
structure; see "How an item is sealed"), bound to the session by provenance
(`session_id`; `turn_id` generated in order, `turn-<sequence>-<random>`; `writer` the
configured agent name). The principal's namespace is the ledger's, so a session id names
a conversation *of that principal* only: another principal's session of the same id is
another conversation, invisible from here.

**Erasure, not deletion.** `pop_item` erases the newest turn with a forget request
(kind `item`); `clear_session` files one of kind `source` for the session id, which
erases every item whose provenance names the session: its turns, its summaries, and
anything else written with that session id. Each keeps its `RequestReport` (receipts
per store, the key proof) as `last_report`. Like every forget, they also redact
word-for-word repeats of the erased text's distinctive parts (a house number with its
street) in the principal's other memories: the ledger's mention rule.

**The rolling summary (seed 002: old turns are summarised before they leave the
context).** With `max_turns=N`, once more than N items are held, the oldest are folded
so that `keep_turns` (default N // 2) remain, into a summary written through the normal
write boundary: a turn of speaker `session_summary`, whose `derived_from` cites each
turn it folded (item id and the version read) and the previous summary it extends. The
cascade of a forget is transitive, so forgetting any folded turn erases every summary
that carries its words; the turns those summaries folded are then shown again, and the
next fold summarises them anew. `get_items` returns the summary first, as one assistant
message, then the recent turns. An assistant message, not a system one: its text is
what users and tools said, untrusted, and recalled memory is never promoted to a
system instruction.

The folded turns are **kept and hidden, not erased**. Erasing them would erase the
summary too: it is derived from them, and a forget cascades to what was derived from its
targets. Kept, they stay readable by the principal (`recall`, `get`, an export) and
erasable one by one, with the summary following.

**How an item is sealed.** A turn's content is the item's text (each string of it that
is not one of the SDK's structural fields: `type`, `role`, `status`, `id`, `call_id`,
`name`), one per line, then a last line: the item's JSON *skeleton* (its structure,
those fields, and each text's place and line count), hex-encoded. It decodes to exactly
the item that was added. Why not the JSON as is: the ledger indexes, searches and
fingerprints a turn's content as text. As text, the recall and context builder find the
conversation by its words, a forget elsewhere redacts a repeated value inside it, and
the verification scan's fingerprints are the words that were said. As raw JSON, every
assistant item would carry the SDK's vocabulary (`"status": "completed"`), and the
scan, finding the word `completed` in the lifecycle ledger's file (a request's status,
in clear), would report residue for every erased turn. In hex, the skeleton is one
token that matches nothing but itself. It also names the turn, so no two contents are
equal: two turns that said the same short thing ("yes") are not word-for-word repeats
of each other's whole content, and popping one leaves the other alone.

The summary is deterministic (no model): a header, then one line per folded item (its
role or type, and its text with white space collapsed, clipped to `line_chars`), the
oldest lines dropped first to stay within `summary_bytes`. **Digits are masked** (`#`)
in it, for two reasons. Numbers are what identifies in personal data (a house, a phone,
an account), and a summary is a second copy that should not multiply them. And the
ledger's mention rule treats a part with a number as identifying: when one folded turn
is forgotten, the summary is erased with it, and any number-bearing line of the summary
would then be redacted out of the *other* turns it summarised, which are not being
forgotten. Without digits, no line of a summary is identifying on its own, so
forgetting one turn never damages another. The recent turns are returned verbatim.

Limits: an item is at most 64 KiB of UTF-8 once encoded (the ledger's turn limit; a
larger one is refused with InvalidWrite, nothing stored); reading a session's history
reads its rows from the catalog (clear columns) and opens the shown items only; folded
items are not re-read, but a summary's predecessors and folded turns stay in the ledger
until the session is cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from memory_ledger.api import MemoryLedger
from memory_ledger.errors import InvalidWrite, StaleDerivation
from memory_ledger.forgetting.requests import RequestReport
from memory_ledger.identifiers import IDENTIFIER_RULE, is_identifier
from memory_ledger.views import ItemState
from memory_ledger.write_policy import (
    MAX_DERIVED_FROM,
    MAX_TURN_BYTES,
    RetentionBasis,
    Sensitivity,
)

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

#: The speaker (subject) of a summary turn, and its category.
SUMMARY_SPEAKER = "session_summary"
SUMMARY_CATEGORY = "session_summary"
TURN_CATEGORY = "conversation"
#: The message roles kept as a turn's speaker; other items are named by their type.
ROLES = ("user", "assistant", "system", "developer")
TURN_PREFIX = "turn"
SUMMARY_PREFIX = "summary"
_TURN_ID = re.compile(rf"({TURN_PREFIX}|{SUMMARY_PREFIX})-(\d{{9}})-[0-9a-f]{{6}}")
_ITEM_TYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: No digit in either: a summary must hold no identifying part (see the module docstring).
SUMMARY_HEADER = (
    "Summary of the earlier items of this conversation, oldest first "
    "(each line clipped, digits masked as #):"
)
OMITTED = "[earlier lines omitted]"
#: Folds per call at most: each fold makes progress, this only bounds a pathological race.
MAX_FOLDS = 16


@dataclass(frozen=True)
class _Row:
    """One turn of the session, from the catalog's clear columns."""

    item_id: str
    turn_id: str
    summary: bool
    sequence: int
    recorded_at: str
    suppressed: bool
    derived_from: tuple[str, ...]

    @property
    def order(self) -> tuple[int, str, str]:
        return (self.sequence, self.recorded_at, self.item_id)


@dataclass
class _State:
    rows: list[_Row]
    summary: ItemState | None = None
    covered: set[str] = field(default_factory=set)

    @property
    def turns(self) -> list[_Row]:
        return [r for r in self.rows if not r.summary]

    @property
    def visible(self) -> list[_Row]:
        """Turns not folded into the current summary, and not suppressed."""
        return [r for r in self.turns if r.item_id not in self.covered and not r.suppressed]

    def next_sequence(self) -> int:
        return max((r.sequence for r in self.rows), default=0) + 1


@dataclass(frozen=True)
class SessionSummary:
    """The session's current summary: its text, the inputs it cites directly (item id,
    version), and every turn it covers (directly or through the summaries it extends)."""

    item_id: str
    version: int
    text: str
    cites: tuple[tuple[str, int], ...]
    covered_turns: tuple[str, ...]


class MemoryLedgerSession:
    """The OpenAI Agents SDK `Session` protocol over one principal's ledger.

    `session_id` must be an identifier (it is kept in clear, in provenance, so that a
    forget of the session can find its items without decrypting anything). `agent_name`
    is the provenance writer. `max_turns` (None: never summarise) and `keep_turns`
    (default `max_turns // 2`, at least 1) drive the rolling summary; `line_chars` and
    `summary_bytes` bound it. `retention_basis` is recorded on every turn (`session`
    makes `ledger.end_session` erase them); `sensitivity` too (default `personal`).
    `session_settings` (the SDK's `SessionSettings`, or a dict of its fields) gives
    `get_items` its default `limit`, as it does for the SDK's own sessions.
    """

    def __init__(
        self,
        session_id: str,
        ledger: MemoryLedger,
        *,
        agent_name: str = "openai-agents",
        max_turns: int | None = None,
        keep_turns: int | None = None,
        line_chars: int = 200,
        summary_bytes: int = 4096,
        sensitivity: Sensitivity = "personal",
        retention_basis: RetentionBasis = "indefinite",
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        for name, value in (("session_id", session_id), ("agent_name", agent_name)):
            if not is_identifier(value):
                raise InvalidWrite(f"invalid {name}: use {IDENTIFIER_RULE}")
        if max_turns is not None and (isinstance(max_turns, bool) or max_turns < 1):
            raise InvalidWrite("max_turns must be at least 1 (or None: no summary)")
        if max_turns is None:
            keep = None
        else:
            keep = max(1, max_turns // 2) if keep_turns is None else keep_turns
            if not 1 <= keep <= max_turns:
                raise InvalidWrite("keep_turns must be from 1 to max_turns")
        if not 16 <= line_chars <= 4096:
            raise InvalidWrite("line_chars must be from 16 to 4096")
        if not 256 <= summary_bytes <= MAX_TURN_BYTES:
            raise InvalidWrite(f"summary_bytes must be from 256 to {MAX_TURN_BYTES}")
        self.session_id = session_id
        # Normalised as the SDK's own sessions do (a dict is accepted too), so that its
        # `limit` is the default of `get_items` (the Runner reads the session with it).
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(session_settings)
        )
        self.ledger = ledger
        self.agent_name = agent_name
        self.max_turns = max_turns
        self.keep_turns = keep
        self.line_chars = line_chars
        self.summary_bytes = summary_bytes
        self.sensitivity = sensitivity
        self.retention_basis = retention_basis
        #: The report of the last pop_item or clear_session (a forget request), or None.
        self.last_report: RequestReport | None = None
        self._lock = threading.RLock()

    # -- the Session protocol (async; the ledger's work runs in a worker thread) -------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The summary (if any) as one assistant message, then the recent items, oldest
        first; with `limit`, the latest `limit` of those."""
        return await asyncio.to_thread(self.items, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Record the items as turns, in one transaction, then fold if over max_turns."""
        await asyncio.to_thread(self.add, items)

    async def pop_item(self) -> TResponseInputItem | None:
        """Erase the newest item with a forget request and return it (None if empty)."""
        return await asyncio.to_thread(self.pop)

    async def clear_session(self) -> None:
        """Erase the whole session with a forget request of source scope."""
        await asyncio.to_thread(self.clear)

    # -- the same, synchronous -----------------------------------------------------------

    def items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """`get_items`, synchronous. `limit` None takes `session_settings.limit`, as the
        SDK's sessions do; 0 returns nothing and a negative limit everything, as the
        SDK's SQLite session does (its SQL `LIMIT`)."""
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit < 0:
            limit = None
        with self._lock:
            state, shown = self._fold_if_needed()
            if limit is not None and limit == 0:
                return []
            recent = shown if limit is None else shown[-limit:]
            out: list[Any] = [item for _, item in recent]
            if state.summary is not None and (limit is None or limit > len(recent)):
                out.insert(0, {"role": "assistant", "content": state.summary.text})
            return out

    def add(self, items: Sequence[TResponseInputItem]) -> None:
        if not items:
            return
        with self._lock:
            sequence = self._state().next_sequence()
            now = self.ledger.now()
            writes = []
            for offset, raw in enumerate(items):
                item = _plain(raw)
                speaker = _speaker(item)
                turn_id = _turn_id(TURN_PREFIX, sequence + offset)
                writes.append(
                    {
                        "kind": "turn",
                        "subject": speaker,
                        "content": encode_item(item, turn_id),
                        "category": TURN_CATEGORY,
                        "origin": "explicit" if speaker == "user" else "observed",
                        "sensitivity": self.sensitivity,
                        "retention": {"basis": self.retention_basis},
                        "provenance": self._provenance(now, turn_id),
                    }
                )
            self.ledger.remember_many(writes)
            self._fold_if_needed()

    def pop(self) -> TResponseInputItem | None:
        with self._lock:
            state = self._state()
            for row in sorted(state.turns, key=lambda r: r.order, reverse=True):
                if row.suppressed:
                    continue
                read = self._read(row)
                if read is None:
                    continue
                self.last_report = self.ledger.forget(row.item_id)
                return read[1]  # type: ignore[no-any-return]
            return None

    def clear(self) -> RequestReport:
        """Erase every item whose provenance names this session; the report is also kept
        as `last_report`. A session with nothing left answers `nothing_matched`."""
        with self._lock:
            report = self.ledger.forget_scope({"kind": "source", "session_id": self.session_id})
            self.last_report = report
            return report

    def summary(self) -> SessionSummary | None:
        """The current summary, and what it covers; None before the first fold."""
        with self._lock:
            state = self._state()
            if state.summary is None:
                return None
            cites = tuple(self.ledger.derived_from(state.summary.item_id))
            covered = tuple(r.item_id for r in state.turns if r.item_id in state.covered)
            return SessionSummary(
                state.summary.item_id,
                state.summary.version,
                state.summary.text or "",
                cites,
                covered,
            )

    # -- state ---------------------------------------------------------------------------

    def _state(self) -> _State:
        """The session's turns from the catalog (clear columns: nothing is opened), the
        current summary (the newest one still readable) and the turns it covers."""
        turns = self.ledger.catalog_rows(
            ("item_id", "turn_id", "recorded_at", "suppressed", "derived_from"),
            session_id=self.session_id,
            kind="turn",
        )
        rows = []
        for item_id, turn_id, recorded_at, suppressed, derived in turns:
            match = _TURN_ID.fullmatch(turn_id or "")
            if match is None:
                continue  # a turn another writer recorded in this session: not an item
            rows.append(
                _Row(
                    item_id,
                    turn_id,
                    match.group(1) == SUMMARY_PREFIX,
                    int(match.group(2)),
                    recorded_at,
                    bool(suppressed),
                    tuple(json.loads(derived)),
                )
            )
        rows.sort(key=lambda r: r.order)
        state = _State(rows)
        inputs = {r.item_id: r.derived_from for r in rows}
        for row in reversed([r for r in rows if r.summary]):
            found = self._usable(row)
            if found is None:
                continue
            state.summary = found
            frontier = [row.item_id]
            while frontier:  # what it covers: its inputs, theirs, and so on
                current = frontier.pop()
                for source in inputs.get(current, ()):
                    if source not in state.covered:
                        state.covered.add(source)
                        frontier.append(source)
            break
        return state

    def _usable(self, row: _Row) -> ItemState | None:
        """The item, if it can be shown and cited: readable, not suppressed, not expired."""
        if row.suppressed:
            return None
        found = self.ledger.get(row.item_id)
        if found.erased or found.expired or found.suppressed or found.text is None:
            return None
        return found

    def _read(self, row: _Row) -> tuple[ItemState, Any] | None:
        found = self._usable(row)
        if found is None:
            return None
        return found, _decode(found)

    def _read_all(self, rows: Sequence[_Row]) -> list[tuple[ItemState, Any]]:
        return [read for read in map(self._read, rows) if read is not None]

    def _provenance(self, now: Any, turn_id: str) -> dict[str, Any]:
        return {
            "writer": self.agent_name,
            "written_at": now,
            "session_id": self.session_id,
            "turn_id": turn_id,
        }

    # -- the rolling summary ------------------------------------------------------------

    def _fold_if_needed(self) -> tuple[_State, list[tuple[ItemState, Any]]]:
        """While more than max_turns items are shown, fold the oldest into a summary.
        Returns the state after it, and the items it shows, read (an item that cannot
        be shown, say expired and not yet swept, is neither shown nor folded)."""
        state = self._state()
        shown = self._read_all(state.visible)
        if self.max_turns is None:
            return state, shown
        for _ in range(MAX_FOLDS):
            if len(shown) <= self.max_turns:
                break
            # StaleDerivation: an input changed or was erased since it was read. Read again.
            with contextlib.suppress(StaleDerivation):
                self._fold(state, shown)
            state = self._state()
            shown = self._read_all(state.visible)
        return state, shown

    def _fold(self, state: _State, shown: list[tuple[ItemState, Any]]) -> None:
        assert self.keep_turns is not None
        room = MAX_DERIVED_FROM - 1  # one citation is the previous summary's
        count = min(len(shown) - self.keep_turns, room)
        folded = shown[:count]
        # A tool call's output stays with its call: an output without its call (or the
        # reverse) is refused by the Responses API.
        calls = {_call_id(item) for _, item in folded} - {None}
        for read in shown[count:]:
            if len(folded) >= room or _call_id(read[1]) not in calls:
                break
            folded.append(read)
        previous = state.summary
        lines, omitted = _summary_lines(previous.text if previous else None)
        lines += [self._line(item) for _, item in folded]
        text = _compose(lines, omitted, self.summary_bytes)
        cited = [previous] if previous is not None else []
        cited += [found for found, _ in folded]
        number = max((r.sequence for r in state.rows if r.summary), default=0) + 1
        self.ledger.remember(
            {
                "kind": "turn",
                "subject": SUMMARY_SPEAKER,
                "content": text,
                "category": SUMMARY_CATEGORY,
                "origin": "observed",
                "sensitivity": self.sensitivity,
                "retention": {"basis": self.retention_basis},
                "provenance": self._provenance(self.ledger.now(), _turn_id(SUMMARY_PREFIX, number)),
                "derived_from": [{"item_id": f.item_id, "version": f.version} for f in cited],
            }
        )

    def _line(self, item: Any) -> str:
        label, text = _describe(item)
        text = " ".join(text.split())
        if len(text) > self.line_chars:
            text = text[: self.line_chars - 1].rstrip() + "…"
        return _mask_digits(f"{label}: {text}" if text else label)


def _summary_lines(text: str | None) -> tuple[list[str], bool]:
    """The lines of a previous summary (without its header), and whether it had already
    dropped some. A summary redacted since keeps its `[forgotten]` marks."""
    if not text:
        return [], False
    lines = text.split("\n")
    if lines and lines[0] == SUMMARY_HEADER:
        lines = lines[1:]
    omitted = bool(lines) and lines[0] == OMITTED
    return (lines[1:] if omitted else lines), omitted


def _compose(lines: list[str], omitted: bool, budget: int) -> str:
    """The header and the newest lines that fit in `budget` bytes of UTF-8."""
    kept = list(lines)

    def size(parts: list[str], dropped: bool) -> int:
        head = [SUMMARY_HEADER, OMITTED] if dropped else [SUMMARY_HEADER]
        return len("\n".join(head + parts).encode("utf-8"))

    while kept and size(kept, omitted or len(kept) < len(lines)) > budget:
        kept.pop(0)
    dropped = omitted or len(kept) < len(lines)
    return "\n".join(([SUMMARY_HEADER, OMITTED] if dropped else [SUMMARY_HEADER]) + kept)


def _mask_digits(text: str) -> str:
    return "".join("#" if ch.isdigit() else ch for ch in text)


def _describe(item: Any) -> tuple[str, str]:
    """A label (role or type) and the text of an SDK item, for its summary line."""
    if not isinstance(item, Mapping):
        return "item", str(item)
    kind = str(item.get("type") or "message")
    if "role" in item:
        return str(item["role"]), _content_text(item.get("content"))
    if kind == "function_call":
        return f"tool call {item.get('name', '')}".strip(), str(item.get("arguments", ""))
    if kind.endswith("_output"):
        return "tool output", _content_text(item.get("output"))
    if kind == "reasoning":
        return "reasoning", _content_text(item.get("summary"))
    return kind, _content_text(item.get("content") or item.get("text") or "")


def _content_text(content: Any) -> str:
    """Text of a message's content: a string, or the text of each part of a list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text") or part.get("refusal")
                parts.append(str(text) if text else f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return " ".join(parts)
    return str(content)


def _speaker(item: Mapping[str, Any]) -> str:
    """The turn's subject, kept in clear: a message's role, else the item's type (both
    from the SDK's fixed vocabularies), else `item`. Never a value from the content."""
    role = item.get("role")
    if isinstance(role, str) and role in ROLES:
        return role
    kind = item.get("type")
    if isinstance(kind, str) and _ITEM_TYPE.fullmatch(kind):
        return kind
    return "item"


def _call_id(item: Any) -> str | None:
    found = item.get("call_id") if isinstance(item, Mapping) else None
    return found if isinstance(found, str) else None


def _plain(item: Any) -> dict[str, Any]:
    """An SDK item as a JSON object (a TypedDict already is one; a model is dumped)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", exclude_unset=True)
        if isinstance(dumped, dict):
            return dumped
    raise InvalidWrite(f"a session item must be a JSON object, not {type(item).__name__}")


def _decode(found: ItemState) -> Any:
    """The item a turn holds; if its skeleton no longer decodes (it never should: a
    redaction rewrites text inside a line and leaves the last one alone), its text is
    returned as a message rather than dropped."""
    text = found.text or ""
    item = decode_item(text)
    if item is not None:
        return item
    role = found.subject if found.subject in ROLES else "assistant"
    return {"role": role, "content": text}


#: An item's fields that hold the SDK's own vocabulary, not what was said: they go into
#: the skeleton. Every other string is text.
STRUCTURAL = frozenset({"type", "role", "status", "id", "call_id", "name"})
_SLOT = "__memory_ledger_text__"


def encode_item(item: Mapping[str, Any], turn_id: str) -> str:
    """The turn content of an item: its texts, one per line, then its hex skeleton.

    The skeleton names the turn, so no two turns' contents are ever equal: a forget
    redacts a whole content repeated word for word elsewhere, and two turns that said
    the same short thing ("yes") are not repeats of each other's item."""
    texts: list[str] = []

    def strip(value: Any, key: str | None) -> Any:
        if isinstance(value, str) and key not in STRUCTURAL:
            texts.append(value)
            return {_SLOT: len(texts) - 1}
        if isinstance(value, Mapping):
            return {str(k): strip(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [strip(v, key) for v in value]
        return value

    skeleton = strip(dict(item), None)
    meta = {"item": skeleton, "lines": [t.count("\n") + 1 for t in texts], "turn": turn_id}
    encoded = json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8").hex()
    return "\n".join([*texts, encoded])


def decode_item(content: str) -> dict[str, Any] | None:
    """The item `encode_item` made the content of; None if it cannot be rebuilt."""
    lines = content.split("\n")
    try:
        meta = json.loads(bytes.fromhex(lines[-1]).decode("utf-8"))
        counts = [int(n) for n in meta["lines"]]
        skeleton = meta["item"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    body = lines[:-1]
    if sum(counts) != len(body):
        return None
    texts, start = [], 0
    for count in counts:
        texts.append("\n".join(body[start : start + count]))
        start += count

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {_SLOT}:
                return texts[int(value[_SLOT])]
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    try:
        item = fill(skeleton)
    except (IndexError, TypeError, ValueError):
        return None
    return item if isinstance(item, dict) else None


def _turn_id(prefix: str, sequence: int) -> str:
    """Ordered, and unique even when two writers take the same sequence number."""
    return f"{prefix}-{sequence:09d}-{secrets.token_hex(3)}"
