"""Keyword top-k without scoring every posting (issue 37): MaxScore's answers equal full
BM25 scoring whenever it claims to, and a query of common words only is bounded.

The reference is BM25 computed here in Python from the corpus's texts (not from the
index), ranked as `search` promises: best first, ties (to 9 decimals) by item id, then
filtered by `allowed`. The corpora are written through the projection's own indexing
(`_index`) into a real store, on SQLite and PostgreSQL; small `TopK` limits reach the
"full", "maxscore" (proven, or fallen back to "full") and "window" paths on a few
dozen documents.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as statistic
from hypothesis import strategies as st
from sqlalchemy import event

from memory_ledger.api import MemoryService
from memory_ledger.projections.keyword_index import (
    K1,
    B,
    KeywordIndexProjection,
    LiveText,
    Ranking,
    TermHasher,
    TopK,
    hasher_of,
    ranked,
    tokenize,
)

# Skewed on purpose: "common" is in most documents, "rare" and "odd" in few.
VOCABULARY = ["common"] * 12 + ["usual"] * 6 + ["middle"] * 2 + ["rare", "odd", "unique"]
QUERY_WORDS = ["common", "usual", "middle", "rare", "odd", "unique", "absent"]


def reference(texts: dict[str, str], words: list[str]) -> list[tuple[str, float]]:
    """Every matching document's BM25 for the words, ranked best first, ties by id."""
    counts = {i: Counter(tokenize(t)) for i, t in texts.items()}
    counts = {i: c for i, c in counts.items() if c}
    n = len(counts)
    average = sum(sum(c.values()) for c in counts.values()) / n
    df = Counter(w for c in counts.values() for w in c)
    scores: dict[str, float] = {}
    for item_id, c in counts.items():
        length = sum(c.values())
        for w in set(words):
            if c[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                norm = c[w] + K1 * (1 - B + B * length / average)
                scores[item_id] = scores.get(item_id, 0.0) + idf * c[w] * (K1 + 1) / norm
    return sorted(scores.items(), key=lambda r: (-round(r[1], 9), r[0]))


def indexed(
    service: MemoryService, docs: list[list[str]]
) -> tuple[TermHasher, str, dict[str, str]]:
    """A fresh namespace holding the documents, indexed as the projection indexes items."""
    namespace = f"acme/topk-{uuid.uuid4().hex[:12]}"
    texts = {f"{namespace}/item-{i:03d}": " ".join(words) for i, words in enumerate(docs)}
    hasher = hasher_of(service.log, namespace, create=True)
    assert hasher is not None
    live = {i: LiveText(namespace, t) for i, t in texts.items()}
    with service.engine.begin() as conn:
        KeywordIndexProjection(service.log)._index(conn, live, {namespace: hasher})
    return hasher, namespace, texts


def search_with(
    service: MemoryService,
    hasher: TermHasher,
    namespace: str,
    words: list[str],
    k: int,
    limits: TopK,
    allowed: set[str] | None = None,
) -> Ranking:
    with service.engine.connect() as conn:
        return ranked(conn, hasher, namespace, sorted(set(words)), k, allowed, limits)


def check(ranking: Ranking, expected: list[tuple[str, float]], k: int) -> None:
    """An exact ranking is the reference's; a window's has the reference's scores, in
    the reference's order, as many rows as the reference has (up to k)."""
    got = ranking.rows
    if ranking.exact:
        assert [i for i, _ in got] == [i for i, _ in expected[:k]]
        assert [s for _, s in got] == pytest.approx([s for _, s in expected[:k]], abs=1e-9)
    else:
        assert ranking.how == "window"
        full = dict(expected)
        assert len(got) == min(k, len(expected))
        assert [s for _, s in got] == pytest.approx([full[i] for i, _ in got], abs=1e-9)
        assert got == sorted(got, key=lambda r: (-round(r[1], 9), r[0]))


documents = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6)
# Half the corpora hold "common" in every document: its weight is then tiny, the case
# MaxScore proves (a rare word's documents outrank any holding "common" alone).
corpora = st.lists(documents, max_size=60) | st.lists(
    documents.map(lambda d: ["common", *d]), max_size=60
)
limits = st.tuples(
    st.integers(0, 12), st.integers(0, 12), st.integers(1, 20), st.sampled_from([0.0, 0.5])
).map(lambda t: TopK(full_postings=t[0], essential_postings=t[1], window_postings=t[2], hope=t[3]))

