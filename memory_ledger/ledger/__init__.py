"""The lifecycle ledger: an append-only, hash-chained record of deletion requests.

Why separate: the ledger is the evidence that a deletion happened. It must outlive a
restore of the memory store (restore replays the tombstones recorded here), so it is
never in the store's backups and never rewritten with it. It lives in its own SQLite
file (`ledger.sqlite`: not events.sqlite, not projections.sqlite), in its own PostgreSQL
schema (`<schema>_ledger`), or wherever an explicit `ledger_url` points.

Why no content: a deletion record that repeats what was deleted undoes the deletion, and
an unkeyed hash of a short text (an address, a phone number) is confirmed by guessing.
So every payload passes a per-type model that admits identifiers, UUIDs, counts, flags,
canonical timestamps and fixed codes only. Free text is refused with `InvalidWrite`
before anything is written, and `verify` re-validates every stored payload.

Why a chain: each entry's hash covers its predecessor's hash, its seq and its fields, so
changing, removing, inserting or reordering a row breaks the chain at that row. The
database itself refuses UPDATE and DELETE (and TRUNCATE) by trigger; `verify` catches
what a privileged user does around the triggers. Removing the newest entries leaves a
valid shorter chain: that is visible only against a head recorded earlier, which is why
`AuditResult` carries `head_seq`/`head_hash` and `verify` takes them back as `anchor`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from uuid import UUID, uuid4

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from memory_ledger.config import Settings
from memory_ledger.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidWrite,
    MemoryLedgerError,
    field_message,
)
from memory_ledger.identifiers import PLAN_ID, Identifier, Namespace, is_identifier, is_namespace
from memory_ledger.ledger.storage import (  # re-exported: part of this module's API
    COLUMNS,
    GENESIS_HASH,
    LEDGER_FILE,
    SCHEMA_SUFFIX,
    TABLE,
    first_line,
    open_backend,
)
from memory_ledger.times import Timestamp, canonical_time
from memory_ledger.write_policy import Sensitivity

__all__ = [
    "AUDIT_REASONS",
    "GENESIS_HASH",
    "LEDGER_FILE",
    "PAYLOAD_MODELS",
    "SCHEMA_SUFFIX",
    "TABLE",
    "AuditResult",
    "EntryType",
    "LedgerEntry",
    "LifecycleLedger",
    "canonical_payload",
    "entry_hash",
]


class EntryType(StrEnum):
    REQUEST = "request"
    RESOLVED = "resolved"
    NEEDS_CLARIFICATION = "needs_clarification"
    TOMBSTONE = "tombstone"
    RECEIPT = "receipt"
    STATUS = "status"
    REFUSAL = "refusal"
    #: An operator's acknowledgement that the ledger lost entries (`memory-ledger doctor
    #: --acknowledge-ledger-loss`): it starts an id of its own, never a request's.
    RECOVERY = "recovery"
    #: A request that hit a legal hold: nothing was erased (status `blocked`).
    BLOCKED = "blocked"
    #: A legal hold placed (starts an id of its own, `hold-...`) and later lifted.
    HOLD = "hold"
    HOLD_LIFTED = "hold_lifted"
    #: A retention policy version installed (`policy-v<version>`).
    POLICY = "policy"
    #: A restore from a backup, with what it replayed (`restore-...`).
    RESTORE = "restore"
    #: A restore abandoned before it opened (`restore --abort`), under the restore's id.
    RESTORE_ABORTED = "restore_aborted"
    #: A backup taken (its id starts the entry's id) and, later, destroyed.
    BACKUP = "backup"
    BACKUP_DESTROYED = "backup_destroyed"
    #: A restore drill and its outcome (`drill-...`).
    DRILL = "drill"
    #: A subscriber that keeps copies registered (`sub-<name>`), and later retired.
    SUBSCRIBER = "subscriber"
    SUBSCRIBER_RETIRED = "subscriber_retired"
    #: A subscriber's acknowledgement that it dropped a request's targets (or, when it
    #: was retired with the acknowledgement pending, the operator's receipt saying so).
    ACK = "ack"
    #: The key that signs the ledger's tree heads (memory_ledger/audit), recorded when it
    #: is first used and whenever it changes (`audit-key-<n>`): its id, never the key.
    AUDIT_KEY = "audit_key"
    #: A master-key rotation finished (`keyrot-...`): which key replaced which (their
    #: ids, never the keys), how many data keys and backups were rewrapped, and who.
    KEY_ROTATION = "key_rotation"


#: Entry types that start an id of their own; every other type follows one of these.
_FIRST_TYPES = (
    EntryType.REQUEST,
    EntryType.RECOVERY,
    EntryType.HOLD,
    EntryType.POLICY,
    EntryType.RESTORE,
    EntryType.RESTORE_ABORTED,
    EntryType.BACKUP,
    EntryType.DRILL,
    EntryType.SUBSCRIBER,
    EntryType.AUDIT_KEY,
    EntryType.KEY_ROTATION,
)


# -- what a payload may hold ---------------------------------------------------------------

_DIGEST = re.compile(r"[0-9A-Fa-f]{40,}")


def _not_a_digest(value: str) -> str:
    # A SHA-1/SHA-2 hex digest fits identifier syntax; refusing it keeps a hash of
    # content (confirmable by guessing) out of identifier fields. 32 hex digits stay
    # allowed: they are indistinguishable from a UUID.
    if _DIGEST.search(value):
        raise ValueError("looks like a hash (40+ hex digits); the ledger keeps no hashes")
    return value


_CODE = re.compile(r"[a-z][a-z0-9_.:\-]{0,63}")


def _code(value: object) -> str:
    if not (isinstance(value, str) and _CODE.fullmatch(value)):
        raise ValueError("not a code: lower-case letters, digits and _.:- , at most 64")
    return value


def _actor(value: object) -> str:
    if not (is_identifier(value) or is_namespace(value)):
        raise ValueError("not an actor: an identifier or a namespace (tenant/user)")
    return value  # type: ignore[return-value]


# The identifier and namespace definitions are the write boundary's own (one definition,
# full-string matches): whatever a write accepts, the ledger can record a forget of.
LedgerId = Annotated[Identifier, AfterValidator(_not_a_digest)]
Code = Annotated[str, BeforeValidator(_code), AfterValidator(_not_a_digest)]
LedgerNamespace = Annotated[Namespace, AfterValidator(_not_a_digest)]
Actor = Annotated[str, BeforeValidator(_actor), AfterValidator(_not_a_digest)]
Count = Annotated[int, Field(strict=True, ge=0)]
Position = Annotated[int, Field(strict=True, ge=1)]
EvidenceValue = StrictBool | StrictInt | LedgerId
ScopeKind = Literal[
    "item", "predicate", "source", "category", "sensitivity", "time_range", "namespace", "redaction"
]
RequestStatus = Literal[
    "pending",
    "partial",
    "completed",
    "needs_clarification",
    "refused",
    "dry_run",
    "nothing_matched",
    "blocked",
]
Basis = Literal["user_request", "retention_expiry", "session_end", "operator_request"]
RefusalReason = Literal[
    "namespace_mismatch",
    "not_found",
    "invalid_scope",
    "consent_required",
    "protected",
    "duplicate_request",
    "unauthorized",
    "projection_mismatch",
    "interrupted",
    "legal_hold",
]

_SCOPE_PARAMETERS: dict[str, tuple[str, ...]] = {
    "item": ("item_ids",),
    "predicate": ("subject", "predicate", "which", "value_filter"),
    "source": ("turn_id", "session_id", "tool_call_id"),
    "category": ("category",),
    "sensitivity": ("sensitivity",),
    "time_range": ("since", "until"),
    "namespace": (),
    "redaction": ("item_ids", "spans", "fields"),
}


class _Payload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerScope(_Payload):
    """A resolved-to-be scope as recorded: the parameters of its kind, identifiers only."""

    kind: ScopeKind
    item_ids: tuple[UUID, ...] | None = None
    subject: LedgerId | None = None
    predicate: LedgerId | None = None
    which: Literal["all", "current", "previous"] | None = None
    turn_id: LedgerId | None = None
    session_id: LedgerId | None = None
    tool_call_id: LedgerId | None = None
    category: LedgerId | None = None
    sensitivity: Sensitivity | None = None
    since: Timestamp | None = None
    until: Timestamp | None = None
    spans: Count | None = None  # a redaction: how many spans, never which
    fields: tuple[Literal["value", "content"], ...] | None = None
    #: A predicate scope narrowed to one item by its value. Only that a value was given
    #: is recorded, never the value: it is the content being forgotten.
    value_filter: Literal[True] | None = None

    @model_validator(mode="after")
    def _parameters_fit_kind(self) -> LedgerScope:
        allowed = _SCOPE_PARAMETERS[self.kind]
        given = {n for n in self.model_fields_set - {"kind"} if getattr(self, n) not in (None, ())}
        if given - set(allowed):
            raise ValueError(
                f"a scope of kind {self.kind} takes only: {', '.join(allowed) or 'nothing'}"
            )
        if self.kind == "predicate" and not (self.subject and self.predicate):
            raise ValueError("a predicate scope needs subject and predicate")
        if allowed and not given:
            raise ValueError(f"a scope of kind {self.kind} needs one of: {', '.join(allowed)}")
        return self


class RequestPayload(_Payload):
    """A deletion request as filed: whose, what scope, by whom, and on what basis."""

    request_id: LedgerId | None = None  # optional echo; must equal the entry's request id
    namespace: LedgerNamespace
    scope: LedgerScope
    requested_by: Actor
    dry_run: StrictBool = False
    basis: Basis = "user_request"
    #: The confirmed plan (forgetting/planning) this request executes, if any.
    plan_id: Annotated[str, StringConstraints(pattern=PLAN_ID.pattern)] | None = None


class ResolvedPayload(_Payload):
    """The explicit target set a scope resolved to, plus what cascades from it."""

    targets: tuple[UUID, ...]
    cascaded: tuple[UUID, ...] = ()
    history: tuple[UUID, ...] | None = None  # items kept, whose earlier versions go
    mentions: tuple[UUID, ...] | None = None  # items kept, repeating a target: redacted
    counts: dict[Code, Count] | None = None
    #: The cut: when the scope was resolved and the event-log position it was read at.
    #: Items written at or before `position` are resolved; later writes are not.
    resolved_at: Timestamp | None = None
    position: Count | None = None


class NeedsClarificationPayload(_Payload):
    """The scope was ambiguous: the candidates, by id. Nothing was erased."""

    candidates: Annotated[tuple[UUID, ...], Field(min_length=1)]


class TombstonePayload(_Payload):
    """An item's tombstone and its log position: restore replays these after a restore point."""

    item_id: UUID
    position: Position


