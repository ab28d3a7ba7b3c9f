"""A hand-written bilingual (Chinese/English) set for measuring memory retrieval quality.

`benchmarks/data/retrieval_set.json` holds fictional users, their memories and queries
whose answers are known, so recall@5 of different rankers (the multilingual embedder, the
feature-hashing embedder, keyword-only BM25) can be compared on the same footing. Every
person, address, number and booking in it is invented.

Why it looks the way it does:

- Each user's memories live in that user's namespace and every query runs in its user's
  namespace only, as in the product; so distractors are the user's own memories on
  similar topics (old and new address, a ticket mentioned in a chat turn, a pet's vet
  visit next to the pet itself), not other people's.
- Query types separate what each ranker can be expected to do. `cross_lingual` (a Chinese
  query for an English memory or the reverse) only a multilingual model can answer;
  `identifier` (a code, number or name quoted verbatim) favours keyword matching;
  `keyword_overlap` shares content words with its answer; `same_lang_paraphrase` asks in
  the answer's language with different words. A memory tagged `mixed` code-switches and
  counts as both languages, so it is never the answer to a `cross_lingual` query.
- Facts and preferences of one user never share subject and predicate: a later fact
  would supersede an earlier one in the product, and a memory hidden by supersession
  would count as a ranking miss when it is a data-modelling artefact. Where an old
  value matters it has its own predicate (`previous_home_address`).
- Memories marked `looks_like_instruction` read like commands to the model (a forwarded
  scam text, a pasted "system prompt"). For retrieval they are ordinary memories, and a
  few queries target them; they exist to test instruction flagging.
- `written_day` is a day offset from `base_date`; `to_write` turns it into provenance,
  so the set stays free of absolute timestamps that would have to be kept consistent.

The validator (`RetrievalSet`) checks all of this on load, including that every memory
is a write `MemoryLedger.remember()` accepts, so a broken edit fails before an evaluation
spends minutes embedding.

Composition (`tests/test_retrieval_set.py` fails when this drifts from the data; after an
edit, paste the output of `python -m benchmarks.retrieval_set` here):

    331 memories of 8 users, 89 queries.

    memories by kind:  fact 169, preference 66, turn 96
    memory languages:  zh 138, en 160, mixed 33
    queries by type:   same_lang_paraphrase 24, cross_lingual 26, identifier 18, keyword_overlap 21
    query languages:   zh 37, en 50, mixed 2
    relevant/query:    1 80, 2 8, 3 1
    instruction-like:  5 memories, 3 queries target one

    user      profile  memories  fact  pref  turn    zh    en  mixed  queries
    acme/u01  zh             42    22     8    12    35     4      3       11
    acme/u02  en             41    21     8    12     2    39      0       12
    acme/u03  mixed          42    21     9    12    13    16     13       12
    acme/u04  en             41    21     8    12     2    37      2       10
    acme/u05  zh             41    21     8    12    39     0      2       11
    acme/u06  mixed          42    21     9    12    10    21     11       11
    acme/u07  en             41    21     8    12     2    39      0       11
    acme/u08  zh             41    21     8    12    35     4      2       11
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from memory_ledger.errors import InvalidWrite
from memory_ledger.write_policy import Identifier, Kind, Origin, Sensitivity, parse_write

DATA_PATH = Path(__file__).resolve().parent / "data" / "retrieval_set.json"
WRITER = "retrieval-set"

Lang = Literal["zh", "en", "mixed"]
QueryType = Literal["same_lang_paraphrase", "cross_lingual", "identifier", "keyword_overlap"]
LANGS: tuple[Lang, ...] = ("zh", "en", "mixed")
KINDS: tuple[Kind, ...] = ("fact", "preference", "turn")
QUERY_TYPES: tuple[QueryType, ...] = (
    "same_lang_paraphrase",
    "cross_lingual",
    "identifier",
    "keyword_overlap",
)

# The brief the set was written to; the validator enforces it so edits cannot erode it.
USERS_RANGE = (6, 10)
MEMORIES_PER_USER = (30, 60)
MIN_MEMORIES = 320
MIN_QUERIES = 60
MIN_PER_QUERY_TYPE: dict[QueryType, int] = {
    "cross_lingual": 12,
    "identifier": 10,
    "same_lang_paraphrase": 15,
    "keyword_overlap": 10,
}
KIND_SHARE: dict[Kind, float] = {"fact": 0.5, "preference": 0.2, "turn": 0.3}
KIND_SHARE_TOLERANCE = 0.1
MAX_RELEVANT = 3
MIN_INSTRUCTION_LIKE = 5
PROFILE_MAJORITY = 0.7  # a "zh" or "en" user writes at least this share in that language
MIXED_CEILING = 0.6  # a "mixed" user has no language above this share
MIN_MIXED_IN_MIXED_USER = 3

Namespace = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
    ),
]
MemoryKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+-m[0-9]{3}$")]
QueryKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]+-q[0-9]{2}$")]
Text = Annotated[str, StringConstraints(min_length=1)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SetUser(_Model):
    user: Namespace
    language_profile: Lang
    persona: Text


class SetMemory(_Model):
    """One memory; the fields mirror a `MemoryWrite` so `to_write` is a plain mapping."""

    key: MemoryKey
    user: Namespace
    kind: Kind
    subject: Identifier
    predicate: Identifier | None = None
    value: Text | None = None
    content: Text | None = None
    category: Identifier
    origin: Origin
    sensitivity: Sensitivity
    lang: Lang
    written_day: Annotated[int, Field(ge=0, le=365)]
    looks_like_instruction: bool = False

    @model_validator(mode="after")
    def _kind_fields(self) -> SetMemory:
        # Stated here too so a wrong record names its key, not just "invalid write".
        if self.kind == "turn":
            if self.content is None or self.value is not None or self.predicate is not None:
                raise ValueError(f"{self.key}: a turn has 'content' and no 'value'/'predicate'")
        elif self.value is None or self.content is not None or self.predicate is None:
            raise ValueError(f"{self.key}: a {self.kind} has 'predicate' and 'value', no 'content'")
        return self

    @property
    def text(self) -> str:
        return self.content if self.kind == "turn" else self.value  # type: ignore[return-value]


class SetQuery(_Model):
    key: QueryKey
    user: Namespace
    text: Text
    lang: Lang
    type: QueryType
    relevant: Annotated[tuple[MemoryKey, ...], Field(min_length=1, max_length=MAX_RELEVANT)]


class RetrievalSet(_Model):
    version: Literal[1]
    base_date: AwareDatetime
    users: tuple[SetUser, ...]
    memories: tuple[SetMemory, ...]
    queries: tuple[SetQuery, ...]

    @model_validator(mode="after")
    def _check(self) -> RetrievalSet:
        problems = _problems(self)
        if problems:
            raise ValueError("invalid retrieval set:\n- " + "\n- ".join(problems))
        return self

    def memory(self, key: str) -> SetMemory:
        return self._by_key()[key]

    def memories_of(self, user: str) -> list[SetMemory]:
        return [m for m in self.memories if m.user == user]

    def queries_of(self, user: str) -> list[SetQuery]:
        return [q for q in self.queries if q.user == user]

    def _by_key(self) -> dict[str, SetMemory]:
        return {m.key: m for m in self.memories}


def load_set(path: Path = DATA_PATH) -> RetrievalSet:
    return RetrievalSet.model_validate_json(path.read_text(encoding="utf-8"))


def dump_set(retrieval_set: RetrievalSet) -> str:
    """The canonical file text: field order from the models, so diffs stay reviewable."""
    data = retrieval_set.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def to_write(memory: SetMemory, base_date: datetime) -> dict[str, Any]:
    """The dict `MemoryLedger.remember()` accepts, with provenance as tests/factories.py
    builds it. One session per user and day, one turn id per memory, so an erasure by
    session or turn in an evaluation hits exactly what it should."""
    written_at = base_date + timedelta(days=memory.written_day)
    write: dict[str, Any] = {
        "kind": memory.kind,
        "subject": memory.subject,
        "category": memory.category,
        "origin": memory.origin,
        "sensitivity": memory.sensitivity,
        "provenance": {
            "writer": WRITER,
            "written_at": written_at.isoformat(),
            "turn_id": memory.key,
            "session_id": f"{_slug(memory.user)}-d{memory.written_day:03d}",
        },
    }
    if memory.kind == "turn":
        write["content"] = memory.content
    else:
        write["predicate"] = memory.predicate
        write["value"] = memory.value
    return write


def recall_at_k(ranked: Sequence[str], relevant: Sequence[str], k: int) -> float:
    """Recall at k: the fraction of the relevant keys that appear among the first k
    entries of `ranked`.

    Precisely: |set(ranked[:k]) ∩ set(relevant)| / |set(relevant)|. `ranked` is the
    ranker's output, best first; a ranking shorter than k is not padded, and a key
    repeated in it takes a position each time but counts once, so duplicates can only
    cost recall. The result is in [0, 1]: 1.0 when every relevant key is in the top k.
    Recall with no relevant keys is undefined and k below 1 is meaningless, so both raise
    ValueError rather than yield a number that would skew an average.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    wanted = set(relevant)
    if not wanted:
        raise ValueError("recall is undefined without relevant keys")
    return len(set(ranked[:k]) & wanted) / len(wanted)


