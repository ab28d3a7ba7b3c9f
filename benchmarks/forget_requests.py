"""A bilingual (English/Chinese) set of forget requests in users' own words, each with
the one plan a careful person would make from it.

`benchmarks/data/forget_requests/histories.json` holds fictional users' memories (facts,
preferences and transcript turns, in the order they were written), and `cases.json` what
those users then say: "forget my old address", "把昨天聊的内容都删了", "where do I live?".
Each case names one history and the expected plan: the intent (`delete`, `stop_using`,
`update`, `redact`, never conflated), the items the request names (`targets`, by key),
the related items that must stay (`keeps`), or that the request is ambiguous
(`needs_clarification`, with the `candidates` to choose between), names nothing stored
(`nothing_matched`), or is not a forget request at all (`not_a_request`). Every person,
address and number in it is invented. It is written independently of any planner: this
module only loads the data, writes a history into a ledger and scores a plan.

How the expectations read the requests (the product's model, docs/user-guide.md):

- `targets` are what the request itself names. The product adds, on its own, the turns a
  target was taken from and what was derived from a target (the cascade); those are not
  listed. A scope-shaped request ("what we talked about yesterday", "everything I told
  you in March", "my health information", "everything about me") names every item the
  scope holds, turns and inferences included, because the scope itself selects them.
- A predicate with no qualifier means every version ("forget my address": `which`
  `all`); "old", "previous", "以前" mean the superseded versions, and when there are two
  or more, a singular request ("my old address", "以前那个号码") is ambiguous while a plural
  one ("all my old addresses", "都删了") names them all; "current", "现在" mean the live one.
  Chinese marks number with 那个/那份/那只 (one) or 都/所有 (all); without either, a
  request is read as the whole predicate, as in English ("删除我的电话号码": every
  version). A singular request that fits two different things (a personal and a work
  email, two hospitals' numbers, two pets, "that thing I said yesterday") is ambiguous;
  the scope is never widened to cover both. "My old address" when only one address was
  ever stored is `nothing_matched` (the product's `which=previous`), not the current one.
- A request about someone else ("my friend Bob's address") is an ordinary request about
  that subject in the user's own memory; "everything about my ex" names the facts whose
  subject is the ex and the fact that names him as a partner.
- "Yesterday" is the calendar day before `now` in the history's time zone; "last time"
  is the most recent session before `now`; "in March" is March of the year of `now`.
- "What I told you about X" names the facts and preferences about X; a turn is named
  only when no stored fact carries what it said (the turns of the facts are cascaded).
- "What you concluded / guessed / inferred / 推断的" is `stop_using` with
  `conclusion: true` on the inferred item (DESIGN.md, deletion step 3: the inference is
  suppressed so it is not re-derived; its sources stay).
- "Don't use X for suggestions" and "别再提" are `stop_using`, not erasure. A new value
  for something stored is `update` (`new_value` as the user gave it).
- A redaction names the item holding the words and the exact `spans` as stored; the
  product rewrites the carrier turn of a redacted fact itself. A fact that is a
  redaction target here came from a form (a tool call) or has its carrier rewritten by
  the product, so the spans are in exactly the named items.
- Questions about stored data, "remember ...", "don't forget ...", deleting something
  elsewhere ("I deleted the app"), negations ("不要删除") and figures of speech ("forget
  it, never mind") are `not_a_request`.

The optional scope fields of an expectation (`kind`, `which`, `subject`, `predicate`,
`value`, `session`, `since`, `until`, `category`) describe the scope the targets come
from; tests/test_forget_request_set.py resolves each one with the product's own forget
scope (a dry run) and checks it gives exactly the expected targets or status.

Composition (the test fails when this drifts from the data; after an edit, paste the
output of `python -m benchmarks.forget_requests` here):

    267 cases against 10 histories of 261 items (fact 134, preference 5, turn 122).

    cases by language:  en 135, zh 132

    expected answer              en   zh   all
    delete                       66   63   129
    stop_using                    7    6    13
    stop_using (conclusion)       9   11    20
    redact                        9   11    20
    update                        6    4    10
    needs_clarification          12   16    28
    nothing_matched               5    4     9
    not_a_request                21   17    38

    history   timezone             items cases   en   zh
    mei       Asia/Shanghai           28    31    6   25
    tom       Europe/London           34    33   26    7
    priya     Asia/Kolkata            28    28   23    5
    wei       Asia/Singapore          26    27   13   14
    lucas     America/Sao_Paulo       22    25   20    5
    jianguo   Asia/Shanghai           28    27    0   27
    sofia     Europe/Madrid           33    26   19    7
    xiaoyu    Asia/Shanghai           24    25    3   22
    amara     Africa/Lagos            19    22   16    6
    chenrui   America/Vancouver       19    23    9   14
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory_ledger.errors import InvalidWrite
from memory_ledger.identifiers import is_identifier
from memory_ledger.write_policy import parse_write

DATA_DIR = Path(__file__).resolve().parent / "data" / "forget_requests"
HISTORIES_PATH = DATA_DIR / "histories.json"
CASES_PATH = DATA_DIR / "cases.json"
HISTORIES_FORMAT = "forget-requests-histories/1"
CASES_FORMAT = "forget-requests-cases/1"

#: Provenance writers: the chat agent records turns, an extractor the facts and
#: preferences it took from them (or from a form), a nightly job its inferences.
WRITERS = {"turn": "chat-agent", "explicit": "extractor", "inferred": "inference-job"}

KINDS = ("fact", "preference", "turn")
SPEAKERS = ("user", "assistant")
ORIGINS = ("explicit", "observed", "inferred")
SENSITIVITIES = ("public", "internal", "personal", "restricted")
LANGS = ("en", "zh")
STATUSES = ("planned", "needs_clarification", "not_a_request", "nothing_matched")
INTENTS = ("delete", "stop_using", "update", "redact")
SCOPE_KINDS = ("item", "predicate", "source", "category", "sensitivity", "time_range", "namespace")
WHICH = ("current", "previous", "all")

_COMMON_ITEM_FIELDS = {
    "key",
    "kind",
    "category",
    "sensitivity",
    "origin",
    "written_at",
    "session",
    "turn",
    "tool_call",
    "derived_from",
    "confidence",
}
_ITEM_FIELDS = {
    "fact": _COMMON_ITEM_FIELDS | {"subject", "predicate", "value"},
    "preference": _COMMON_ITEM_FIELDS | {"subject", "predicate", "value", "scope", "strength"},
    "turn": _COMMON_ITEM_FIELDS | {"speaker", "content"},
}
_SCOPE_FIELDS = ("kind", "which", "subject", "predicate", "value", "session", "since", "until")
_SCOPE_FIELDS += ("category",)
_EXPECT_FIELDS = {
    "planned": {"status", "intent", "targets", "keeps", "spans", "new_value", "conclusion"},
    "needs_clarification": {"status", "candidates"},
    "not_a_request": {"status"},
    "nothing_matched": {"status"},
}
_CASE_ID = re.compile(r"(en|zh)-\d{3}")


class FormatError(ValueError):
    """The data does not follow its format; the message names every problem found."""

    def __init__(self, what: str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = "; ".join(self.problems[:20])
        more = f" (and {len(self.problems) - 20} more)" if len(self.problems) > 20 else ""
        super().__init__(f"{what}: {shown}{more}")


# -- loading and validating -------------------------------------------------------------


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(str(path), [f"not readable as JSON: {exc}"]) from None


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time with a zone, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None and at.utcoffset() is not None else None


def load_histories(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The histories by name: `{"now", "timezone", "items"}` each, validated strictly."""
    path = Path(path) if path is not None else HISTORIES_PATH
    raw = _read_json(path)
    problems: list[str] = []
    if not isinstance(raw, dict) or set(raw) != {"format", "histories"}:
        raise FormatError(str(path), ['the top level is {"format", "histories"} and nothing else'])
    if raw["format"] != HISTORIES_FORMAT:
        problems.append(f"format is {raw['format']!r}, expected {HISTORIES_FORMAT!r}")
    histories = raw["histories"]
    if not isinstance(histories, dict) or not histories:
        raise FormatError(str(path), ["histories must be a non-empty object"])
    for name, history in histories.items():
        problems += [f"history {name}: {p}" for p in _history_problems(name, history)]
    if problems:
        raise FormatError(str(path), problems)
    return histories


