"""Issue 30 item 4 for MCP tools: an MCP server runs outside every jail, so a tool of it that
changes what governs the agent's next run (here the reference filesystem server, rooted at the
workspace, overwriting the agent's YAML) is undone after the call and reported as an error —
through the real CLI with every builtin loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawkit.testing.server import Reply

from .conftest import run_cli, write_agent

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).parents[1] / "npm" / "node_modules" / ".bin" / "mcp-server-filesystem"


def test_an_mcp_tool_cannot_rewrite_the_agent(tmp_path, server, audit_home):
    if not SERVER.exists():
        pytest.skip("the npm test packages are not installed: run bash scripts/setup-system.sh")
    ws = tmp_path / "ws"
    ws.mkdir()
    # trusted: true — the user vouches for the server's tool descriptions, so the session is not untrusted
    # before the call (provenance would ask for this MCP call and deny it non-interactively): this test is
    # about the undo after an MCP call, which must hold for a server the user trusts too.
    extra = (f"mcp: {{servers: {{files: {{command: {json.dumps(str(SERVER))}, args: [{json.dumps(str(ws))}], "
             "trusted: true}}}\n")
    path = write_agent(ws, server, ["mcp__files__write_file"], "policy: {risk: {mcp__files__write_file: safe}}\n",
                       extra=extra)
    before = path.read_text()
    run = run_cli(ws, server, audit_home, "write",
                  Reply.tool_calls([("mcp__files__write_file", {"path": str(path), "content": "name: pwned\n"})]),
                  "done", timeout=90)
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    (result,) = [run.tool_results()[c["id"]] for c in run.result["tool_calls"]]
    assert path.read_text() == before
    assert "MCP server 'files' changed what governs the agent's next run" in result, result
    assert f"{path} (modified; restored)" in result
