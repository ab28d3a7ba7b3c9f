"""Deletion acceptance: does a forget request delete what it should, and only that?

Each `Case` writes the same small fictional history into two isolated stores: A, the
control, which never sees the request, and B, where the request is applied. A proves
the history was remembered in the first place (a target A cannot recall makes the case
invalid, never a pass). B is then held to four separate results, reported one by one
and never averaged, because one serious failure must not hide behind three passes:

1. `target_residue`: B no longer gives the target back, through direct recall, the
   case's indirect probes (other filters, history, transcripts, the profile summary),
   `get` of every item that carried it, a recall from a new process, and (SQLite) the
   raw bytes of every file in its data directory; and B's confirmation does not repeat
   it.
2. `collateral`: every out-of-scope text is still recalled in B (and still in its
   profile summary, for the texts a case names), and other users' memories are
   exactly what they are in A.
3. `new_writes`: after the deletion B accepts a new value of the same kind, and recall
   returns the new value without the old one.
4. `reappearance`: after a consolidation run, a projection rebuild and a restart, B
   still shows no target and still has everything it recalled before.

Reasons name targets by their index, never by their text: the harness's own output
must not become the place where deleted data survives.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from memory_ledger.api import MemoryLedger, MemoryService
from memory_ledger.config import DATA_DIR_ENV, URL_ENV, Settings
from memory_ledger.forgetting.requests import RequestReport
from memory_ledger.jobs.context import JobContext
from memory_ledger.principal import Principal
from memory_ledger.residue import files_under, needles_for, scan

RESULT_NAMES = ("target_residue", "collateral", "new_writes", "reappearance")
MIN_TARGET_CHARS = 6
RECALL_LIMIT = 10_000
ROLES = ("control", "request")  # A and B
#: How long the new-process recall may take before it is given up as hung. A new
#: interpreter that opens a store can take minutes on a loaded machine (it took over two
#: in one run): this deadline only catches a hang, and what it catches is reported as
#: "could not check", never as a failed result (a failure reads "the data came back").
NEW_PROCESS_SECONDS = 30 * 60

# -- probes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One way of asking a ledger for texts: a recall with filters, a fact's history,
    or the namespace's profile summary (derived text that mixes many items)."""

    label: str
    call: str  # "recall" | "history" | "summary"
    filters: tuple[tuple[str, str], ...] = ()

    def texts(self, ledger: MemoryLedger) -> list[str]:
        args = dict(self.filters)
        if self.call == "summary":
            summary = ledger.summary()
            return [] if summary is None else [summary.text]
        if self.call == "history":
            found = ledger.history(subject=args["subject"], predicate=args["predicate"])
        else:
            found = ledger.recall(limit=RECALL_LIMIT, **args)
        return [m.text for m in found if m.text is not None]


def recall_by(**filters: str) -> Probe:
    inner = ", ".join(f"{k}={v}" for k, v in filters.items())
    return Probe(f"recall({inner})", "recall", tuple(filters.items()))


def history_of(predicate: str, subject: str = "user") -> Probe:
    return Probe(
        f"history({subject}.{predicate})",
        "history",
        (("subject", subject), ("predicate", predicate)),
    )


FULL_RECALL = recall_by()
SUMMARY = Probe("summary()", "summary")
STANDARD_PROBES = (
    FULL_RECALL,
    recall_by(kind="fact"),
    recall_by(kind="preference"),
    recall_by(kind="turn"),  # the transcripts
    SUMMARY,
)

# -- cases -------------------------------------------------------------------------------

Ids = dict[str, str]
Notes = dict[str, Any]


@dataclass(frozen=True)
class CaseStore:
    """What a case (its history, its forget action) and the observations use of an
    open store: a namespace's ledger (`ledger(namespace)`), and the jobs' context
    (consolidation is part of some histories; the catalog is read through its engine).
    The harness opens the store; nothing here sees the service."""

    ledger: Callable[[str], MemoryLedger]
    jobs: JobContext

    @classmethod
    def of(cls, service: MemoryService) -> CaseStore:
        return cls(
            lambda namespace: service.for_principal(Principal.from_namespace(namespace)),
            service.job_context,
        )