class ReceiptPayload(_Payload):
    """What one store did and what it checked. Evidence is codes or code -> id/count/flag."""

    store: Code
    action: Code
    targets: Count
    status: Literal["ok", "failed"]
    evidence: tuple[Code, ...] | dict[Code, EvidenceValue] = {}
    attempt: Position = 1


class StatusPayload(_Payload):
    """Where the request stands; only `completed` means done everywhere."""

    status: RequestStatus
    failed_stores: tuple[Code, ...] = ()

    @model_validator(mode="after")
    def _failed_stores_fit(self) -> StatusPayload:
        if self.status == "partial" and not self.failed_stores:
            raise ValueError("a partial status names its failed stores")
        if self.status == "completed" and self.failed_stores:
            raise ValueError("a completed status has no failed stores")
        return self


class RefusalPayload(_Payload):
    """Why a request was refused, as a fixed code: never the caller's words."""

    reason: RefusalReason
    #: The items concerned (for projection_mismatch: those the log did not confirm).
    items: tuple[UUID, ...] | None = None


class RecoveryPayload(_Payload):
    """The ledger was found empty, or missing tombstones, beside a log that holds them,
    and an operator accepted the loss rather than restore the ledger from its own backup.
    Tombstones at log positions up to `log_position` that no entry explains are no longer
    reported by the consistency check; this entry is what explains them. Counts only."""

    action: Literal["ledger_loss_acknowledged"]
    log_position: Count
    tombstones_unexplained: Count
    ledger_was_empty: StrictBool
    acknowledged_by: Actor


