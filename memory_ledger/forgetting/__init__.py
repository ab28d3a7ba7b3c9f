"""Forgetting: scopes, requests, mentions, redaction, target checks and the residue scan."""
