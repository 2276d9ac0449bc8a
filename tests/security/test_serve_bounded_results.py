"""Issue 30 item 9 (last point): a huge MCP result is stored bounded, like what the model sees.

A 50 MB result of an MCP tool, through the real CLI with every builtin: the model gets a bounded
text, and the state database (messages, kept outputs, events, ledger) keeps a bounded part (the truncator's
``store_max_chars``), not the whole result."""

from __future__ import annotations

import sys
import textwrap

import pytest

from .conftest import calls, run_cli, write_agent

pytestmark = pytest.mark.e2e

SIZE = 8 * 1024 * 1024  # (50 MB in the issue: the same path, scaled down to keep the test fast)

SERVER = textwrap.dedent(f"""\
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big")

    @server.tool()
    def dump() -> str:
        \"\"\"Return a very large text.\"\"\"
        return ("0123456789abcdef" * 64 + "\\n") * ({SIZE} // 1025)

    server.run("stdio")
    """)


def test_a_50_mb_mcp_result_is_stored_bounded(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "big_server.py").write_text(SERVER)
    plugins = 'policy:\n  risk: {"*": safe}\nshield: {mode: audit-only}\n'
    extra = textwrap.dedent(f"""\
        mcp:
          servers:
            big: {{command: {sys.executable}, args: ["{tmp_path / 'big_server.py'}"], risk: safe, call_timeout: 120}}
        """)
    write_agent(ws, server, ["mcp__big__dump"], plugins=plugins, extra=extra)
    run = run_cli(ws, server, audit_home, "dump it", calls(("mcp__big__dump", {}), ids=["big"]), "done", timeout=300)
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    seen = run.tool_results()["big"]
    assert 0 < len(seen) < 1_000_000  # the model saw a bounded text
    db = ws / ".clawkit"
    stored = sum(p.stat().st_size for p in db.iterdir() if p.name.startswith("state.db"))
    assert stored < 5 * 1024 * 1024, f"the state database holds {stored:,} bytes for a {SIZE:,}-byte result"