def composition(retrieval_set: RetrievalSet) -> str:
    """The counts the module docstring quotes, computed from the data."""
    mems, queries = retrieval_set.memories, retrieval_set.queries
    kinds = Counter(m.kind for m in mems)
    langs = Counter(m.lang for m in mems)
    qtypes = Counter(q.type for q in queries)
    qlangs = Counter(q.lang for q in queries)
    flagged = [m for m in mems if m.looks_like_instruction]
    lines = [
        f"{len(mems)} memories of {len(retrieval_set.users)} users, {len(queries)} queries.",
        "",
        "memories by kind:  " + _counts(kinds, KINDS),
        "memory languages:  " + _counts(langs, LANGS),
        "queries by type:   " + _counts(qtypes, QUERY_TYPES),
        "query languages:   " + _counts(qlangs, LANGS),
        "relevant/query:    "
        + _counts(Counter(len(q.relevant) for q in queries), range(1, MAX_RELEVANT + 1)),
        f"instruction-like:  {len(flagged)} memories, "
        f"{sum(1 for q in queries if any(_flagged(retrieval_set, k) for k in q.relevant))}"
        " queries target one",
        "",
        "user      profile  memories  fact  pref  turn    zh    en  mixed  queries",
    ]
    for user in retrieval_set.users:
        own = retrieval_set.memories_of(user.user)
        k = Counter(m.kind for m in own)
        lg = Counter(m.lang for m in own)
        lines.append(
            f"{user.user:<9} {user.language_profile:<7} {len(own):>9} {k['fact']:>5}"
            f" {k['preference']:>5} {k['turn']:>5} {lg['zh']:>5} {lg['en']:>5}"
            f" {lg['mixed']:>6} {len(retrieval_set.queries_of(user.user)):>8}"
        )
    return "\n".join(lines)


