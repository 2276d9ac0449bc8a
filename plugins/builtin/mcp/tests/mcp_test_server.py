"""An MCP server for clawkit's tests, written with the official SDK.

``python mcp_test_server.py`` speaks stdio; ``python mcp_test_server.py http PORT`` serves
streamable HTTP at http://127.0.0.1:PORT/mcp. Environment: ``MCP_TEST_PID_FILE`` (append
this process's pid), ``MCP_TEST_HANG_ON_START`` (never answer: a hung server),
``MCP_TEST_SLEEP_ON_START`` (seconds to wait before serving: a slow-starting server).
"""

from __future__ import annotations

import os
import sys
import time

if os.environ.get("MCP_TEST_HANG_ON_START"):  # before the slow imports, so the message is out at once
    print("hanging on purpose", file=sys.stderr, flush=True)
    time.sleep(3600)

import asyncio  # noqa: E402

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402

server = MCPServer("clawkit-test", instructions="A test server.")
calls: list[str] = []


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def erase(name: str) -> str:
    """Pretend to erase something (destructive)."""
    return f"erased {name}"


@server.tool()
def crash() -> str:
    """Exit the server process at once, as a crash would."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.sleep(3600)
    return "late"


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named double and announce that the tool list changed."""
    server.add_tool(double, name="double", description="Double an integer.")
    await ctx.session.send_tool_list_changed()
    return "a tool was added"


def double(x: int) -> int:
    return 2 * x


@server.prompt()
def house_style() -> str:
    """How answers should look."""
    return "Answer in exactly one sentence, and end it with the word 'mcp-styled'."


@server.resource("memo://notes", description="Short notes")
def notes() -> str:
    return "the secret number is 42"


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_PID_FILE"):
        with open(os.environ["MCP_TEST_PID_FILE"], "a") as f:
            f.write(f"{os.getpid()}\n")
    time.sleep(float(os.environ.get("MCP_TEST_SLEEP_ON_START") or 0))
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
