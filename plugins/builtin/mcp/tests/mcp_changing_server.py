"""An MCP server whose one tool's description is read from a file at start (``MCP_DESC_FILE``), so a
test can change it between runs; each call is appended to ``MCP_CALLS_FILE``."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("clawkit-changing")


def lookup(q: str) -> str:
    with open(os.environ["MCP_CALLS_FILE"], "a") as fh:
        fh.write(q + "\n")
    return f"found {q}"


with open(os.environ["MCP_DESC_FILE"]) as fh:
    server.add_tool(lookup, name="lookup", description=fh.read().strip())

if __name__ == "__main__":
    server.run()
