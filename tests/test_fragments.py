"""Distinctive fragments of erased texts: what the verification scan looks for."""

from __future__ import annotations

from uuid import UUID

from factories import turn
from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.forgetting.fragments import MAX_PER_REQUEST, WINDOW, clear_strings, fragments


def test_words_numbers_and_windows_but_not_clear_identifiers() -> None:
    text = "Passport E1234567 renewed at the Zqxwvbt office, call 13800138000"
    found = {f.decode() for f in fragments([text], clear=["passport_number", "acme/alice"])}
    assert "13800138000" in found and "1234567" in found and "Zqxwvbt" in found
    assert "Passport" not in found  # inside the clear predicate `passport_number`
    assert any(len(f) == WINDOW for f in found)
    assert not any("\x00" in f for f in found)


def test_every_surviving_run_of_the_text_contains_a_window() -> None:
    text = "我们下周二在杭州西湖边的咖啡馆见面然后一起去灵隐寺"
    found = {f.decode() for f in fragments([text])}
    for start in range(len(text) - 17):
        run = text[start : start + 17]  # WINDOW + STEP - 1 characters
        assert any(f in run for f in found if len(f) == WINDOW), run


@given(st.lists(st.text(min_size=0, max_size=80), max_size=40))
def test_fragments_are_bounded_and_come_from_the_texts(texts: list[str]) -> None:
    found = fragments(texts)
    assert len(found) <= MAX_PER_REQUEST
    joined = "\n".join(texts)
    assert all(f.decode("utf-8") in joined for f in found)


def test_a_thousand_items_stay_within_the_request_budget() -> None:
    texts = [f"I told you zq{i:08x}deadbeef once at gate {i:07d}" for i in range(3000)]
    clear = [f"t_health_{i}" for i in range(3000)]
    found = fragments(texts, clear)
    assert 4 * len(texts) <= len(found) <= MAX_PER_REQUEST + 4 * len(texts)


def test_the_event_stores_own_clear_words_are_not_fragments(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """A turn that says "retention" or "provenance" must not make the scan find those
    words in every event row, where they are the names of clear fields."""
    stored = alice.remember(turn("my retention provenance sensitivity question"))
    item = service.log.get(UUID(stored.item_id))
    text = "my retention provenance sensitivity question"
    found = {f.decode() for f in fragments([text], clear_strings([item]))}
    assert not found & {"retention", "provenance", "sensitivity"}, found
    assert "question" in found