Build = Callable[[CaseStore], Ids]
ForgetAction = Callable[[CaseStore, MemoryLedger, Ids, Notes], "RequestReport | None"]


class CaseInvalid(Exception):
    """Raised by a forget action when the situation the case is about did not arise
    (e.g. the job never proposed the target): the case proves nothing, it is invalid."""


@dataclass(frozen=True)
class NewValue:
    """A write of the same kind as the target, made after the deletion."""

    write: dict[str, Any]
    text: str
    recall: dict[str, str] = field(default_factory=dict)  # filters that must return it


@dataclass(frozen=True)
class Case:
    """A fictional history, one forget request, and what must (not) come back.

    `build` writes the history and returns named item ids (it runs once per store, so it
    must be deterministic). `forget` is a scope dict for the case's namespace, or an
    action `(store, ledger, ids, notes) -> RequestReport | None` that issues the request (it
    may add evidence to `notes`, or raise CaseInvalid). `targets` must not come back
    (matched case-insensitively inside any text); `kept` must still be recalled
    (matched exactly), in the case's namespace or in `others`: other users, whose
    memories must stay exactly as in the control. `in_summary` must still be found
    inside the case namespace's profile summary (a target is never found there: the
    summary is one of the standard probes). `related` namespaces (the same user's
    projects) are searched for targets too, but may change.
    """

    name: str
    description: str
    build: Build
    forget: dict[str, Any] | ForgetAction
    targets: tuple[str, ...]
    kept: tuple[str, ...]
    probes: tuple[Probe, ...] = ()
    new_value: NewValue | None = None
    namespace: str = "travelco/li-wei"
    others: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    in_summary: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9_]+", self.name):
            raise ValueError(f"case name {self.name!r}: use lowercase letters, digits, '_'")
        if not self.targets:
            raise ValueError(f"case {self.name}: name at least one target text")
        for target in self.targets:
            if len(target) < MIN_TARGET_CHARS:
                raise ValueError(
                    f"case {self.name}: targets need {MIN_TARGET_CHARS}+ characters "
                    "for a meaningful byte scan"
                )
        others = [
            *self.kept,
            *self.in_summary,
            *([self.new_value.text] if self.new_value else []),
        ]
        for i, target in enumerate(self.targets, 1):
            if any(_contains(text, target) for text in others):
                raise ValueError(f"case {self.name}: target #{i} occurs in a kept or new text")
            if _contains(self.description, target):
                raise ValueError(f"case {self.name}: the description names target #{i}")
        for ns in self.namespaces:
            Principal.from_namespace(ns)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return (self.namespace, *self.related, *self.others)

    @property
    def all_probes(self) -> tuple[Probe, ...]:
        return STANDARD_PROBES + tuple(p for p in self.probes if p not in STANDARD_PROBES)


# -- results -----------------------------------------------------------------------------

PASS, FAIL, INVALID, NOT_APPLICABLE = "pass", "fail", "invalid", "n/a"
#: A probe that gave no answer (it hung): neither a pass nor a failure. Run again.
COULD_NOT_CHECK = "could_not_check"
#: A case's outcome, from its four results: any fail or invalid makes it failed; else
#: any result that could not be checked makes it unchecked; else it passed.
PASSED, FAILED, UNCHECKED = "passed", "failed", "could_not_check"
#: `memory-ledger check`'s exit code by the run's outcome. Could-not-check has its own:
#: never 0 (it is no pass), never 1 (a probe that hung says nothing about residue).
EXIT_CODES = {PASSED: 0, FAILED: 1, UNCHECKED: 15}