def _history_problems(name: str, history: Any) -> list[str]:
    if not is_identifier(name):
        return ["the name is not an identifier"]
    if not isinstance(history, dict) or set(history) != {"now", "timezone", "items"}:
        return ['a history is {"now", "timezone", "items"} and nothing else']
    problems: list[str] = []
    try:
        zone = ZoneInfo(history["timezone"])
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        return [f"unknown timezone {history['timezone']!r}"]
    now = parse_time(history["now"])
    if now is None:
        return ["now is not a time with a zone"]
    if now.utcoffset() != now.astimezone(zone).utcoffset():
        problems.append(f"now's offset is not {history['timezone']}'s offset at that time")
    items = history["items"]
    if not isinstance(items, list) or not items:
        return [*problems, "items must be a non-empty list"]
    seen: dict[str, dict[str, Any]] = {}
    turns: dict[str, dict[str, Any]] = {}
    previous: datetime | None = None
    for n, item in enumerate(items):
        where = f"item {n}"
        if not isinstance(item, dict):
            problems.append(f"{where}: not an object")
            continue
        key = item.get("key")
        if not is_identifier(key):
            problems.append(f"{where}: key missing or not an identifier")
            continue
        where = f"item {key}"
        if key in seen:
            problems.append(f"{where}: key used twice")
        own = _item_problems(item, zone, now, seen, turns)
        problems += [f"{where}: {p}" for p in own]
        at = parse_time(item.get("written_at"))
        if at is not None:
            if previous is not None and at < previous:
                problems.append(f"{where}: written before the item above it (list order)")
            previous = at
        seen[key] = item
        if item.get("kind") == "turn" and isinstance(item.get("turn"), str):
            if item["turn"] in turns:
                problems.append(f"{where}: turn id {item['turn']!r} used by two turns")
            turns[item["turn"]] = item
        if not own:
            try:
                parse_write(
                    to_write(item, {k: (str(UUID(int=i + 1)), 1) for i, k in enumerate(seen)})
                )
            except InvalidWrite as exc:
                problems.append(f"{where}: the write is refused: {exc}")
    return problems


