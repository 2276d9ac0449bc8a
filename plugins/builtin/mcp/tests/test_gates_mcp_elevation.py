"""Issue 30 item 5 for ``clawkit mcp serve`` (every builtin loaded): an elevation stored on a session
by another channel (here ``clawkit run`` with non-interactive elevation allowed) is not used when an
MCP client continues that session — the call is asked about, and ``mcp.serve.approvals: deny`` denies it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
import yaml

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e


def test_an_elevation_set_by_run_is_not_used_by_mcp_serve(model_server, tmp_path):
    from mcp import Client, StdioServerParameters

    ws = tmp_path / "ws"
    ws.mkdir()
    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump({
        "name": "served", "instructions": "You help with files.", "workspace": str(ws),
        "model": {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "max_retries": 0},
        "tools": ["write_file"],
        "plugins": {"directives": {"allow_elevated": True, "allow_noninteractive_elevated": True}}}))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    run = subprocess.run([sys.executable, "-m", "clawkit", "run", str(agent), "/elevated on", "--json"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-2000:]
    elevated = json.loads(run.stdout)
    assert "Elevated mode on" in elevated["reply"]
    model_server.script(Reply.tool_calls([("write_file", {"path": "x.txt", "content": "data"})]), "could not")
    params = StdioServerParameters(command=sys.executable, args=["-m", "clawkit", "mcp", "serve", str(agent)],
                                   env={k: v for k, v in env.items() if k in ("PATH", "HOME", "LITELLM_LOCAL_MODEL_COST_MAP")},
                                   cwd=str(tmp_path))

    async def drive():
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("ask_agent", {"task": "write x.txt", "session_id": elevated["session_id"]})
            assert not result.is_error, result.content
            return result.structured_content or json.loads(result.content[0].text)

    out = anyio.run(drive)
    assert out["session_id"] == elevated["session_id"]
    assert out.get("denied_approvals") and out["denied_approvals"][0]["tool"] == "write_file", out
    assert not (ws / "x.txt").exists()