@dataclass(frozen=True)
class Result:
    """One of the four results of a case. `invalid`: the precondition did not hold.
    `could_not_check`: a probe gave no answer, so whether it passes is not known."""

    name: str
    status: str
    reason: str

    @property
    def ok(self) -> bool:
        return self.status in (PASS, NOT_APPLICABLE)

    def to_dict(self) -> dict[str, str]:
        return {"status": self.status, "reason": self.reason}


@dataclass
class CaseResult:
    case: str
    description: str
    results: list[Result]
    request: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __getitem__(self, name: str) -> Result:
        return next(r for r in self.results if r.name == name)

    @property
    def passed(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def outcome(self) -> str:
        """passed, failed, or could_not_check (no result failed, one is not known)."""
        statuses = {r.status for r in self.results}
        if statuses & {FAIL, INVALID}:
            return FAILED
        return UNCHECKED if COULD_NOT_CHECK in statuses else PASSED

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "description": self.description,
            "passed": self.passed,
            "outcome": self.outcome,
            "results": {r.name: r.to_dict() for r in self.results},
            "request": self.request,
            "seconds": round(self.seconds, 2),
        }


class _Checks:
    """Collects problems for one result; renders a short reason with targets masked."""

    def __init__(self, name: str, targets: Sequence[str]) -> None:
        self.name, self.targets = name, targets
        self.problems: list[str] = []
        self.invalid: list[str] = []
        self.unchecked: list[str] = []  # probes that gave no answer
        self.passed_note = ""
        self.not_applicable = ""

    def fail(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)

    def result(self) -> Result:
        if self.invalid:
            status, parts = INVALID, ["precondition failed: " + "; ".join(self.invalid[:3])]
        elif self.problems:
            status, parts = FAIL, self.problems[:3]
            if len(self.problems) > 3:
                parts.append(f"and {len(self.problems) - 3} more")
        elif self.unchecked:
            status, parts = COULD_NOT_CHECK, ["could not check: " + "; ".join(self.unchecked)]
        elif self.not_applicable:
            status, parts = NOT_APPLICABLE, [self.not_applicable]
        else:
            status, parts = PASS, [self.passed_note]
        return Result(self.name, status, _mask("; ".join(parts), self.targets))


# -- where the two stores live -----------------------------------------------------------

StoreUrl = str | Callable[[str], "str | None"] | None


@dataclass(frozen=True)
class _Store:
    role: str
    settings: Settings
    url: str | None

    def open(self) -> MemoryService:
        return MemoryService(self.settings)


def _stores(case: Case, workdir: Path, url: StoreUrl) -> tuple[_Store, _Store]:
    """A (control) and B (request): separate data directories and, on PostgreSQL,
    separate databases (a factory `role -> url`) or schemas (one plain url)."""
    out = []
    for role in ROLES:
        data_dir = workdir / case.name / role
        if data_dir.exists() and any(data_dir.iterdir()):
            raise FileExistsError(f"{data_dir} is not empty: acceptance stores must start empty")
        if callable(url):
            store_url = url(role) or f"sqlite:///{data_dir}"
        elif url:
            if "schema=" in url:
                raise ValueError("give a url without ?schema=: each store gets its own schema")
            sep = "&" if "?" in url else "?"
            store_url = f"{url}{sep}schema=acc_{role[:3]}_{uuid.uuid4().hex[:12]}"
        else:  # explicit, so a MEMORY_LEDGER_URL in the environment cannot redirect it
            store_url = f"sqlite:///{data_dir}"
        out.append(_Store(role, Settings.resolve(data_dir, store_url), store_url))
    control, request = out
    if control.settings.postgres and control.settings.postgres == request.settings.postgres:
        raise ValueError("the control and request stores must not share a database schema")
    return control, request