def _item_problems(
    item: dict[str, Any],
    zone: ZoneInfo,
    now: datetime,
    seen: Mapping[str, dict[str, Any]],
    turns: Mapping[str, dict[str, Any]],
) -> list[str]:
    kind = item.get("kind")
    if kind not in KINDS:
        return [f"kind must be one of {', '.join(KINDS)}"]
    problems = [f"unknown field {f!r}" for f in sorted(set(item) - _ITEM_FIELDS[kind])]
    for name in ("sensitivity", "origin", "written_at"):
        if name not in item:
            problems.append(f"{name} is required")
    if item.get("sensitivity", "personal") not in SENSITIVITIES:
        problems.append(f"sensitivity must be one of {', '.join(SENSITIVITIES)}")
    if item.get("origin", "explicit") not in ORIGINS:
        problems.append(f"origin must be one of {', '.join(ORIGINS)}")
    for name in ("category", "session", "turn", "tool_call", "subject", "predicate"):
        if name in item and not is_identifier(item[name]):
            problems.append(f"{name} is not an identifier")
    at = parse_time(item.get("written_at"))
    if "written_at" in item and at is None:
        problems.append("written_at is not a time with a zone")
    elif at is not None:
        if at.utcoffset() != at.astimezone(zone).utcoffset():
            problems.append("written_at's offset is not the history's time zone's at that time")
        if at > now:
            problems.append("written_at is after the history's now")
    if kind == "turn":
        if item.get("speaker") not in SPEAKERS:
            problems.append(f"a turn's speaker is one of {', '.join(SPEAKERS)}")
        if not (isinstance(item.get("content"), str) and item["content"].strip()):
            problems.append("a turn needs content")
        if "session" not in item or "turn" not in item:
            problems.append("a turn needs session and turn")
        if item.get("origin", "explicit") != "explicit":
            problems.append("a turn's origin is explicit")
    else:
        for name in ("subject", "predicate"):
            if name not in item:
                problems.append(f"a {kind} needs {name}")
        if not (isinstance(item.get("value"), str) and item["value"].strip()):
            problems.append(f"a {kind} needs a value")
        if not any(name in item for name in ("session", "turn", "tool_call")):
            problems.append("a fact or preference needs a session, a turn or a tool_call")
        carrier = turns.get(item.get("turn", ""))
        if "turn" in item and carrier is None:
            problems.append(f"turn {item['turn']!r} names no earlier turn of this history")
        elif carrier is not None and carrier.get("session") != item.get("session"):
            problems.append(f"turn {item['turn']!r} is in another session")
    derived = item.get("derived_from", [])
    if not isinstance(derived, list) or ("derived_from" in item and not derived):
        problems.append("derived_from is a non-empty list of earlier keys")
    else:
        if len(set(map(str, derived))) != len(derived):
            problems.append("derived_from names an item twice")
        problems += [f"derived_from {k!r} is not an earlier item" for k in derived if k not in seen]
    if (item.get("origin") == "inferred") != bool(derived):
        problems.append("an inferred item, and only an inferred one, has derived_from")
    return problems


