"""Issue 25 goal 6: an agent's stdio MCP servers are launched before the ``mcp`` SDK is imported.

The SDK import costs ~0.5-1 s of CPU; launching every server first lets their boot overlap it
(``bench_mcp.py --only startup`` measures the walls). Asserted on order, not timings: CPython's
audit hooks see each ``subprocess.Popen`` and the first ``import mcp`` of the real CLI (every builtin
plugin loaded), for ``clawkit mcp list`` and ``clawkit run``. On old main the SDK's ``stdio_client``
spawned each server only after the import, so the first event was the import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer

pytestmark = pytest.mark.e2e

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))
NAMES = ("one", "two", "three")

# runs the CLI as ``python -m clawkit`` does, with an audit hook recording the order of events
WRAPPER = textwrap.dedent("""\
    import os, runpy, sys
    out, server = os.environ["ORDER_FILE"], os.environ["ORDER_SERVER"]
    def hook(event, args):
        if event == "import" and args[0] == "mcp":
            line = "import mcp"
        elif event == "subprocess.Popen" and any(server in str(a) for a in (args[1] or ())):
            line = "spawn"
        else:
            return
        with open(out, "a") as f:
            f.write(line + "\\n")
    sys.addaudithook(hook)
    sys.argv = ["clawkit", *sys.argv[1:]]
    runpy.run_module("clawkit", run_name="__main__", alter_sys=True)
    """)


def _cli(ws: Path, order: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", ORDER_FILE=str(order), ORDER_SERVER=SERVER)
    return subprocess.run([sys.executable, "-c", WRAPPER, *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_stdio_servers_are_launched_before_the_sdk_import(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    with ModelServer() as model:
        model.script(lambda request: "done")
        servers = {n: {"command": sys.executable, "args": [SERVER], "risk": "safe"} for n in NAMES}
        (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
            name: prespawn
            model: {{name: openai/test, api_base: "{model.url}", api_key: sk-test, max_retries: 0, timeout: 20}}
            tools: ["mcp__*"]
            """) + "mcp:\n  servers: " + json.dumps(servers) + "\n")

        for label, args in (("list", ("mcp", "list", "agent.yaml", "--json")),
                            ("run", ("run", "agent.yaml", "hi", "--json", "--new-session", "s1"))):
            order = tmp_path / f"{label}.order"
            done = _cli(ws, order, *args)
            assert done.returncode == 0, f"{label}: {done.stdout[-1500:]} {done.stderr[-3000:]}"
            events = order.read_text().splitlines()
            assert events.count("spawn") == len(NAMES), (label, events)
            assert "import mcp" in events, (label, events)  # the SDK is still what speaks MCP
            assert events[: len(NAMES)] == ["spawn"] * len(NAMES), f"{label}: a server was launched after the SDK import: {events}"
            if label == "list":  # the servers answered through the prespawned pipes: tools listed
                rows = {r["server"]: r for r in json.loads(done.stdout)}
                assert all(rows[n]["state"] == "ready" and f"mcp__{n}__add" in {t["name"] for t in rows[n]["tools"]}
                           for n in NAMES), rows
            else:
                assert json.loads(done.stdout)["reply"] == "done"
                sent = {t["function"]["name"] for t in model.requests[-1].body.get("tools", [])}
                assert {f"mcp__{n}__add" for n in NAMES} <= sent
