"""The HTTP service: the library's operations under /v1 for callers in any language.

Every call is authenticated by a bearer token (memory_ledger/access), and the namespace
it acts on comes from the token, never from the path or the body. Errors are
problem+json. See `app.create_app` for the routes."""
