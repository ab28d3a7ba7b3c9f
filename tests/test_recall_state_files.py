"""A namespace's recall state persists sealed (memory_ledger/retrieval/state_files.py), so
a fresh process loads it instead of reading every item again (issue 37). These tests open
a second service on the same store, as a fresh process would, and check that what it
loads is what a whole read gives, that a file it must not trust is read again, and that
an erasure leaves no state file behind."""

from __future__ import annotations

from factories import fact, preference, turn

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import Settings
from memory_ledger.principal import Principal
from memory_ledger.retrieval.usable import RecallStates


def _ids(ledger: MemoryLedger, query: str) -> list[str]:
    return [i.item_id for i in ledger.context(query, limit=50).items]


def _whole(service: MemoryService, namespace: str) -> dict[str, object]:
    """The namespace's state read whole, with no file."""
    service.runner.catch_up()
    with service.engine.connect() as conn:
        state = RecallStates().state(
            conn, service.log, namespace, service.retention, service.log.max_position()
        )
    return dict(state.entries)


def _loaded(service: MemoryService, namespace: str) -> tuple[dict[str, object], int]:
    """The state this service's recall uses, and the position of the file it came from."""
    service.runner.catch_up()
    with service.engine.connect() as conn:
        state = service.context_cache.states.state(
            conn, service.log, namespace, service.retention, service.log.max_position()
        )
    return dict(state.entries), state.saved


def test_a_fresh_process_loads_the_state_and_catches_up(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    alice.remember(fact("home_city", "Hangzhou", turn="t1"))
    alice.remember(preference("seat", "window seat on long flights"))
    _ids(alice, "home city")  # writes the namespace's state file
    files = service.context_cache.states.files
    assert files is not None and len(files.files()) == 1
    written_at = service.log.max_position()
    later = alice.remember(turn("We are flying to Kyoto on 3 March.")).item_id  # after the file

    with MemoryService(settings) as fresh:
        entries, saved = _loaded(fresh, alice.namespace)
        assert saved >= written_at  # loaded from the file (and written again if it moved)
        assert later in entries
        assert entries == _whole(fresh, alice.namespace)
        assert later in _ids(fresh.for_principal(alice.principal), "flying to Kyoto")


def test_the_file_holds_no_clear_attribute(alice: MemoryLedger, service: MemoryService) -> None:
    alice.remember(fact("employer", "Zephyrine Analytics", turn="t1"))
    _ids(alice, "employer")
    files = service.context_cache.states.files
    assert files is not None
    [path] = files.files()
    raw = path.read_bytes()
    for clear in (b"employer", alice.namespace.encode(), b"fact", b"user"):
        assert clear not in raw
    assert alice.namespace not in path.name


def test_a_file_that_does_not_open_is_read_again(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    alice.remember(fact("home_city", "Hangzhou", turn="t1"))
    _ids(alice, "home city")
    files = service.context_cache.states.files
    assert files is not None
    [path] = files.files()
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # one flipped bit: the seal does not open
    path.write_bytes(bytes(raw))
    with MemoryService(settings) as fresh:
        assert fresh.context_cache.states.files is not None
        assert fresh.context_cache.states.files.load(alice.namespace) is None
        entries, _ = _loaded(fresh, alice.namespace)
        assert entries == _whole(fresh, alice.namespace)


def test_an_erasure_removes_every_state_file(
    alice: MemoryLedger, bob: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    gone = alice.remember(fact("passport_number", "E12345678", category="identity")).item_id
    bob.remember(fact("home_city", "Suzhou", turn="t1"))
    _ids(alice, "passport")
    _ids(bob, "home city")
    files = service.context_cache.states.files
    assert files is not None and len(files.files()) == 2

    # Erased by another process: its erasure removes the files this one wrote.
    with MemoryService(settings) as other:
        other.for_principal(alice.principal).forget(gone)
    assert files.files() == []
    assert gone not in _ids(alice, "passport E12345678")  # this process: refreshed
    with MemoryService(settings) as fresh:
        assert gone not in _ids(fresh.for_principal(alice.principal), "passport E12345678")
        assert gone not in _loaded(fresh, alice.namespace)[0]
    assert files.files()  # written again, without it


def test_a_state_file_of_another_log_is_not_trusted(
    alice: MemoryLedger, service: MemoryService, settings: Settings
) -> None:
    """A file naming another event at its position (a store restored or re-created) is
    read again whole."""
    alice.remember(fact("home_city", "Hangzhou", turn="t1"))
    _ids(alice, "home city")
    files = service.context_cache.states.files
    assert files is not None
    snapshot = files.load(alice.namespace)
    assert snapshot is not None
    forged = type(snapshot)(snapshot.position, "another-log:1", snapshot.policy, [])
    files.save(alice.namespace, forged)
    with MemoryService(settings) as fresh:
        entries, _ = _loaded(fresh, alice.namespace)
        assert entries and entries == _whole(fresh, alice.namespace)


def test_other_namespaces_have_files_of_their_own(
    alice: MemoryLedger, service: MemoryService
) -> None:
    carol = service.for_principal(Principal.from_namespace("acme/carol"))
    carol.remember(fact("home_city", "Ningbo", turn="t1"))
    alice.remember(fact("home_city", "Hangzhou", turn="t1"))
    _ids(alice, "home city")
    _ids(carol, "home city")
    files = service.context_cache.states.files
    assert files is not None and len(files.files()) == 2


def test_the_erasure_check_reads_the_files_themselves(
    alice: MemoryLedger, service: MemoryService
) -> None:
    """A recall right after an erasure writes the namespace's file again (without the
    item): the check still passes. A file that held the item would fail it."""
    gone = alice.remember(fact("passport_number", "E12345678", category="identity")).item_id
    alice.remember(fact("home_city", "Hangzhou", turn="t1"))
    _ids(alice, "passport")
    files = service.context_cache.states.files
    assert files is not None
    held = files.load(alice.namespace)
    assert held is not None and files.holding({gone}) == (1, 0)
    alice.forget(gone)
    _ids(alice, "home city")  # written again
    assert files.files() and files.holding({gone}) == (0, 0)
    store = service.stores.get("context_cache")
    assert store.verify_absent([gone]).absent
    files.save(alice.namespace, held)  # as if an older copy had come back
    evidence = store.verify_absent([gone])
    assert not evidence.absent and evidence.detail["recall_state_file_entries_left"] == 1
