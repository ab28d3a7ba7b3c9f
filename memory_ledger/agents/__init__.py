"""How agents reach memory-ledger: tool definitions for the OpenAI and Anthropic
tool-calling APIs, an MCP server, and adapters for agent frameworks (a LangGraph store,
an OpenAI Agents SDK session). Each is a thin layer over `MemoryLedger`: the principal
comes from the layer's configuration, never from a tool's arguments."""
