"""`python -m memory_ledger.cli`: the same app as the `memory-ledger` command."""

from memory_ledger.cli import app

app()