@contextmanager
def scratch_databases(admin_url: str) -> Iterator[Callable[[str], str]]:
    """A `url` factory for run_case/run_all that creates one scratch PostgreSQL database
    per store (needs CREATEDB) and drops them all on exit."""
    import psycopg

    created: list[str] = []
    base = admin_url.split("?", 1)[0].rsplit("/", 1)[0]

    def factory(role: str) -> str:
        name = f"ml_acc_{role[:3]}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return f"{base}/{name}"

    try:
        yield factory
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            for name in created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- running a case ----------------------------------------------------------------------


def run_case(case: Case, workdir: str | Path, url: StoreUrl = None) -> CaseResult:
    """Build the history in A and B, apply the request in B, and report four results.

    `url`: None for SQLite; a PostgreSQL url (each store gets a fresh schema in it); or a
    factory `role -> url | None`, called with "control" and "request", for stores in
    separate scratch databases (see `scratch_databases`).
    """
    started = time.monotonic()
    control, request = _stores(case, Path(workdir).resolve(), url)
    checks = {name: _Checks(name, case.targets) for name in RESULT_NAMES}
    info: dict[str, Any] = {}

    control_view = _run_control(case, control, checks)
    _run_request(case, request, control_view, checks, info)

    return CaseResult(
        case.name,
        case.description,
        [checks[name].result() for name in RESULT_NAMES],
        info,
        time.monotonic() - started,
    )


@dataclass
class _ControlView:
    texts: dict[str, list[str]]  # namespace -> full recall texts
    built: bool


def _run_control(case: Case, store: _Store, checks: dict[str, _Checks]) -> _ControlView:
    """A: the same history, no request. It must recall every target and every kept text."""
    residue, collateral = checks["target_residue"], checks["collateral"]
    try:
        with store.open() as service:
            opened = CaseStore.of(service)
            case.build(opened)
            texts = {ns: FULL_RECALL.texts(ledger_for(opened, ns)) for ns in case.namespaces}
            seen = _probe_all(opened, case)
            for i, target in enumerate(case.targets, 1):
                if not any(_contains(t, target) for ts in seen.values() for t in ts):
                    residue.invalid.append(f"control store never recalled target #{i}")
            if store.settings.postgres is None:
                # Sealed everywhere: no file of A holds a target in clear, though A
                # recalls it. So that B's byte scan cannot pass by being blind, the same
                # scan must find every target in a file that does hold it.
                for i in _scan_blind_to(store.settings.data_dir.parent, case.targets):
                    residue.invalid.append(f"the byte scan cannot see target #{i}")
                for i, path in _byte_scan(store.settings.data_dir, case.targets):
                    residue.invalid.append(f"control file {path.name} holds target #{i} in clear")
            everything = [t for ts in texts.values() for t in ts]
            for i, kept in enumerate(case.kept, 1):
                if kept not in everything:
                    collateral.invalid.append(f"control store never recalled kept #{i}")
            for i in _missing_from_summary(opened, case):
                collateral.invalid.append(f"control summary never contained in_summary #{i}")
    except Exception as exc:  # the history itself could not be written
        for c in checks.values():
            c.invalid.append(f"control history failed: {_describe(exc)}")
        return _ControlView({}, False)
    return _ControlView(texts, True)


