"""Scheduled work: projection catch-up now; retention and consolidation jobs join here."""