class BlockedPayload(_Payload):
    """A request stopped by legal holds before anything was erased: which holds, and
    which of its items they cover. Lifting the holds resumes it."""

    holds: Annotated[tuple[LedgerId, ...], Field(min_length=1)]
    items: tuple[UUID, ...]


class HoldPayload(_Payload):
    """A legal hold: nothing in its scope is erased (not by a user's request, not by
    retention) until it is lifted. The reason is a code (a case number), never prose."""

    name: LedgerId
    reason: Code
    namespace: LedgerNamespace | LedgerId  # a namespace, or a tenant (all of its namespaces)
    category: LedgerId | None = None
    predicate: LedgerId | None = None
    placed_by: Actor


class HoldLiftedPayload(_Payload):
    name: LedgerId
    lifted_by: Actor


class PolicyPayload(_Payload):
    """A retention policy version installed: its number, size and a short fingerprint
    of its text (the policy is configuration, not personal data), and what it changed
    at installation."""

    version: Position
    fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    classes: Count
    installed_by: Actor
    counts: dict[Code, Count] | None = None


class RestorePayload(_Payload):
    """A restore from a backup: which backup and restore point, what the replay erased
    again, and that every replayed erasure verified before the store served a read."""

    backup_id: LedgerId
    restore_position: Count
    tombstones_replayed: Count
    items_erased_again: Count
    kept_items_erased: Count  # rewritten after the backup: erased, never served old
    #: Keys of derived artifacts destroyed again: every keyword-index key (the index is
    #: rebuilt under new ones) and the fingerprints of closed verification windows.
    derived_keys_destroyed: Count = 0
    projections_rebuilt: StrictBool
    verified: StrictBool
    restored_by: Actor
    #: Only when the backup was taken by another store and the operator said so
    #: (`restore --accept-foreign`): that store's id (for a backup older than store ids
    #: that nothing binds to this store, the backup's id).
    foreign_accepted: LedgerId | None = None