def _run_request(
    case: Case,
    store: _Store,
    control: _ControlView,
    checks: dict[str, _Checks],
    info: dict[str, Any],
) -> None:
    residue, collateral = checks["target_residue"], checks["collateral"]
    new_writes, reappearance = checks["new_writes"], checks["reappearance"]
    service: MemoryService | None = store.open()
    assert service is not None
    opened = CaseStore.of(service)
    try:
        try:
            ids = case.build(opened)
            carriers = _carriers(opened, case, ids)
        except Exception as exc:
            for c in checks.values():
                c.fail(f"request store history failed: {_describe(exc)}")
            return

        # -- the request ---------------------------------------------------------------
        ledger = ledger_for(opened, case.namespace)
        report: RequestReport | None = None
        notes: Notes = {}
        try:
            if callable(case.forget):
                report = case.forget(opened, ledger, ids, notes)
            else:
                report = ledger.forget_scope(case.forget)
        except CaseInvalid as exc:
            residue.invalid.append(str(exc))
        except Exception as exc:
            residue.fail(f"the forget request raised {_describe(exc)}")
        if notes:
            info["notes"] = notes
        if report is not None:
            info.update(
                request_id=report.request_id,
                status=report.status,
                erased=len(report.targets) + len(report.cascaded),
                message=_mask(report.message, case.targets),
            )
            if report.status != "completed":
                residue.fail(f"request ended {report.status}, not completed")
            said = report.message + json.dumps(report.to_dict(), default=str)
            for i, target in enumerate(case.targets, 1):
                if _contains(said, target):
                    residue.fail(f"the confirmation repeats target #{i}")
        else:
            info.update(status="no request report")

        # -- 1. target residue ---------------------------------------------------------
        for problem in _target_residue(opened, store, case, carriers):
            residue.fail(problem)
        fresh, problem, answered = _recall_in_new_process(store, case.namespace)
        if not answered:  # a hang says nothing about residue, either way
            residue.unchecked.append(problem)
            collateral.unchecked.append(problem)
        elif fresh is None:
            residue.fail(problem or "new-process recall failed")
        else:
            for i, target in enumerate(case.targets, 1):
                if _contains(fresh, target):
                    residue.fail(f"a new process recalls target #{i}")
        residue.passed_note = (
            f"A recalls {len(case.targets)}/{len(case.targets)} target(s); absent in B from "
            f"{len(case.all_probes)} probe(s) x {len(case.namespaces)} namespace(s), "
            f"get of {len(carriers)} carrier(s), a new process, {_scan_label(store)}"
            + (", the confirmation" if report is not None else "")
        )

        # -- 2. collateral -------------------------------------------------------------
        now = {ns: FULL_RECALL.texts(ledger_for(opened, ns)) for ns in case.namespaces}
        everything = [t for ts in now.values() for t in ts]
        for i, kept in enumerate(case.kept, 1):
            if kept not in everything:
                collateral.fail(f"kept #{i} ({kept!r}) is no longer recalled")
        own_kept = [k for k in case.kept if k in control.texts.get(case.namespace, [])]
        if fresh is not None:
            for kept in own_kept:
                if kept not in fresh:
                    collateral.fail(f"a new process no longer recalls {kept!r}")
        for i in _missing_from_summary(opened, case):
            collateral.fail(f"in_summary #{i} ({case.in_summary[i - 1]!r}) left the summary")
        for ns in case.others:
            if control.built and sorted(now[ns]) != sorted(control.texts[ns]):
                lost = len(set(control.texts[ns]) - set(now[ns]))
                collateral.fail(f"{ns} differs from the control store ({lost} text(s) lost)")
        collateral.passed_note = (
            f"{len(case.kept)}/{len(case.kept)} kept text(s) recalled"
            + (" (own ones in a new process too)" if own_kept and fresh is not None else "")
            + (f"; {len(case.in_summary)} still in the summary" if case.in_summary else "")
            + (f"; {', '.join(case.others)} = control" if case.others else "")
        )

        # -- 3. new writes -------------------------------------------------------------
        new = case.new_value
        if new is None:
            new_writes.not_applicable = "no new value in this case"
        else:
            try:
                ledger.remember(new.write)
                direct = ledger_for(opened, case.namespace).recall(limit=RECALL_LIMIT, **new.recall)
                texts = [m.text or "" for m in direct]
                if new.text not in texts:
                    new_writes.fail(
                        f"the new value is not returned by {recall_by(**new.recall).label}"
                    )
                for i, target in enumerate(case.targets, 1):
                    if any(_contains(t, target) for t in texts):
                        new_writes.fail(f"target #{i} comes back beside the new value")
                for problem in _probe_targets(opened, case):
                    new_writes.fail(problem)
            except Exception as exc:
                new_writes.fail(f"the new value was refused: {_describe(exc)}")
            new_writes.passed_note = (
                f"new value accepted; {recall_by(**new.recall).label} returns it, not the old"
            )

        # -- 4. reappearance -----------------------------------------------------------
        before = {ns: set(FULL_RECALL.texts(ledger_for(opened, ns))) for ns in case.namespaces}
        steps = "consolidation"
        try:
            from memory_ledger.jobs.consolidation import Consolidator

            written, refused = Consolidator(opened.jobs).run_all()
            info["maintenance"] = {"consolidation_written": written, "refused": refused}
            steps = "rebuild"
            service.rebuild()
            steps = "restart"
            closing, service = service, None
            closing.close()
            service = store.open()
            opened = CaseStore.of(service)
        except Exception as exc:
            reappearance.fail(f"{steps} failed: {_describe(exc)}")
        else:
            for problem in _target_residue(opened, store, case, carriers):
                reappearance.fail(problem)
            after = {ns: FULL_RECALL.texts(ledger_for(opened, ns)) for ns in case.namespaces}
            for ns in case.namespaces:
                lost = before[ns] - set(after[ns])
                if lost:
                    reappearance.fail(f"{len(lost)} text(s) of {ns} no longer recalled")
            remembered = [t for ts in after.values() for t in ts] + _history_texts(opened, case)
            for i, kept in enumerate(case.kept, 1):
                if kept not in remembered:
                    reappearance.fail(f"kept #{i} ({kept!r}) is gone")
            for i in _missing_from_summary(opened, case):
                reappearance.fail(f"in_summary #{i} ({case.in_summary[i - 1]!r}) is gone")
            if new is not None and new.text not in after[case.namespace]:
                reappearance.fail("the new value is no longer recalled")
            reappearance.passed_note = (
                f"consolidation, rebuild, restart: no target (probes, get, {_scan_label(store)});"
                " nothing recalled before was lost"
            )
    finally:
        if service is not None:
            service.close()