# -- validation ------------------------------------------------------------------------

_ASCII_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._\-]*[A-Za-z0-9]|[A-Za-z0-9]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
# Words too common to count as shared content; a short list on purpose, since it only
# guards the query-type labels, it does not model any ranker.
_EN_STOP = frozenset(
    {
        "the",
        "and",
        "for",
        "with",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "how",
        "does",
        "did",
        "has",
        "have",
        "her",
        "his",
        "she",
        "him",
        "are",
        "was",
        "were",
        "into",
        "from",
        "that",
        "this",
        "there",
        "their",
        "they",
        "them",
        "your",
        "you",
        "can",
        "any",
        "all",
        "not",
        "but",
        "its",
        "our",
        "out",
        "too",
    }
)
_ZH_STOP = frozenset(
    {
        "什么",
        "是什",
        "哪个",
        "哪些",
        "一下",
        "帮我",
        "我的",
        "他的",
        "她的",
        "的是",
        "了吗",
        "怎么",
        "没有",
        "有没",
        "可以",
        "这个",
        "一个",
        "是哪",
        "哪天",
        "时候",
    }
)


def content_terms(text: str) -> set[str]:
    """Lower-cased English words of 3+ characters and Chinese character bigrams, minus a
    few function words: what 'shares words' means for the query-type rules."""
    terms = {
        t.lower() for t in _ASCII_TOKEN.findall(text) if len(t) >= 3 and t.lower() not in _EN_STOP
    }
    for run in _CJK_RUN.findall(text):
        terms.update(run[i : i + 2] for i in range(len(run) - 1))
    return terms - _ZH_STOP