class RestoreAbortedPayload(_Payload):
    """A restore abandoned before it opened (`restore --abort`): the store it had
    replaced is put back (`put_back`), or it had replaced nothing yet."""

    backup_id: LedgerId
    put_back: StrictBool
    aborted_by: Actor


class BackupPayload(_Payload):
    """A backup taken: its restore point and the date backup retention destroys it."""

    backup_id: LedgerId
    restore_position: Count
    expires_at: Timestamp
    taken_by: Actor


class BackupDestroyedPayload(_Payload):
    backup_id: LedgerId
    reason: Literal["retention_expiry", "operator_request"]


class DrillPayload(_Payload):
    """A restore drill: which backup, what it replayed and checked, and the outcome."""

    backup_id: LedgerId
    restore_position: Count
    items_erased_again: Count
    erasures_checked: Count
    files_scanned: Count
    requests_scanned: Count
    retained_sampled: Count
    #: Items sampled per state (restore/serving.py), each held to what it promises.
    states: dict[
        Literal["current", "superseded", "suppressed", "archived", "expired", "erased"], Count
    ] = Field(default_factory=dict)
    findings: Count
    outcome: Literal["passed", "failed"]
    run_by: Actor


class SubscriberPayload(_Payload):
    """A subscriber that keeps copies of the namespaces it names (a namespace covers its
    sub-namespaces; a tenant, all of its namespaces), and the hours it has to
    acknowledge an erasure before the request shows it overdue."""

    name: Code
    namespaces: Annotated[tuple[LedgerNamespace | LedgerId, ...], Field(max_length=1000)]
    deadline_hours: Annotated[int, Field(strict=True, ge=1, le=24 * 366)]
    added_by: Actor
    #: A host's vector index (memory_ledger/feed/hosts.py): a copy of every namespace.
    every_namespace: StrictBool = False

    @model_validator(mode="after")
    def _holds_something(self) -> SubscriberPayload:
        if not self.namespaces and not self.every_namespace:
            raise ValueError("a subscriber holds at least one namespace")
        return self


class SubscriberRetiredPayload(_Payload):
    name: Code
    retired_by: Actor


class AckPayload(_Payload):
    """A subscriber dropped a request's targets (`by` is the subscriber), or was retired
    before it did (`retired`: `by` is the operator, and nothing was confirmed)."""

    subscriber: Code
    targets: Count
    by: Actor
    retired: StrictBool = False


class AuditKeyPayload(_Payload):
    """The Ed25519 key that signs tree heads from now on: its id (the first 32 hex digits
    of SHA-256 of the public key), how it is kept, and the key it replaces, if any."""

    key_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    algorithm: Literal["ed25519"]
    source: Literal["master_key"]
    replaces: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")] | None = None
    recorded_by: Actor


MasterKeyId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


class KeyRotationPayload(_Payload):
    """A master-key rotation, once finished: the ids of the old and new master keys (the
    first 32 hex digits of each key's check value, `key_rotation.master_key_id`), the
    live data keys rewrapped under the new one, the destroyed ones left destroyed, the
    backups rewrapped (and those that could not be, and so became unreadable), and
    whether the old key's material was destroyed here (a development key file) or is
    the operator's to destroy (a key given in the environment). Counts and ids only."""

    old_key_id: MasterKeyId
    new_key_id: MasterKeyId
    keys_rewrapped: Count
    keys_verified: Count
    destroyed_keys_left: Count
    backups_rewrapped: Count
    backups_not_rewrapped: Count
    old_key_material: Literal["destroyed", "held_by_operator"]
    #: Files under the data directory found holding the old key's bytes after it was
    #: destroyed (0 expected); absent when the search could not run (a resumed rotation
    #: whose old key had already been overwritten).
    old_key_files_found: Count | None = None
    rotated_by: Actor


PAYLOAD_MODELS: dict[EntryType, type[_Payload]] = {
    EntryType.REQUEST: RequestPayload,
    EntryType.RESOLVED: ResolvedPayload,
    EntryType.NEEDS_CLARIFICATION: NeedsClarificationPayload,
    EntryType.TOMBSTONE: TombstonePayload,
    EntryType.RECEIPT: ReceiptPayload,
    EntryType.STATUS: StatusPayload,
    EntryType.REFUSAL: RefusalPayload,
    EntryType.RECOVERY: RecoveryPayload,
    EntryType.BLOCKED: BlockedPayload,
    EntryType.HOLD: HoldPayload,
    EntryType.HOLD_LIFTED: HoldLiftedPayload,
    EntryType.POLICY: PolicyPayload,
    EntryType.RESTORE: RestorePayload,
    EntryType.RESTORE_ABORTED: RestoreAbortedPayload,
    EntryType.BACKUP: BackupPayload,
    EntryType.BACKUP_DESTROYED: BackupDestroyedPayload,
    EntryType.DRILL: DrillPayload,
    EntryType.SUBSCRIBER: SubscriberPayload,
    EntryType.SUBSCRIBER_RETIRED: SubscriberRetiredPayload,
    EntryType.ACK: AckPayload,
    EntryType.AUDIT_KEY: AuditKeyPayload,
    EntryType.KEY_ROTATION: KeyRotationPayload,
}
_REQUEST_ID: TypeAdapter[str] = TypeAdapter(LedgerId)