# -- observations ------------------------------------------------------------------------


def ledger_for(opened: CaseStore, namespace: str) -> MemoryLedger:
    return opened.ledger(namespace)


def _probe_all(opened: CaseStore, case: Case) -> dict[tuple[str, str], list[str]]:
    return {
        (ns, probe.label): probe.texts(ledger_for(opened, ns))
        for ns in case.namespaces
        for probe in case.all_probes
    }


def _probe_targets(opened: CaseStore, case: Case) -> list[str]:
    problems = []
    for (ns, label), texts in _probe_all(opened, case).items():
        for i, target in enumerate(case.targets, 1):
            if any(_contains(t, target) for t in texts):
                where = label if ns == case.namespace else f"{label} of {ns}"
                problems.append(f"{where} returns target #{i}")
    return problems


def _missing_from_summary(opened: CaseStore, case: Case) -> list[int]:
    """Indexes of the case's `in_summary` texts its namespace's summary no longer holds."""
    text = "".join(SUMMARY.texts(ledger_for(opened, case.namespace)))
    return [i for i, wanted in enumerate(case.in_summary, 1) if wanted not in text]


def _history_texts(opened: CaseStore, case: Case) -> list[str]:
    """Every version of every fact of the case's namespaces (kept texts a new value
    legitimately moved to history are still remembered there)."""
    out = []
    for ns in case.namespaces:
        ledger = ledger_for(opened, ns)
        keys = {(m.subject, m.predicate) for m in ledger.recall(kind="fact", limit=RECALL_LIMIT)}
        for subject, predicate in sorted(keys):
            out += history_of(predicate, subject).texts(ledger)
    return out


@dataclass(frozen=True)
class _Carrier:
    namespace: str
    item_id: str
    kind: str