def load_cases(
    path: str | Path | None = None, histories: Mapping[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The cases, validated strictly; with `histories`, every key is checked against
    the case's history too (the history exists, every named key is an item of it, every
    span is in the text of a target, a conclusion is an inferred item, ...)."""
    path = Path(path) if path is not None else CASES_PATH
    raw = _read_json(path)
    if not isinstance(raw, dict) or set(raw) != {"format", "cases"}:
        raise FormatError(str(path), ['the top level is {"format", "cases"} and nothing else'])
    problems: list[str] = []
    if raw["format"] != CASES_FORMAT:
        problems.append(f"format is {raw['format']!r}, expected {CASES_FORMAT!r}")
    cases = raw["cases"]
    if not isinstance(cases, list) or not cases:
        raise FormatError(str(path), ["cases must be a non-empty list"])
    ids: Counter[str] = Counter()
    for n, case in enumerate(cases):
        if not isinstance(case, dict):
            problems.append(f"case {n}: not an object")
            continue
        case_id = case.get("id")
        name = f"case {case_id}" if isinstance(case_id, str) else f"case {n}"
        ids[str(case_id)] += 1
        own = _case_problems(case)
        if not own and histories is not None:
            own = _case_history_problems(case, histories)
        problems += [f"{name}: {p}" for p in own]
    problems += [f"case {i}: id used {k} times" for i, k in ids.items() if k > 1]
    if problems:
        raise FormatError(str(path), problems)
    return cases


def _case_problems(case: dict[str, Any]) -> list[str]:
    problems = [
        f"unknown field {f!r}"
        for f in sorted(set(case) - {"id", "history", "lang", "request", "expect", "note"})
    ]
    for name in ("id", "history", "lang", "request", "expect"):
        if name not in case:
            problems.append(f"{name} is required")
    if problems:
        return problems
    match = _CASE_ID.fullmatch(case["id"]) if isinstance(case["id"], str) else None
    if match is None:
        problems.append("id is en-NNN or zh-NNN")
    if case["lang"] not in LANGS:
        problems.append(f"lang must be one of {', '.join(LANGS)}")
    elif match is not None and match.group(1) != case["lang"]:
        problems.append("the id's prefix is not the case's lang")
    if not (isinstance(case["request"], str) and case["request"].strip()):
        problems.append("request must be non-empty text")
    if "note" in case and not (isinstance(case["note"], str) and case["note"].strip()):
        problems.append("note must be non-empty text")
    return problems + _expect_problems(case["expect"])


def _keys(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(k, str) for k in value)
        and len(set(value)) == len(value)
    )


def _expect_problems(expect: Any) -> list[str]:
    if not isinstance(expect, dict) or expect.get("status") not in STATUSES:
        return [f"expect.status must be one of {', '.join(STATUSES)}"]
    status = expect["status"]
    allowed = _EXPECT_FIELDS[status] | (set(_SCOPE_FIELDS) if status != "not_a_request" else set())
    problems = [f"expect.{f} is not allowed when status is {status}" for f in set(expect) - allowed]
    if status == "planned":
        intent = expect.get("intent")
        if intent not in INTENTS:
            problems.append(f"expect.intent must be one of {', '.join(INTENTS)}")
        if not _keys(expect.get("targets")):
            problems.append("expect.targets must be a non-empty list of distinct keys")
        if "keeps" in expect and not _keys(expect["keeps"]):
            problems.append("expect.keeps must be a non-empty list of distinct keys")
        spans = expect.get("spans")
        if (intent == "redact") != (spans is not None):
            problems.append("expect.spans is required for redact, and only for redact")
        elif spans is not None and not (_keys(spans) and all(s.strip() == s and s for s in spans)):
            problems.append("expect.spans must be distinct non-blank texts")
        new_value = expect.get("new_value")
        if (intent == "update") != (new_value is not None):
            problems.append("expect.new_value is required for update, and only for update")
        elif new_value is not None and not (isinstance(new_value, str) and new_value.strip()):
            problems.append("expect.new_value must be non-empty text")
        if "conclusion" in expect and (expect["conclusion"] is not True or intent != "stop_using"):
            problems.append("expect.conclusion is true, on a stop_using plan, or absent")
    elif status == "needs_clarification":
        candidates = expect.get("candidates")
        if not (_keys(candidates) and len(candidates) >= 2):
            problems.append("expect.candidates must be two or more distinct keys")
    return problems + _scope_problems(expect)


def _scope_problems(expect: dict[str, Any]) -> list[str]:
    given = [f for f in _SCOPE_FIELDS if f in expect]
    if not given:
        return []
    kind = expect.get("kind")
    if kind not in SCOPE_KINDS:
        return [f"expect.kind must be one of {', '.join(SCOPE_KINDS)} when a scope is described"]
    fields_of = {
        "predicate": {"subject", "predicate", "which", "value"},
        "source": {"session"},
        "time_range": {"since", "until"},
        "category": {"category"},
    }
    problems = [
        f"expect.{f} does not go with kind {kind}"
        for f in given
        if f != "kind" and f not in fields_of.get(kind, set())
    ]
    if kind == "predicate":
        for name in ("subject", "predicate"):
            if not is_identifier(expect.get(name)):
                problems.append(f"expect.{name} must be an identifier for a predicate scope")
        if "value" in expect and "which" in expect:
            problems.append("expect.value and expect.which cannot be combined")
        if "which" in expect and expect["which"] not in WHICH:
            problems.append(f"expect.which must be one of {', '.join(WHICH)}")
        if "value" in expect and not (isinstance(expect["value"], str) and expect["value"]):
            problems.append("expect.value must be non-empty text")
    elif kind == "source" and not is_identifier(expect.get("session")):
        problems.append("expect.session must be an identifier")
    elif kind == "category" and not is_identifier(expect.get("category")):
        problems.append("expect.category must be an identifier")
    elif kind == "time_range":
        since, until = parse_time(expect.get("since")), parse_time(expect.get("until"))
        if since is None or until is None or since >= until:
            problems.append("expect.since and expect.until are zoned times, since before until")
    return problems


def _case_history_problems(
    case: dict[str, Any], histories: Mapping[str, dict[str, Any]]
) -> list[str]:
    history = histories.get(case["history"])
    if history is None:
        return [f"history {case['history']!r} does not exist"]
    items = {item["key"]: item for item in history["items"]}
    expect = case["expect"]
    problems: list[str] = []
    for field in ("targets", "keeps", "candidates"):
        problems += [
            f"expect.{field}: {k!r} is not an item of history {case['history']}"
            for k in expect.get(field, [])
            if k not in items
        ]
    if problems:
        return problems
    targets = expect.get("targets", [])
    problems += [
        f"expect.keeps: {k!r} is also a target" for k in expect.get("keeps", []) if k in targets
    ]
    texts = [item_text(items[k]).casefold() for k in targets]
    problems += [
        f"expect.spans: {s!r} is in no target's text"
        for s in expect.get("spans", [])
        if not any(s.casefold() in t for t in texts)
    ]
    if expect.get("conclusion"):
        problems += [
            f"expect.targets: {k!r} is not an inferred item"
            for k in targets
            if items[k].get("origin") != "inferred"
        ]
    if expect.get("intent") == "update":
        problems += [
            f"expect.targets: {k!r} is a turn; an update changes a fact or a preference"
            for k in targets
            if items[k]["kind"] == "turn"
        ]
    return problems


# -- writing a history ------------------------------------------------------------------


def item_text(item: Mapping[str, Any]) -> str:
    """The item's text: a turn's content, a fact's or preference's value."""
    return str(item["content"] if item["kind"] == "turn" else item["value"])


def to_write(item: Mapping[str, Any], refs: Mapping[str, tuple[str, int]]) -> dict[str, Any]:
    """The memory-ledger write for one item. `refs` maps the keys already written to
    `(item_id, version)`, for `derived_from`."""
    origin = item["origin"]
    provenance: dict[str, Any] = {
        "writer": WRITERS["turn" if item["kind"] == "turn" else origin],
        "written_at": item["written_at"],
    }
    for field, name in (
        ("session", "session_id"),
        ("turn", "turn_id"),
        ("tool_call", "tool_call_id"),
    ):
        if field in item:
            provenance[name] = item[field]
    write: dict[str, Any] = {
        "kind": item["kind"],
        "subject": item["speaker"] if item["kind"] == "turn" else item["subject"],
        "category": item.get("category", "general"),
        "origin": origin,
        "sensitivity": item["sensitivity"],
        "provenance": provenance,
    }
    if item["kind"] == "turn":
        write["content"] = item["content"]
    else:
        write["predicate"] = item["predicate"]
        write["value"] = item["value"]
    for name in ("confidence", "scope", "strength"):
        if name in item:
            write[name] = item[name]
    if item.get("derived_from"):
        write["derived_from"] = [
            {"item_id": refs[k][0], "version": refs[k][1]} for k in item["derived_from"]
        ]
    return write


def write_history(ledger: Any, history: Mapping[str, Any]) -> dict[str, str]:
    """Write a history's items in list order through `ledger.remember` (a
    `memory_ledger.api.MemoryLedger`), and return key -> item id."""
    refs: dict[str, tuple[str, int]] = {}
    for item in history["items"]:
        stored = ledger.remember(to_write(item, refs))
        refs[item["key"]] = (stored.item_id, stored.version)
    return {key: item_id for key, (item_id, _) in refs.items()}


# -- scoring ----------------------------------------------------------------------------


def _norm(text: Any) -> str:
    return " ".join(unicodedata.normalize("NFC", str(text)).casefold().split())


def _ids(value: Any) -> set[str]:
    """Item ids from a plan's list: plain ids, or `{"item_id", ...}` objects."""
    out: set[str] = set()
    for entry in value or []:
        out.add(str(entry.get("item_id")) if isinstance(entry, Mapping) else str(entry))
    return out