# -- records -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerEntry:
    """One stored entry. `payload_json` is the exact canonical text the hash covers."""

    seq: int
    request_id: str
    entry_type: EntryType
    payload_json: str
    recorded_at: str
    prev_hash: str
    entry_hash: str

    @property
    def payload(self) -> dict[str, Any]:
        """A fresh dict each time, so the entry itself stays immutable."""
        return dict(json.loads(self.payload_json))


AUDIT_REASONS = {
    "seq_gap": "seqs are not 1, 2, 3, ...: an entry was removed, or one was renumbered",
    "prev_hash_mismatch": "the entry does not link to its predecessor: rows were inserted, "
    "removed, reordered, or prev_hash was forged",
    "entry_hash_mismatch": "the entry's fields do not produce its stored hash: its payload, "
    "ids, time, seq or hash were changed",
    "invalid_entry": "the entry's type, request id or payload is not one the ledger accepts",
    "truncated": "the chain ends before the anchor: newest entries were removed",
    "anchor_mismatch": "the entry at the anchor's seq is not the one recorded earlier",
}


@dataclass(frozen=True)
class AuditResult:
    """The outcome of `verify`. `head_seq`/`head_hash` are the last entry that verified:
    keep them outside the ledger and pass them back as `anchor` to detect truncation."""

    ok: bool
    entries_checked: int  # entries that verified (all of them when ok)
    first_bad_seq: int | None = None  # where the chain first breaks (a gap: the first missing)
    reason: str | None = None  # a key of AUDIT_REASONS
    head_seq: int = 0
    head_hash: str = GENESIS_HASH
    location: str = ""

    @property
    def explanation(self) -> str:
        if self.ok:
            return f"{self.entries_checked} entries verified"
        return f"seq {self.first_bad_seq}: {AUDIT_REASONS.get(self.reason or '', self.reason)}"


def entry_hash(
    prev_hash: str, seq: int, request_id: str, entry_type: str, recorded_at: str, payload: str
) -> str:
    """The chain link. Identifiers and codes only: no field can hold memory content."""
    text = "\n".join((prev_hash, str(seq), request_id, entry_type, recorded_at, payload))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_payload(entry_type: EntryType | str, payload: Mapping[str, Any]) -> str:
    """Validate a payload for its entry type and return the canonical JSON that is stored.

    Raises InvalidWrite (naming fields, never echoing values) when anything in it is not
    an identifier, UUID, count, flag, canonical timestamp or known code.
    """
    kind = _entry_type(entry_type)
    if not isinstance(payload, Mapping):
        raise InvalidWrite(f"a {kind} payload must be a mapping; nothing was appended")
    try:
        model = PAYLOAD_MODELS[kind].model_validate(dict(payload))
    except ValidationError as exc:
        raise InvalidWrite.listing(
            f"invalid {kind} entry for the lifecycle ledger; nothing was appended",
            _problems(exc),
        ) from None
    data = model.model_dump(mode="json", exclude_none=True)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# -- the ledger ----------------------------------------------------------------------------


