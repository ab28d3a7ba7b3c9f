"""The compliance console's routes (memory_ledger/http/compliance/): the page for a
compliance token, its script, and the JSON and CSV API it reads."""

from memory_ledger.http.compliance import router

__all__ = ["router"]
