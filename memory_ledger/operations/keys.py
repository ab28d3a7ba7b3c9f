"""Master-key rotation as an operation: every data key (and every backup) rewrapped
under a new master key, then the old key's material destroyed. It runs on the settings
alone: the store is not served while its master key changes (memory_ledger/key_rotation.py)."""

from __future__ import annotations

from memory_ledger.crypto import DEV_KEY_FILE, MASTER_KEY_ENV
from memory_ledger.key_rotation import rotate as rotate_master_key

__all__ = ["DEV_KEY_FILE", "MASTER_KEY_ENV", "rotate_master_key"]