class LifecycleLedger:
    """The append-only, hash-chained record of deletion requests.

    Thread-safe (one lock around one connection); appends are serialised across
    processes by the database (SQLite BEGIN IMMEDIATE; PostgreSQL LOCK TABLE), so seq
    and the chain never fork.
    """

    def __init__(self, settings: Settings, ledger_url: str | None = None) -> None:
        self._lock = threading.RLock()
        self._db = open_backend(settings, ledger_url)
        self._store_id = self._identity()

    @property
    def store_id(self) -> str:
        """The id of the store this ledger belongs to (`st-...`), made once, when the
        ledger is first opened (a ledger older than store ids gets one then). It lives
        with the ledger, not in the event store, because the ledger is the part of a
        store a restore never replaces and cannot run without: every backup names it in
        its signed manifest, and a restore refuses a backup that names another store."""
        return self._store_id

    def _identity(self) -> str:
        read = f"SELECT store_id FROM {self._db.identity} WHERE id = 1"
        with self._lock, self._guard("open"):
            rows = self._db.read(read, ())
            if not rows:  # INSERT ... DO NOTHING: concurrent first opens agree on one id
                with self._db.write() as cur:
                    cur.execute(
                        f"INSERT INTO {self._db.identity} (id, store_id) "
                        f"VALUES (1, {self._db.param}) ON CONFLICT (id) DO NOTHING",
                        (f"st-{uuid4().hex[:16]}",),
                    )
                rows = self._db.read(read, ())
        return str(rows[0][0])

    @property
    def location(self) -> str:
        """Where the ledger lives, for people: a file path or a masked URL and schema."""
        return self._db.location

    def append(
        self, request_id: str, entry_type: EntryType | str, payload: Mapping[str, Any]
    ) -> LedgerEntry:
        """Validate, then append one entry atomically at the end of the chain.

        A request starts with its `request` entry (recorded once); every other entry
        type needs that entry first, so the ledger never holds orphaned receipts.
        """
        return self.append_many(request_id, [(entry_type, payload)])[0]

    def append_many(
        self,
        request_id: str,
        entries: Sequence[tuple[EntryType | str, Mapping[str, Any]]],
    ) -> list[LedgerEntry]:
        """Append several entries of one request in one transaction: all or none.

        A fan-out's receipts and final status go together, so the ledger never shows a
        status without the receipts that decided it, and pays one commit, not eleven.
        Every entry is validated before anything is written.
        """
        rid = _request_id(request_id)
        bodies: list[tuple[EntryType, str]] = []
        for entry_type, payload in entries:
            kind = _entry_type(entry_type)
            body = canonical_payload(kind, payload)
            if kind is EntryType.REQUEST and json.loads(body).get("request_id", rid) != rid:
                raise InvalidWrite(
                    "the payload's request_id differs from the entry's; nothing was appended"
                )
            bodies.append((kind, body))
        if [k for k, _ in bodies[1:] if k in _FIRST_TYPES]:
            raise InvalidWrite("a request entry must be the first of its request")
        db, t, p = self._db, self._db.table, self._db.param
        written: list[LedgerEntry] = []
        with self._lock, self._guard("append to"), db.write() as cur:
            if bodies:
                self._check_order(cur, rid, bodies[0][0])
            last = cur.execute(f"SELECT seq, entry_hash FROM {t} ORDER BY seq DESC LIMIT 1")
            row = last.fetchone()
            seq, prev = (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)
            at = canonical_time(datetime.now(UTC))  # taken under the lock: time follows seq
            for kind, body in bodies:
                seq += 1
                digest = entry_hash(prev, seq, rid, kind.value, at, body)
                cur.execute(
                    f"INSERT INTO {t} ({COLUMNS}) VALUES ({', '.join([p] * 7)})",
                    (seq, rid, kind.value, body, at, prev, digest),
                )
                written.append(LedgerEntry(seq, rid, kind, body, at, prev, digest))
                prev = digest
        return written

    def copy_from(self, source: LifecycleLedger) -> int:
        """Write every entry of `source`, verbatim, into this ledger, which must be empty:
        a restore drill's scratch copy, which the drill's restore writes into instead of
        the live ledger. The chain triggers check every link as it is inserted, and the
        copy verifies exactly as the source does. The copy takes the source's store id
        too: it is the same store's ledger. Returns the entries copied."""
        if not self.is_empty():
            raise ConfigurationError(
                f"the ledger at {self.location} is not empty; nothing was copied"
            )
        rows = source.entries()
        db, t, p = self._db, self._db.table, self._db.param
        with self._lock, self._guard("copy into"), db.write() as cur:
            for e in rows:
                cur.execute(
                    f"INSERT INTO {t} ({COLUMNS}) VALUES ({', '.join([p] * 7)})",
                    (
                        e.seq,
                        e.request_id,
                        e.entry_type.value,
                        e.payload_json,
                        e.recorded_at,
                        e.prev_hash,
                        e.entry_hash,
                    ),
                )
            cur.execute(f"UPDATE {db.identity} SET store_id = {p} WHERE id = 1", (source.store_id,))
        self._store_id = source.store_id
        return len(rows)

    def entries(self, request_id: str | None = None) -> list[LedgerEntry]:
        """Entries in chain order, all of them or one request's."""
        sql = f"SELECT {COLUMNS} FROM {self._db.table}"
        params: tuple[Any, ...] = ()
        if request_id is not None:
            if not is_identifier(request_id):
                return []  # no request has such an id: the ledger only records identifiers
            sql += f" WHERE request_id = {self._db.param}"
            params = (request_id,)
        with self._lock, self._guard("read"):
            rows = self._db.read(sql + " ORDER BY seq", params)
        return [_entry(row) for row in rows]

    def chain_hashes(self, after: int = 0) -> list[tuple[int, str]]:
        """(seq, entry_hash) of every entry after seq `after`, in chain order: the leaves
        of the ledger's Merkle tree (memory_ledger/audit), read without any payload."""
        t, p = self._db.table, self._db.param
        sql = f"SELECT seq, entry_hash FROM {t} WHERE seq > {p} ORDER BY seq"
        with self._lock, self._guard("read"):
            return [(int(seq), str(digest)) for seq, digest in self._db.read(sql, (after,))]

    def entries_after(self, seq: int, limit: int) -> list[LedgerEntry]:
        """Up to `limit` entries after seq `seq`, in chain order: how a reader that folds
        the ledger as it grows (the compliance console's summary) reads only what is new."""
        t, p = self._db.table, self._db.param
        sql = f"SELECT {COLUMNS} FROM {t} WHERE seq > {p} ORDER BY seq LIMIT {int(limit)}"
        with self._lock, self._guard("read"):
            return [_entry(row) for row in self._db.read(sql, (seq,))]

    def request_ids(self) -> list[str]:
        """Every request recorded, in the order they were filed (not recovery entries)."""
        t, p = self._db.table, self._db.param
        sql = f"SELECT request_id FROM {t} WHERE entry_type = {p} ORDER BY seq"
        with self._lock, self._guard("read"):
            return [str(row[0]) for row in self._db.read(sql, (EntryType.REQUEST.value,))]

    def entries_of_type(self, *types: EntryType) -> list[LedgerEntry]:
        """Every entry of these types, in chain order (holds, policy installations)."""
        t, p = self._db.table, self._db.param
        marks = ", ".join([p] * len(types))
        sql = f"SELECT {COLUMNS} FROM {t} WHERE entry_type IN ({marks}) ORDER BY seq"
        with self._lock, self._guard("read"):
            rows = self._db.read(sql, tuple(kind.value for kind in types))
        return [_entry(row) for row in rows]

    def is_empty(self) -> bool:
        """No entry at all: a new ledger, or one that was deleted and created again."""
        with self._lock, self._guard("read"):
            return not self._db.read(f"SELECT 1 FROM {self._db.table} LIMIT 1", ())

    def latest_status(self, request_id: str) -> str | None:
        """The newest `status` entry's status, or None if none was recorded yet."""
        p = self._db.param
        sql = (
            f"SELECT payload FROM {self._db.table} WHERE request_id = {p} AND entry_type = {p} "
            "ORDER BY seq DESC LIMIT 1"
        )
        with self._lock, self._guard("read"):
            rows = self._db.read(sql, (request_id, EntryType.STATUS.value))
        if not rows:
            return None
        status = json.loads(rows[0][0]).get("status")
        return str(status) if status is not None else None

    def latest_statuses(self) -> dict[str, str]:
        """Every request's newest status, in one query: what a restart scans to resume."""
        t, p = self._db.table, self._db.param
        sql = (
            f"SELECT e.request_id, e.payload FROM {t} e WHERE e.entry_type = {p} AND e.seq = "
            f"(SELECT MAX(s.seq) FROM {t} s WHERE s.request_id = e.request_id "
            f"AND s.entry_type = {p}) ORDER BY e.seq"
        )
        status = EntryType.STATUS.value
        with self._lock, self._guard("read"):
            rows = self._db.read(sql, (status, status))
        return {str(rid): str(json.loads(payload).get("status")) for rid, payload in rows}

    def verify(self, anchor: tuple[int, str] | None = None) -> AuditResult:
        """Recompute the whole chain from the first entry. A broken chain is reported in
        the result, not raised: an auditor needs the answer, not an exception.

        `anchor` is a (head_seq, head_hash) kept from an earlier audit; it turns removal
        of the newest entries, which leaves a valid shorter chain, into a finding. A
        malformed anchor is refused (InvalidWrite), never reported as a finding: it says
        nothing about the chain.
        """
        anchor = _checked_anchor(anchor)
        sql = f"SELECT {COLUMNS} FROM {self._db.table} ORDER BY seq"
        prev, checked = GENESIS_HASH, 0
        anchored = GENESIS_HASH if anchor and anchor[0] == 0 else None  # an empty ledger's head
        with self._lock, self._guard("read"), self._db.scan(sql) as rows:
            for row in rows:
                seq, rid, kind, payload, at, prev_hash, stored = row
                expected = checked + 1
                reason = None
                if seq != expected:
                    reason, seq = "seq_gap", expected
                elif prev_hash != prev:
                    reason = "prev_hash_mismatch"
                elif entry_hash(prev_hash, seq, rid, kind, at, payload) != stored:
                    reason = "entry_hash_mismatch"
                elif not _well_formed(rid, kind, payload):
                    reason = "invalid_entry"
                if reason:
                    return self._audit(False, checked, prev, seq, reason)
                prev, checked = stored, expected
                if anchor and seq == anchor[0]:
                    anchored = stored
        if anchor and anchored is None:
            return self._audit(False, checked, prev, anchor[0], "truncated")
        if anchor and anchored != anchor[1]:
            return self._audit(False, checked, prev, anchor[0], "anchor_mismatch")
        return self._audit(True, checked, prev)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> LifecycleLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------

    def _check_order(self, cur: Any, request_id: str, kind: EntryType) -> None:
        p = self._db.param
        found = cur.execute(
            f"SELECT entry_type FROM {self._db.table} WHERE request_id = {p} ORDER BY seq LIMIT 1",
            (request_id,),
        ).fetchone()
        if kind in _FIRST_TYPES and found:
            raise InvalidWrite(f"request {request_id} is already recorded; nothing was appended")
        if kind not in _FIRST_TYPES and not found:
            raise InvalidWrite(
                f"no request {request_id} in the ledger: its request entry comes first; "
                "nothing was appended"
            )

    def _audit(
        self, ok: bool, checked: int, head: str, bad: int | None = None, reason: str | None = None
    ) -> AuditResult:
        return AuditResult(ok, checked, bad, reason, checked, head, self.location)

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        try:
            yield
        except self._db.unavailable as exc:
            raise BackendUnavailable(
                f"cannot {action} the lifecycle ledger at {self.location}: {first_line(exc)}"
                + ("; nothing was appended" if action == "append to" else "")
            ) from None


