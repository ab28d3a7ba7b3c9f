"""Listing memories a page at a time: every page of a listing together is what `recall`
returns, none twice, while writes and erasures go on between the pages."""

from __future__ import annotations

import pytest
from factories import fact, preference, turn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger
from memory_ledger.errors import InvalidWrite


def _fill(ledger: MemoryLedger, n: int) -> list[str]:
    writes = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            writes.append(fact(f"fact_{i}", f"value {i}"))
        elif kind == 1:
            writes.append(preference(f"pref_{i}", f"likes {i}"))
        else:
            writes.append(turn(f"said {i}", turn_id=f"t{i}"))
    return [r.item_id for r in ledger.remember_many(writes)]


def _all_pages(ledger: MemoryLedger, limit: int, **filters: object) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        page = ledger.recall_page(limit=limit, cursor=cursor, **filters)
        pages.append([m.item_id for m in page.memories])
        cursor = page.next_cursor
        if cursor is None:
            return pages


def test_the_pages_together_are_recall(alice: MemoryLedger, bob: MemoryLedger) -> None:
    ids = _fill(alice, 23)
    _fill(bob, 4)
    pages = _all_pages(alice, 5)
    listed = [i for page in pages for i in page]
    assert len(listed) == len(set(listed)) == 23
    assert set(listed) == set(ids) == {m.item_id for m in alice.recall(limit=1000)}
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    assert listed == list(reversed(ids))  # newest written first
    facts_only = [i for p in _all_pages(alice, 2, kind="fact") for i in p]
    assert set(facts_only) == {m.item_id for m in alice.recall(kind="fact", limit=1000)}


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    limit=st.integers(1, 7),
    actions=st.lists(st.sampled_from(["write", "forget", "update", "none"]), max_size=8),
)
def test_paging_while_others_write_never_repeats_or_skips_the_unchanged(
    alice: MemoryLedger, limit: int, actions: list[str]
) -> None:
    ids = _fill(alice, 12)
    before = {m.item_id for m in alice.recall(limit=1000)}
    touched: set[str] = set()
    listed: list[str] = []
    cursor = None
    step = 0
    while True:
        page = alice.recall_page(limit=limit, cursor=cursor)
        listed += [m.item_id for m in page.memories]
        if step < len(actions):
            action, target = actions[step], ids[step % len(ids)]
            if action == "write":
                touched.add(_fill(alice, 1)[0])
            elif action == "forget" and target not in touched:
                alice.forget(target)
                touched.add(target)
            elif action == "update" and step % 3 == 0 and target not in touched:
                alice.update(
                    target, {"value": f"changed {step}", "provenance": fact("x", "y")["provenance"]}
                )
                touched.add(target)
        step += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert len(listed) == len(set(listed))
    assert before - touched <= set(listed)  # what nobody touched is listed
    live = {m.item_id for m in alice.recall(limit=1000)}
    assert set(listed) - touched <= live
    for item_id in ids:  # a clean state for the next example
        if item_id in live:
            alice.forget(item_id)
    for item_id in touched & live:
        alice.forget(item_id)


@pytest.mark.parametrize("cursor", ["", "x1", "p", "p-1", "p" + "9" * 16, "o3", 7])
def test_an_unknown_cursor_says_how_to_start_again(alice: MemoryLedger, cursor: object) -> None:
    with pytest.raises(InvalidWrite, match="without one"):
        alice.recall_page(cursor=cursor)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, 10_001, True, "5"])
def test_the_page_size_is_bounded(alice: MemoryLedger, limit: object) -> None:
    with pytest.raises(InvalidWrite, match="limit"):
        alice.recall_page(limit=limit)  # type: ignore[arg-type]