def _verbatim_identifiers(query: str, texts: list[str]) -> list[str]:
    """Code-like tokens of the query (3+ characters with a digit, a capital letter or one
    of @._- in them: codes, numbers, names, addresses) that every answer contains exactly
    as written."""
    tokens = [
        t
        for t in _ASCII_TOKEN.findall(query)
        if len(t) >= 3 and any(c.isdigit() or c.isupper() or c in "@._-" for c in t)
    ]
    return [t for t in tokens if all(t in text for text in texts)]


def _problems(s: RetrievalSet) -> list[str]:
    return [
        *_user_problems(s),
        *_memory_problems(s),
        *_query_problems(s),
    ]


def _user_problems(s: RetrievalSet) -> list[str]:
    out: list[str] = []
    names = [u.user for u in s.users]
    if not USERS_RANGE[0] <= len(names) <= USERS_RANGE[1]:
        out.append(f"{len(names)} users; expected {USERS_RANGE[0]}..{USERS_RANGE[1]}")
    out += [f"user {n} listed twice" for n, c in Counter(names).items() if c > 1]
    profiles = {u.language_profile for u in s.users}
    out += [f"no user with language profile {p!r}" for p in LANGS if p not in profiles]
    for user in s.users:
        own = s.memories_of(user.user)
        low, high = MEMORIES_PER_USER
        if not low <= len(own) <= high:
            out.append(f"{user.user} has {len(own)} memories; expected {low}..{high}")
        if own:
            out += _profile_problems(user, own)
    return out


def _profile_problems(user: SetUser, own: list[SetMemory]) -> list[str]:
    share = {lang: n / len(own) for lang, n in Counter(m.lang for m in own).items()}
    profile = user.language_profile
    if profile != "mixed" and share.get(profile, 0.0) < PROFILE_MAJORITY:
        return [f"{user.user} is {profile!r} but only {share.get(profile, 0.0):.0%} is {profile}"]
    if profile == "mixed":
        top = max(share.values())
        mixed = sum(1 for m in own if m.lang == "mixed")
        if top > MIXED_CEILING or mixed < MIN_MIXED_IN_MIXED_USER:
            return [f"{user.user} is 'mixed' but its languages are {dict(sorted(share.items()))}"]
    return []


def _memory_problems(s: RetrievalSet) -> list[str]:
    out: list[str] = []
    users = {u.user for u in s.users}
    keys = Counter(m.key for m in s.memories)
    out += [f"memory key {k} used {c} times" for k, c in keys.items() if c > 1]
    slots: Counter[tuple[str, str, str | None]] = Counter()
    for m in s.memories:
        if m.user not in users:
            out.append(f"{m.key}: unknown user {m.user}")
        if not m.key.startswith(_slug(m.user) + "-"):
            out.append(f"{m.key}: key does not start with its user's id {_slug(m.user)}")
        if m.kind != "turn":
            slots[(m.user, m.subject, m.predicate)] += 1
        try:
            parse_write(to_write(m, s.base_date))
        except InvalidWrite as exc:
            out.append(f"{m.key}: not a valid write: {exc}")
    out += [
        f"{u}: {c} facts/preferences share subject {subj!r} and predicate {pred!r}"
        for (u, subj, pred), c in slots.items()
        if c > 1
    ]
    total = len(s.memories)
    if total < MIN_MEMORIES:
        out.append(f"{total} memories; expected at least {MIN_MEMORIES}")
    kinds = Counter(m.kind for m in s.memories)
    for kind, target in KIND_SHARE.items():
        share = kinds[kind] / total if total else 0.0
        if abs(share - target) > KIND_SHARE_TOLERANCE:
            out.append(f"{kind}s are {share:.0%} of the memories; expected about {target:.0%}")
    langs = Counter(m.lang for m in s.memories)
    out += [f"no memory in language {lang!r}" for lang in LANGS if not langs[lang]]
    flagged = [m for m in s.memories if m.looks_like_instruction]
    flagged_users = {m.user for m in flagged}
    if len(flagged) < MIN_INSTRUCTION_LIKE or len(flagged_users) < MIN_INSTRUCTION_LIKE:
        out.append(
            f"{len(flagged)} instruction-like memories in {len(flagged_users)} users; "
            f"expected at least {MIN_INSTRUCTION_LIKE} in as many different users"
        )
    return out