# -- helpers -------------------------------------------------------------------------------


def _entry_type(value: EntryType | str) -> EntryType:
    try:
        return EntryType(value)
    except ValueError:
        known = ", ".join(t.value for t in EntryType)
        raise InvalidWrite(
            f"unknown ledger entry type; expected one of {known}; nothing was appended"
        ) from None


_HEAD_HASH = re.compile(r"[0-9a-fA-F]{64}")


def _checked_anchor(anchor: object) -> tuple[int, str] | None:
    """An audit anchor as `verify` compares it: a non-negative int seq and the 64 hex
    digits of an entry hash (lower case), or an InvalidWrite naming what is wrong."""
    if anchor is None:
        return None
    if not isinstance(anchor, Sequence) or isinstance(anchor, str) or len(anchor) != 2:
        raise InvalidWrite(
            "an anchor is (seq, hash) as an earlier verify returned it (head_seq, head_hash)",
            ["anchor: not a (seq, hash) pair"],
        )
    seq, head = anchor
    problems = []
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        problems.append("anchor.seq: not a non-negative integer")
    if not isinstance(head, str) or _HEAD_HASH.fullmatch(head) is None:
        problems.append("anchor.hash: not 64 hexadecimal digits")
    if problems:
        raise InvalidWrite.listing("invalid audit anchor; nothing was checked", problems)
    return seq, head.lower()


