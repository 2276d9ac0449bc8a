"""A real third-party MCP server from the npm registry — the reference filesystem server, installed
by scripts/setup-system.sh from tests/npm/package-lock.json — used by a full-install agent: it lists
and reads files through it, and a path outside the server's root is refused by the server and
reported cleanly to the model."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).parent / "npm" / "node_modules" / ".bin" / "mcp-server-filesystem"


@pytest.fixture
def files_agent(make_agent, model_server, workspace):
    if not SERVER.exists():
        pytest.skip("the npm test packages are not installed: run bash scripts/setup-system.sh")
    root = workspace / "data"
    root.mkdir()
    (root / "hello.txt").write_text("hello from the filesystem server\n")
    (workspace / "private.txt").write_text("outside the server's root\n")
    asked = []

    def factory(*script):
        model_server.script(*script)
        agent = make_agent(
            load_entry_points=True, provider="config",
            model={"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "timeout": 20, "max_retries": 0},
            mcp={"servers": {"files": {"command": str(SERVER), "args": [str(root)]}}},
            tools=["mcp__files__list_directory", "mcp__files__read_text_file"],
            approver=lambda call, reason, ctx: asked.append(call.name) or True,
        )
        return agent, root, asked

    return factory


def test_lists_and_reads_files_and_outside_root_is_refused(files_agent, model_server, workspace):
    root = workspace / "data"
    agent, root, asked = files_agent(
        Reply.tool_calls([("mcp__files__list_directory", {"path": str(root)})]),
        Reply.tool_calls([("mcp__files__read_text_file", {"path": str(root / "hello.txt")})]),
        Reply.tool_calls([("mcp__files__read_text_file", {"path": str(workspace / "private.txt")})]),
        "Done.",
    )
    result = agent.run("look around")
    assert result.reply == "Done."
    offered = sorted(t["function"]["name"] for t in model_server.requests[0].tools if t["function"]["name"].startswith("mcp__"))
    assert offered == ["mcp__files__list_directory", "mcp__files__read_text_file"]  # of the server's ~14 tools
    listing, content, outside = [m["content"] for m in model_server.requests[-1].messages if m["role"] == "tool"]
    assert "hello.txt" in listing
    assert "hello from the filesystem server" in content
    assert "Error: " in outside and "outside the server's root" not in outside  # refused; the file's text never leaked
    assert "access denied" in outside.lower() or "outside allowed" in outside.lower()
    assert asked == ["mcp__files__list_directory", "mcp__files__read_text_file", "mcp__files__read_text_file"]
    calls = [c for c in result.tool_calls]
    assert [c["is_error"] for c in calls] == [False, False, True]