def _carriers(opened: CaseStore, case: Case, ids: Ids) -> list[_Carrier]:
    """Items of B whose content (any version) holds a target, found before the request:
    afterwards `get` and `history` of each must not give it back."""
    from sqlalchemy import select

    from memory_ledger.projections.catalog import catalog

    candidates: dict[str, str] = {}  # item id -> namespace
    with opened.jobs.engine.connect() as conn:
        rows = conn.execute(
            select(catalog.c.item_id, catalog.c.namespace).where(
                catalog.c.namespace.in_(case.namespaces)
            )
        ).all()
    candidates.update({item_id: ns for item_id, ns in rows})
    for ns in case.namespaces:
        for m in ledger_for(opened, ns).recall(limit=RECALL_LIMIT):
            candidates.setdefault(m.item_id, ns)
    for item_id in ids.values():
        candidates.setdefault(str(item_id), case.namespace)
    out = []
    for item_id, ns in sorted(candidates.items()):
        ledger = ledger_for(opened, ns)
        state = ledger.get(item_id)
        texts = [state.text or ""]
        if state.kind == "fact":
            texts += [m.text or "" for m in ledger.history(item_id)]
        if any(_contains(t, target) for t in texts for target in case.targets):
            out.append(_Carrier(ns, item_id, state.kind))
    return out


def _target_residue(
    opened: CaseStore, store: _Store, case: Case, carriers: list[_Carrier]
) -> list[str]:
    problems = _probe_targets(opened, case)
    for carrier in carriers:
        ledger = ledger_for(opened, carrier.namespace)
        try:
            state = ledger.get(carrier.item_id)
        except Exception as exc:
            problems.append(f"get of item {carrier.item_id[:8]} failed: {_describe(exc)}")
            continue
        texts = [state.text or ""]
        if carrier.kind == "fact":
            texts += [m.text or "" for m in ledger.history(carrier.item_id)]
        for i, target in enumerate(case.targets, 1):
            if any(_contains(t, target) for t in texts):
                problems.append(f"get/history of item {carrier.item_id[:8]} returns target #{i}")
    if store.settings.postgres is None:
        for i, path in _byte_scan(store.settings.data_dir, case.targets):
            problems.append(f"bytes of target #{i} remain in {path.name}")
    else:
        for i, table in _row_scan(store.settings, case.targets):
            problems.append(f"target #{i} remains in a row of {table}")
    return problems


def _byte_scan(data_dir: Path, targets: Sequence[str]) -> list[tuple[int, Path]]:
    """(target index, file) for every file under data_dir holding a target's UTF-8 bytes."""
    needles = needles_for(targets)
    index = {needle: targets.index(needle.decode()) + 1 for needle in needles}
    paths = files_under(data_dir)
    return [(index[needles[f.needle_index]], Path(f.path)) for f in scan(paths, needles)]


def _scan_blind_to(scratch: Path, targets: Sequence[str]) -> list[int]:
    """Indexes of targets the byte scan misses in a file written to hold them all."""
    probe = scratch / f"scan-probe-{uuid.uuid4().hex}"
    probe.mkdir()
    try:
        (probe / "targets").write_text("\n".join(targets), encoding="utf-8")
        seen = {i for i, _ in _byte_scan(probe, targets)}
    finally:
        for path in probe.iterdir():
            path.unlink()
        probe.rmdir()
    return [i for i in range(1, len(targets) + 1) if i not in seen]


def _row_scan(settings: Settings, targets: Sequence[str]) -> list[tuple[int, str]]:
    """PostgreSQL: every live row of the store's schemas, as text, searched for a target
    (plain, and hex as bytea renders it). Dead tuples are the server's VACUUM's job."""
    pg = settings.postgres
    assert pg is not None
    schemas = [pg.schema, pg.schema + "_ledger"]
    found = []
    with settings._pg_connect() as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema = ANY(%s) AND table_type = 'BASE TABLE' ORDER BY 1, 2",
            (schemas,),
        ).fetchall()
        for schema, table in tables:
            name = f'"{schema}"."{table}"'
            for i, target in enumerate(targets, 1):
                raw = target.encode()
                (count,) = conn.execute(
                    f"SELECT count(*) FROM {name} AS r "  # identifiers from the catalog
                    "WHERE strpos(lower(r::text), %s) > 0 OR strpos(r::text, %s) > 0",
                    (target.lower(), raw.hex()),
                ).fetchone()
                if count:
                    found.append((i, f"{schema}.{table}"))
    return found


