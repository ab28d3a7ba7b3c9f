"""The MCP server (memory_ledger/agents/mcp_server.py) as the CLI starts it. Importing
this module needs the optional `mcp` package: without it, ImportError, which the CLI
turns into a clear error naming the extra to install."""

from __future__ import annotations

from memory_ledger.agents.mcp_server import serve_stdio

__all__ = ["serve_stdio"]