def _request_id(value: str) -> str:
    try:
        return _REQUEST_ID.validate_python(value)
    except ValidationError:
        raise InvalidWrite(
            "invalid request_id: use identifier syntax (letters, digits, '_', '.', ':', '-'); "
            "nothing was appended",
            ["request_id: not an identifier"],
        ) from None


def _well_formed(request_id: str, entry_type: str, payload: str) -> bool:
    """An entry the ledger could have accepted: catches direct inserts of free text."""
    try:
        _request_id(request_id)
        canonical_payload(entry_type, json.loads(payload))
    except (InvalidWrite, ValueError):
        return False
    return True


def _entry(row: tuple[Any, ...]) -> LedgerEntry:
    seq, rid, kind, payload, at, prev, digest = row
    try:
        entry_type = EntryType(kind)
    except ValueError:
        raise MemoryLedgerError(
            f"ledger entry {seq} has an unknown type: the ledger was altered; run verify"
        ) from None
    return LedgerEntry(int(seq), str(rid), entry_type, str(payload), str(at), str(prev), digest)


_SAFE_LOC = re.compile(r"^[a-z][a-z0-9_]{0,40}$")


def _problems(exc: ValidationError) -> list[str]:
    """Field paths and reasons, never values: a refused payload may be the very content
    the ledger must not hold, so it must not reappear in an error message or a log."""
    out: list[str] = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        parts: list[str] = []
        for part in error["loc"]:
            text = str(part) if isinstance(part, int) or _SAFE_LOC.match(str(part)) else "*"
            if not (text == "*" and parts and parts[-1] == "*"):
                parts.append(text)
        message = field_message(error)
        if error["type"].endswith("_parsing"):  # e.g. uuid_parsing quotes an input character
            message = message.split(",")[0]
        problem = f"{'.'.join(parts) or 'payload'}: {message}"
        if problem not in out:
            out.append(problem)
    return out
