"""Envelope encryption for crypto-shredding.

Every memory item's personal fields are sealed with AES-256-GCM under a data key of
that item alone, so one item can be made unreadable without touching its neighbours.
Data keys are stored only wrapped by the master key; destroying the wrapped copy is
what erasure means for the immutable event log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memory_ledger.config import MASTER_KEY_ENV
from memory_ledger.errors import ConfigurationError, CorruptKeyEntry, WrongMasterKey

if TYPE_CHECKING:
    from memory_ledger.config import Settings

KEY_BYTES = 32
NONCE_BYTES = 12
DEV_KEY_FILE = "dev-master.key"
_KEY_CHECK_LABEL = b"memory-ledger/master-key-check/v1"
#: The HKDF info label of the key that authenticates backup manifests (restore/backup.py).
BACKUP_MANIFEST_LABEL = b"memory-ledger/backup-manifest-mac/v1"


def _aad(item_id: str, generation: int, purpose: bytes) -> bytes:
    # Binding ciphertext to its item and generation stops a sealed field or wrapped key
    # from being replayed onto another item.
    return purpose + b"|" + item_id.encode() + b"|" + str(generation).encode()


@dataclass(frozen=True)
class MasterKey:
    """The key-encryption key. It never touches the event store or the key store."""

    material: bytes
    source: str

    def __post_init__(self) -> None:
        if len(self.material) != KEY_BYTES:
            raise ConfigurationError(
                f"master key from {self.source} must be {KEY_BYTES} bytes "
                f"(base64: 44 characters), got {len(self.material)} bytes"
            )

    @classmethod
    def from_base64(cls, text: str, source: str) -> MasterKey:
        try:
            material = base64.b64decode(text.strip(), validate=True)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"master key from {source} is not valid base64") from exc
        return cls(material, source)

    @classmethod
    def generate(cls, source: str = "generated") -> MasterKey:
        return cls(secrets.token_bytes(KEY_BYTES), source)

    def check_value(self) -> str:
        """A keyed fingerprint stored beside the data so a wrong key is caught at open."""
        return hmac.new(self.material, _KEY_CHECK_LABEL, hashlib.sha256).hexdigest()

    def subkey(self, label: bytes) -> bytes:
        """A key of one purpose, derived from the master key (HKDF-SHA256, `label` its
        info): what it keys cannot be confused with what the master key itself, or a key
        of another label, keys; rotating the master key rotates it."""
        return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=label).derive(
            self.material
        )

    def mac(self, label: bytes, data: bytes) -> str:
        """HMAC-SHA256 of `data` under the subkey of `label`, in hex."""
        return hmac.new(self.subkey(label), data, hashlib.sha256).hexdigest()

    def verify(self, stored_check_value: str) -> None:
        if not hmac.compare_digest(self.check_value(), stored_check_value):
            raise WrongMasterKey(
                f"the master key from {self.source} does not match the one this store was "
                "created with; nothing was read or changed"
            )

    @cached_property
    def _cipher(self) -> AESGCM:
        return AESGCM(self.material)

    def wrap(self, item_id: str, generation: int, data_key: bytes) -> bytes:
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = self._cipher.encrypt(nonce, data_key, _aad(item_id, generation, b"wrap"))
        return nonce + sealed

    def unwrap(self, item_id: str, generation: int, wrapped: bytes) -> bytes:
        try:
            return self._cipher.decrypt(
                wrapped[:NONCE_BYTES], wrapped[NONCE_BYTES:], _aad(item_id, generation, b"wrap")
            )
        except (InvalidTag, ValueError) as exc:
            raise CorruptKeyEntry(
                f"the key entry for item {item_id} (generation {generation}) is corrupted "
                "or was not written with this master key; nothing was changed"
            ) from exc


def new_data_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def seal(
    data_key: bytes, item_id: str, generation: int, plaintext: bytes, purpose: bytes = b"seal"
) -> str:
    """Encrypt personal fields; the text form travels inside JSON payloads and text cells."""
    return base64.b64encode(seal_bytes(data_key, item_id, generation, plaintext, purpose)).decode(
        "ascii"
    )


def unseal(
    data_key: bytes, item_id: str, generation: int, sealed: str, purpose: bytes = b"seal"
) -> bytes:
    return open_bytes(data_key, item_id, generation, base64.b64decode(sealed), purpose)


def seal_bytes(
    data_key: bytes, item_id: str, generation: int, plaintext: bytes, purpose: bytes
) -> bytes:
    """The one seal every store uses (events, projection cells, vectors, summaries):
    AES-256-GCM under a data key, bound to its item, generation and purpose, so a sealed
    value cannot be replayed onto another item or read as another kind of value."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    return nonce + AESGCM(data_key).encrypt(nonce, plaintext, _aad(item_id, generation, purpose))


def open_bytes(
    data_key: bytes, item_id: str, generation: int, sealed: bytes, purpose: bytes
) -> bytes:
    try:
        return AESGCM(data_key).decrypt(
            sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _aad(item_id, generation, purpose)
        )
    except InvalidTag as exc:
        raise CorruptKeyEntry(
            f"sealed content of item {item_id} (generation {generation}) does not open with "
            "its data key; the key entry or the sealed copy is corrupted"
        ) from exc


def load_master_key(settings: Settings, *, allow_dev_key: bool = True) -> tuple[MasterKey, bool]:
    """Find the master key: the settings' MEMORY_LEDGER_MASTER_KEY first, then a dev key
    file in the data dir.

    Returns the key and whether a development key file was created just now, so the
    caller can warn loudly: a key kept next to the data protects nothing at rest.
    """
    given = settings.master_key
    if given:
        return MasterKey.from_base64(given, f"${MASTER_KEY_ENV}"), False
    data_dir = settings.data_dir
    key_file = data_dir / DEV_KEY_FILE
    if key_file.exists():
        return MasterKey.from_base64(key_file.read_text(), str(key_file)), False
    if not allow_dev_key:
        raise ConfigurationError(
            f"no master key: this store was created with one; set {MASTER_KEY_ENV} "
            f"or restore {key_file}. Nothing was read or changed"
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    key = MasterKey.generate(str(key_file))
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(base64.b64encode(key.material).decode("ascii") + "\n")
    return key, True
