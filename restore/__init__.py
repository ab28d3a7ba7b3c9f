"""Backup, restore with tombstone replay, and restore drills (see docs/operations.md)."""