def score(case: Mapping[str, Any], plan: Mapping[str, Any], ids: Mapping[str, str]) -> dict:
    """Compare a plan with the case's expectation.

    `plan`: `status`, `intent`, `targets` (item ids), `keeps`, `candidates` (ids or
    `{"item_id", ...}`), `scope` (`{"kind", "which", ...}`), `spans`, `new_value`,
    `conclusion`. `ids`: key -> item id, from `write_history`.

    `exact`: the same status; for a plan, the same intent and target set (and spans for a
    redaction, new value for an update, the conclusion flag); for a clarification, the
    same candidate set. `wider`: a plan targets an item the expectation does not, or
    targets anything when none was expected. `false_trigger`: a `not_a_request`
    utterance got a plan or a clarification. `clarified`: the answer asked. `scope_ok`:
    whether the plan's scope kind/which match the described scope (None when the case
    describes none)."""
    expect = case["expect"]
    want = expect["status"]
    status = plan.get("status")
    targets = _ids(plan.get("targets"))
    why: list[str] = []
    if status != want:
        why.append(f"status {status!r}, expected {want!r}")
    expected_targets = {ids[k] for k in expect.get("targets", [])}
    if want == "planned" and status == want:
        if plan.get("intent") != expect["intent"]:
            why.append(f"intent {plan.get('intent')!r}, expected {expect['intent']!r}")
        key_of = {v: k for k, v in ids.items()}
        missing = sorted(key_of.get(i, i) for i in expected_targets - targets)
        extra = sorted(key_of.get(i, i) for i in targets - expected_targets)
        if missing:
            why.append(f"missing targets {missing}")
        if extra:
            why.append(f"extra targets {extra}")
        if expect["intent"] == "redact":
            got = {_norm(s) for s in plan.get("spans") or []}
            if got != {_norm(s) for s in expect["spans"]}:
                why.append(f"spans {sorted(plan.get('spans') or [])}, expected {expect['spans']}")
        if expect["intent"] == "update" and _norm(plan.get("new_value", "")) != _norm(
            expect["new_value"]
        ):
            why.append(f"new value {plan.get('new_value')!r}, expected {expect['new_value']!r}")
        got_conclusion, want_conclusion = (
            bool(plan.get("conclusion")),
            bool(expect.get("conclusion")),
        )
        if got_conclusion != want_conclusion:
            why.append(f"conclusion {got_conclusion}, expected {want_conclusion}")
    elif want == "needs_clarification" and status == want:
        got = _ids(plan.get("candidates"))
        wanted = {ids[k] for k in expect["candidates"]}
        if got != wanted:
            why.append("candidates differ from the expected ones")
    scope_ok = None
    if "kind" in expect:
        scope = plan.get("scope") or {}
        which = expect.get(
            "which", "all" if expect["kind"] == "predicate" and "value" not in expect else None
        )
        scope_ok = scope.get("kind") == expect["kind"] and (
            which is None or scope.get("which", "all") == which
        )
    if status == "planned":
        wider = bool(targets - expected_targets) if want == "planned" else bool(targets)
    else:
        wider = False
    return {
        "id": case["id"],
        "lang": case["lang"],
        "expected_status": want,
        "exact": not why,
        "wider": wider,
        "false_trigger": want == "not_a_request" and status in ("planned", "needs_clarification"),
        "clarified": status == "needs_clarification",
        "scope_ok": scope_ok,
        "why": "; ".join(why) if why else "exact",
    }