def _scan_label(store: _Store) -> str:
    if store.settings.postgres is None:
        return f"bytes of {len(files_under(store.settings.data_dir))} file(s)"
    return "rows of every table"


def _recall_in_new_process(store: _Store, namespace: str) -> tuple[str | None, str, bool]:
    """`memory-ledger recall --json` in a fresh interpreter: (stdout, "", True); (None,
    problem, True) if it failed; (None, why, False) if it gave no answer within
    NEW_PROCESS_SECONDS (hung: nothing is known)."""
    env = {k: v for k, v in os.environ.items() if k not in (URL_ENV, DATA_DIR_ENV)}
    env.pop("MEMORY_LEDGER_NAMESPACE", None)
    env["PYTHONIOENCODING"] = "utf-8"
    if store.url and store.settings.postgres is not None:
        env[URL_ENV] = store.url  # not on the command line: it may carry a password
    command = [
        sys.executable,
        "-m",
        "memory_ledger.cli",
        "recall",
        "--namespace",
        namespace,
        "--data-dir",
        str(store.settings.data_dir),
        "--limit",
        str(RECALL_LIMIT),
        "--json",
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, encoding="utf-8", env=env, timeout=NEW_PROCESS_SECONDS
        )
    except subprocess.TimeoutExpired:
        why = f"the new-process recall gave no answer within {NEW_PROCESS_SECONDS:g} s"
        return None, why, False
    if done.returncode != 0:
        return None, f"new-process recall exited {done.returncode}", True
    try:
        json.loads(done.stdout)
    except ValueError:
        return None, "new-process recall printed no JSON", True
    return done.stdout, "", True


def _contains(text: str, target: str) -> bool:
    return target.casefold() in text.casefold()


def _mask(text: str, targets: Sequence[str]) -> str:
    for i, target in enumerate(targets, 1):
        text = re.sub(re.escape(target), f"[target #{i}]", text, flags=re.IGNORECASE)
    return text


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:160]}"


# -- rendering ---------------------------------------------------------------------------


def render_table(results: Sequence[CaseResult]) -> Table:
    """Case x the four results, each PASS/FAIL with its reason. No aggregate score."""
    table = Table(title="deletion acceptance (A = control, B = request applied)", show_lines=True)
    table.add_column("case", overflow="fold", max_width=24)
    for name in RESULT_NAMES:
        table.add_column(name, overflow="fold")
    styles = {
        PASS: "green",
        FAIL: "bold red",
        INVALID: "bold yellow",
        COULD_NOT_CHECK: "bold magenta",
        NOT_APPLICABLE: "dim",
    }
    for result in results:
        cells = []
        for name in RESULT_NAMES:
            r = result[name]
            cell = Text(r.status.replace("_", " ").upper(), style=styles.get(r.status, ""))
            cell.append("\n" + r.reason, style="dim" if r.ok else "")
            cells.append(cell)
        label = Text(result.case, style="bold")
        if result.request.get("status"):
            label.append(f"\nrequest: {result.request['status']}", style="dim")
        table.add_row(label, *cells)
    return table


def results_json(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in results]


def all_passed(results: Sequence[CaseResult]) -> bool:
    return bool(results) and all(r.passed for r in results)


def overall(results: Sequence[CaseResult]) -> str:
    """The run's outcome: failed if any case failed; else could_not_check if any case
    has a result that could not be checked; else passed (no cases: failed)."""
    outcomes = {r.outcome for r in results}
    if not results or FAILED in outcomes:
        return FAILED
    return UNCHECKED if UNCHECKED in outcomes else PASSED
