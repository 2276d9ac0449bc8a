"""``clawkit mcp serve`` driven by the mcp SDK's own client, over stdio and streamable HTTP, with every
builtin plugin loaded and the agent's model on the loopback model_server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import anyio
import pytest
import yaml

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e


def write_agent(tmp_path, model_server, **extra):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump({
        "name": "served", "instructions": "You help with files.", "workspace": str(ws),
        "model": {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "max_retries": 0},
        "tools": ["read_file", "write_file"], **extra}))
    return path


def payload(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content or json.loads(result.content[0].text)


def test_serve_stdio_task_follow_up_and_denied_approval(model_server, tmp_path):
    from mcp import Client, StdioServerParameters

    agent = write_agent(tmp_path, model_server)
    model_server.script(
        "Hi there.",
        "Yes: you said hello.",
        Reply.tool_calls([("write_file", {"path": "x.txt", "content": "data"})]),
        "I could not write the file.",
    )
    params = StdioServerParameters(command=sys.executable, args=["-m", "clawkit", "mcp", "serve", str(agent)],
                                   env={"LITELLM_LOCAL_MODEL_COST_MAP": "True"}, cwd=str(tmp_path))

    async def drive():
        async with Client(params, mode="legacy") as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["ask_agent"]
            first = payload(await client.call_tool("ask_agent", {"task": "hello"}))
            second = payload(await client.call_tool("ask_agent", {"task": "what did I say?", "session_id": first["session_id"]}))
            denied = payload(await client.call_tool("ask_agent", {"task": "write x.txt"}))
            unknown = await client.call_tool("ask_agent", {"task": "hi", "session_id": "ses_nope"})
            return first, second, denied, unknown

    first, second, denied, unknown = anyio.run(drive)
    assert first["reply"] == "Hi there."
    assert second["reply"] == "Yes: you said hello." and second["session_id"] == first["session_id"]
    history = [m["content"] for m in model_server.requests[1].messages]
    assert "hello" in history and "Hi there." in history  # the follow-up continued the session
    assert denied["session_id"] != first["session_id"]
    assert denied["denied_approvals"][0]["tool"] == "write_file" and "non-interactively" in denied["note"]
    assert not (tmp_path / "ws" / "x.txt").exists()
    assert unknown.is_error and "unknown session_id" in unknown.content[0].text


def test_serve_streamable_http(model_server, tmp_path):
    from mcp import Client

    agent = write_agent(tmp_path, model_server)
    model_server.script("Served over HTTP.")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "mcp", "serve", str(agent), "--http", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
                            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "clawkit mcp serve --http did not start"
                time.sleep(0.1)

        async def drive():
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                return payload(await client.call_tool("ask_agent", {"task": "hi"}))

        assert anyio.run(drive)["reply"] == "Served over HTTP."
    finally:
        proc.terminate()
        assert proc.wait(20) is not None