def _query_problems(s: RetrievalSet) -> list[str]:
    out: list[str] = []
    users = {u.user for u in s.users}
    by_key = s._by_key()
    keys = Counter(q.key for q in s.queries)
    out += [f"query key {k} used {c} times" for k, c in keys.items() if c > 1]
    for q in s.queries:
        if q.user not in users:
            out.append(f"{q.key}: unknown user {q.user}")
        if not q.key.startswith(_slug(q.user) + "-"):
            out.append(f"{q.key}: key does not start with its user's id {_slug(q.user)}")
        if len(set(q.relevant)) != len(q.relevant):
            out.append(f"{q.key}: a relevant key is listed twice")
        missing = [k for k in q.relevant if k not in by_key]
        foreign = [k for k in q.relevant if k in by_key and by_key[k].user != q.user]
        if missing:
            out.append(f"{q.key}: relevant keys {missing} do not exist")
        if foreign:
            out.append(f"{q.key}: relevant keys {foreign} belong to another user")
        if not missing and not foreign:
            out += _type_problems(q, [by_key[k] for k in q.relevant])
    if len(s.queries) < MIN_QUERIES:
        out.append(f"{len(s.queries)} queries; expected at least {MIN_QUERIES}")
    types = Counter(q.type for q in s.queries)
    out += [
        f"{types[t]} {t} queries; expected at least {n}"
        for t, n in MIN_PER_QUERY_TYPE.items()
        if types[t] < n
    ]
    langs = {q.lang for q in s.queries}
    out += [f"no query in {lang!r}" for lang in ("zh", "en") if lang not in langs]
    return out


def _type_problems(q: SetQuery, answers: list[SetMemory]) -> list[str]:
    """Keep each type label honest, so a per-type recall measures what its name says."""
    if q.type == "cross_lingual":
        other = {"zh": "en", "en": "zh"}.get(q.lang)
        wrong = [m.key for m in answers if m.lang != other]
        if other is None or wrong:
            return [
                f"{q.key}: cross_lingual needs a zh/en query and answers in the other "
                f"language; {wrong or q.lang} is not"
            ]
    elif q.type == "same_lang_paraphrase":
        wrong = [m.key for m in answers if q.lang != "mixed" and m.lang not in (q.lang, "mixed")]
        if wrong:
            return [f"{q.key}: same_lang_paraphrase answers {wrong} are in another language"]
        terms = content_terms(q.text)
        shared = sorted({t for m in answers for t in terms & content_terms(m.text)})
        if shared:
            return [f"{q.key}: same_lang_paraphrase shares {shared} with its answers"]
    elif q.type == "identifier":
        if not _verbatim_identifiers(q.text, [m.text for m in answers]):
            return [f"{q.key}: no code-like token of the query appears verbatim in every answer"]
    elif q.type == "keyword_overlap":
        terms = content_terms(q.text)
        wrong = [m.key for m in answers if not terms & content_terms(m.text)]
        if wrong:
            return [f"{q.key}: keyword_overlap shares no content word with {wrong}"]
    return []


def _flagged(s: RetrievalSet, key: str) -> bool:
    return s.memory(key).looks_like_instruction


def _counts(counter: Counter[Any], order: Sequence[Any] | range) -> str:
    return ", ".join(f"{name} {counter[name]}" for name in order)


def _slug(namespace: str) -> str:
    return namespace.rsplit("/", 1)[-1]


if __name__ == "__main__":
    # Loading validates; the printout is the docstring's composition block.
    print(textwrap.indent(composition(load_set()), "    ", lambda line: bool(line.strip())))
