"""Fixtures for the clawkit-mcp tests: agents with every builtin plugin, on the loopback model server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))


def _stdio_server(**extra):
    return {"command": sys.executable, "args": [SERVER], **extra}


@pytest.fixture
def stdio_server():
    """``stdio_server(**settings)``: a server entry running the test server over stdio."""
    return _stdio_server


@pytest.fixture
def mcp_agent(make_agent, model_server):
    """``mcp_agent(*script, servers={...}, tools=[...], approver=..., **config)``: an agent with every
    installed plugin (entry points), its model the loopback ``model_server`` scripted with ``script``."""

    def factory(*script, servers, tools, approver=None, **config):
        if script:
            model_server.script(*script)
        config.setdefault("model", {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test",
                                    "timeout": 20, "max_retries": 0})
        return make_agent(load_entry_points=True, provider="config", mcp={"servers": servers}, tools=tools,
                          approver=approver, **config)

    return factory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server():
    """The test server over streamable HTTP, once per module: its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("the MCP test server exited")
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(10)
