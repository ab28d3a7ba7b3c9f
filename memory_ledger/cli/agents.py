"""Commands that serve memory to agents: `mcp`, the MCP server over stdio."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from memory_ledger.cli.common import DataDir, Url, app, err, fail, open_ledger
from memory_ledger.errors import ConfigurationError, MemoryLedgerError

MCP_NAMESPACE_ENV = "MEMORY_LEDGER_MCP_NAMESPACE"

McpNamespace = Annotated[
    str,
    typer.Option(
        "--namespace",
        "-n",
        envvar=MCP_NAMESPACE_ENV,
        help="Whose memory the server serves: tenant/user or tenant/user/project. Fixed "
        "for the process: no tool call can choose another.",
    ),
]


@app.command("mcp")
def mcp_command(
    namespace: McpNamespace,
    writer: Annotated[
        str, typer.Option(help="The writer recorded in the provenance of every write.")
    ] = "mcp-agent",
    session_id: Annotated[
        str | None,
        typer.Option(
            help="The session memory-file and run changes are recorded under when a call "
            "names none (default: one new id per server process, mcp-<hex>)."
        ),
    ] = None,
    data_dir: DataDir = None,
    url: Url = None,
) -> None:
    """Serve one namespace's memory to an MCP client over stdio (an MCP host starts this
    command). stdout carries the protocol; warnings and errors go to stderr."""
    try:  # the optional extra: a clear error, not an ImportError, when it is missing
        from memory_ledger.agents.mcp_server import serve_stdio
        from memory_ledger.agents.tools import AgentTools
    except ImportError:
        fail(
            ConfigurationError(
                "the MCP server needs the mcp package: pip install 'memory-ledger[mcp]'"
            ),
            False,
        )
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    import secrets

    with open_ledger(namespace, data_dir, url, False) as ledger:
        try:
            session = session_id or f"mcp-{secrets.token_hex(6)}"
            tools = AgentTools(ledger, writer=writer, session_id=session)
        except MemoryLedgerError as exc:
            fail(exc, False)
        err.print(
            f"memory-ledger MCP server: serving {ledger.namespace} over stdio", highlight=False
        )
        serve_stdio(tools, _version())


def _version() -> str:
    from memory_ledger import __version__

    return __version__