queries = st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=3)
queries = queries | queries.map(lambda q: ["common", *q])


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    docs=corpora,
    words=queries,
    k=st.integers(1, 5),
    limit=limits,
    keep=st.none() | st.sets(st.integers(0, 59)),
)
def test_the_top_k_equals_full_bm25_whenever_it_is_exact(
    service: MemoryService,
    docs: list[list[str]],
    words: list[str],
    k: int,
    limit: TopK,
    keep: set[int] | None,
) -> None:
    """On SQLite and PostgreSQL (the `service` fixture runs both): random corpora, query
    words, limits and `allowed` sets; the answer restricted to `allowed` is the
    reference's restricted to it (the want * 4 loop reads further down when needed)."""
    hasher, namespace, texts = indexed(service, docs)
    ids = sorted(texts)
    allowed = None if keep is None else {ids[i] for i in keep if i < len(ids)}
    expected = reference(texts, words) if any(tokenize(t) for t in texts.values()) else []
    if allowed is not None:
        expected = [r for r in expected if r[0] in allowed]
    result = search_with(service, hasher, namespace, words, k, limit, allowed)
    statistic(result.how)  # --hypothesis-show-statistics: how often each path ran
    check(result, expected, k)


# -- each path, on purpose -------------------------------------------------------------------


def test_a_rare_word_with_common_ones_is_proven_by_maxscore(service: MemoryService) -> None:
    """ "rare" (3 documents) is essential; "common" (in all 60) cannot lift a document
    holding it alone above those: the answer is proven, in two statements."""
    docs = [["common", "rare"]] * 3 + [["common", "usual"]] * 57
    hasher, namespace, texts = indexed(service, docs)
    limit = TopK(full_postings=10, essential_postings=5, window_postings=10)
    statements = _count_statements(service)
    result = search_with(service, hasher, namespace, ["common", "rare"], 3, limit)
    assert (result.how, result.exact, len(statements)) == ("maxscore", True, 2)
    check(result, reference(texts, ["common", "rare"]), 3)


def test_an_unproven_maxscore_falls_back_to_full_scoring(service: MemoryService) -> None:
    """Asked for more documents than the rare word has, MaxScore cannot prove that no
    document of common words only belongs: every posting is scored (a third statement)."""
    docs = [["common", "rare"]] * 3 + [["common", "usual"]] * 57
    hasher, namespace, texts = indexed(service, docs)
    limit = TopK(full_postings=10, essential_postings=5, window_postings=10)
    statements = _count_statements(service)
    result = search_with(service, hasher, namespace, ["common", "rare"], 10, limit)
    assert (result.how, result.exact, len(statements)) == ("maxscore-unproven", True, 3)
    check(result, reference(texts, ["common", "rare"]), 10)


def test_common_words_only_are_answered_from_their_newest_postings(
    service: MemoryService,
) -> None:
    """Every word common: the candidates are each word's newest postings (highest
    document numbers), scored exactly; an older, better document is not found."""
    docs = [["common", "usual"]] + [["common", "usual", "middle", "odd"]] * 40
    hasher, namespace, texts = indexed(service, docs)
    limit = TopK(full_postings=10, essential_postings=5, window_postings=6)
    result = search_with(service, hasher, namespace, ["common", "usual"], 2, limit)
    expected = reference(texts, ["common", "usual"])
    assert (result.how, result.exact) == ("window", False)
    assert expected[0][0] == f"{namespace}/item-000"  # the shortest: the best, and oldest
    # The window is the 3 newest (6 postings, 2 words), all tied: the first two by id.
    assert [i for i, _ in result.rows] == sorted(texts)[-3:-1]
    check(result, expected, 2)


def _count_statements(service: MemoryService) -> list[str]:
    """The statements the service's engine runs from now on (the listener stays for the
    test's service only)."""
    statements: list[str] = []
    event.listen(service.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    return statements
