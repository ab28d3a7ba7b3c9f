"""Who may do what: bearer tokens, each mapped to a namespace subtree, a role and grants.

An `agent` token reads and writes its namespaces and may stop using what they hold;
erasing needs the `forget` grant besides. A `compliance` token reads requests, receipts,
the ledger and audit results across its subtree, never memory content. An `ops` token
runs backups, restores, drills and jobs. The namespace of every call comes from the
token, never from the request."""

from memory_ledger.access.tokens import Access, TokenInfo, TokenStore

__all__ = ["Access", "TokenInfo", "TokenStore"]
