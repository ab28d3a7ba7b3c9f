"""The /v1 routes, one module per concern."""