def _rates(scores: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    n = len(scores)
    ambiguous = [s for s in scores if s["expected_status"] == "needs_clarification"]
    return {
        "cases": n,
        "exact": sum(s["exact"] for s in scores),
        "exact_rate": round(sum(s["exact"] for s in scores) / n, 4) if n else 0.0,
        "wider_count": sum(s["wider"] for s in scores),
        "clarification_rate": round(sum(s["clarified"] for s in scores) / n, 4) if n else 0.0,
        "ambiguous_clarified": sum(s["clarified"] for s in ambiguous),
        "ambiguous_cases": len(ambiguous),
        "false_trigger_count": sum(s["false_trigger"] for s in scores),
    }


def summarise(scores: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over scored cases, overall, per language and per expected status."""
    scores = list(scores)
    out = _rates(scores)
    out["per_language"] = {
        lang: _rates([s for s in scores if s["lang"] == lang])
        for lang in sorted({s["lang"] for s in scores})
    }
    out["per_status"] = {
        status: _rates([s for s in scores if s["expected_status"] == status])
        for status in STATUSES
        if any(s["expected_status"] == status for s in scores)
    }
    return out


# -- composition ------------------------------------------------------------------------


def shape(case: Mapping[str, Any]) -> str:
    """One label per expected answer: the status, or the plan's intent."""
    expect = case["expect"]
    if expect["status"] != "planned":
        return expect["status"]
    if expect.get("conclusion"):
        return "stop_using (conclusion)"
    return str(expect["intent"])


def composition(
    cases: Sequence[Mapping[str, Any]], histories: Mapping[str, Mapping[str, Any]]
) -> str:
    """The summary table the module docstring carries."""
    shapes = Counter(shape(c) for c in cases)
    langs = Counter(c["lang"] for c in cases)
    order = [
        "delete",
        "stop_using",
        "stop_using (conclusion)",
        "redact",
        "update",
        "needs_clarification",
        "nothing_matched",
        "not_a_request",
    ]
    n_items = sum(len(h["items"]) for h in histories.values())
    kinds = Counter(i["kind"] for h in histories.values() for i in h["items"])
    lines = [
        f"{len(cases)} cases against {len(histories)} histories of {n_items} items "
        f"(fact {kinds['fact']}, preference {kinds['preference']}, turn {kinds['turn']}).",
        "",
        "cases by language:  " + ", ".join(f"{lang} {langs[lang]}" for lang in LANGS),
        "",
        f"{'expected answer':<26}{'en':>5}{'zh':>5}{'all':>6}",
    ]
    for label in order:
        en = sum(1 for c in cases if shape(c) == label and c["lang"] == "en")
        zh = sum(1 for c in cases if shape(c) == label and c["lang"] == "zh")
        lines.append(f"{label:<26}{en:>5}{zh:>5}{shapes[label]:>6}")
    lines += ["", f"{'history':<10}{'timezone':<20}{'items':>6}{'cases':>6}{'en':>5}{'zh':>5}"]
    for name, history in histories.items():
        mine = [c for c in cases if c["history"] == name]
        en = sum(1 for c in mine if c["lang"] == "en")
        lines.append(
            f"{name:<10}{history['timezone']:<20}{len(history['items']):>6}{len(mine):>6}"
            f"{en:>5}{len(mine) - en:>5}"
        )
    return "\n".join(lines)


def main() -> None:
    histories = load_histories()
    print(composition(load_cases(histories=histories), histories))


if __name__ == "__main__":
    sys.exit(main())
