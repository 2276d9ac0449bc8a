"""The escape suite (issue 16 acceptance): `clawkit run` with every builtin plugin, the loopback
model driving granted shell_exec calls that try to get out — once with the sandbox on (each is
refused or contained, the reason in the tool result, nothing outside read or changed) and once
with ``plugins.sandbox.mode: off`` (which shows what the jail stops; docs/plugins/sandbox.md).

The sandbox-off run uses bounded stand-ins for the fork bomb and the memory hog (100 sleeping
processes; 600 MiB once): a real fork bomb without a jail would take the shared machine down.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e

try:
    from clawkit_sandbox.config import SandboxConfig
    from clawkit_sandbox.jail import problem

    JAIL_PROBLEM = problem(SandboxConfig())
except ImportError:  # the sandbox plugin is not installed
    JAIL_PROBLEM = "clawkit-sandbox is not installed"


def _probes(home, other, outside, root_file, port):
    return {
        "home file": f"cat {home}/.ssh/id_rsa",
        "/root": f"cat {root_file}" if root_file else "ls /root",
        "another workspace": f"cat {other}/notes.txt",
        "/proc/1/environ": "cat /proc/1/environ",
        "write outside": f"echo pwned > {outside}/pwned.txt",
        "symlink to outside": f"ln -sf {home}/.ssh/id_rsa probe/link && cat probe/link",
        "loopback port": f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\"",
        "many processes": "n=0; for i in $(seq 100); do sleep 3 & n=$((n+1)); done; echo spawned $n; wait",
        "memory (600 MiB)": "python3 -c \"a = bytearray(600 << 20); print('ALLOCATED')\"",
        "outlive the timeout": f"setsid sh -c 'sleep 4; echo late > {outside}/late.txt' & sleep 60",
        "setuid": "python3 -c \"import os; os.setuid(0); print('UID', os.getuid())\"",
    }


JAILED_ONLY = {
    "fork bomb": "b(){ b | b & }; b; sleep 3",  # the shell outlives the bomb long enough for a fork to fail
    "memory hog": "python3 -c \"a = []\nwhile True: a.append(bytearray(1 << 24))\"",
}


class Listener:
    """A loopback port the jail must not reach; counts connections."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()


def _run_suite(tmp_path, model_server, mode):
    base = tmp_path / mode
    ws, home, other, outside = (base / n for n in ("ws", "home", "other-ws", "outside"))
    for d in (ws / "probe", home / ".ssh", other, outside):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("HOME-SECRET-KEY")
    (other / "notes.txt").write_text("OTHER-WORKSPACE-SECRET")
    root_file = None
    if os.access("/root", os.W_OK):
        root_file = f"/root/.clawkit-escape-{uuid.uuid4().hex[:8]}"
        with open(root_file, "w") as fh:
            fh.write("ROOT-SECRET")
    listener = Listener()
    probes = _probes(home, other, outside, root_file, listener.port)
    if mode == "on":
        probes.update(JAILED_ONLY)
    calls = []
    for i, (name, command) in enumerate(probes.items()):
        script = ws / "probe" / f"p{i}.sh"
        script.write_text(command + "\n")
        timeout = 2 if name == "outlive the timeout" else 5 if name == "fork bomb" else 15
        calls.append(Reply.tool_calls([("shell_exec", {"command": f"sh probe/p{i}.sh", "timeout": timeout})]))
    model_server.script(*calls, "done")
    (base / "agent.yaml").write_text(textwrap.dedent(f"""
        name: escape-{mode}
        model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
        workspace: ws
        tools: [shell_exec]
        limits: {{max_tool_rounds: 30}}
        plugins:
          policy:
            untrusted_egress: alarm-only  # what the jail alone stops (each probe's output is untrusted content)
            grants:
              - tools: [shell_exec]
                commands: ["sh probe/*"]
          sandbox: {{mode: {"bwrap" if mode == "on" else "off"}, memory_mb: 256, processes: 32, cpu_seconds: 10}}
        """))
    env = dict(os.environ, HOME=str(home))
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # every installed plugin
    try:
        out = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "try to escape", "--json"],
                             cwd=base, env=env, capture_output=True, text=True, timeout=240)
        time.sleep(4.5)  # an escaped "sleep 4" would have written late.txt by now
        assert out.returncode == 0, out.stderr
        tool_msgs = [m["content"] for m in model_server.requests[-1].messages if m["role"] == "tool"]
        assert len(tool_msgs) == len(probes), tool_msgs
        results = dict(zip(probes, tool_msgs))
        facts = {
            "home file": "HOME-SECRET-KEY" in results["home file"],
            "/root": bool(root_file) and "ROOT-SECRET" in results["/root"] or (not root_file and "exit code 0" in results["/root"]),
            "another workspace": "OTHER-WORKSPACE-SECRET" in results["another workspace"],
            "/proc/1/environ": _host_pid1_leaked(results["/proc/1/environ"]),
            "write outside": (outside / "pwned.txt").exists(),
            "symlink to outside": "HOME-SECRET-KEY" in results["symlink to outside"],
            "loopback port": listener.accepted > 0 or "CONNECTED" in results["loopback port"],
            "many processes": "spawned 100" in results["many processes"] and "Cannot fork" not in results["many processes"],
            "memory (600 MiB)": "ALLOCATED" in results["memory (600 MiB)"],
            "outlive the timeout": (outside / "late.txt").exists(),
            "setuid": "UID 0" in results["setuid"],
        }
        return results, facts, json.loads(out.stdout)
    finally:
        listener.sock.close()
        if root_file:
            os.unlink(root_file)


def _host_pid1_leaked(text: str) -> bool:
    try:
        with open("/proc/1/environ", "rb") as fh:
            host = [v for v in fh.read().decode("utf-8", "replace").split("\0") if len(v) > 8]
    except OSError:
        return False
    return any(v in text for v in host)


@pytest.mark.skipif(JAIL_PROBLEM is not None, reason=f"bubblewrap cannot run here: {JAIL_PROBLEM}")
def test_escape_suite_with_and_without_the_sandbox(tmp_path, model_server):
    results, escaped, _ = _run_suite(tmp_path, model_server, "on")
    assert not any(escaped.values()), {k: results[k] for k, v in escaped.items() if v}
    for name in ("home file", "another workspace", "write outside", "symlink to outside", "loopback port",
                 "many processes", "memory (600 MiB)", "setuid", "memory hog"):
        assert "sandboxed (bubblewrap)" in results[name], (name, results[name])  # the reason reaches the model
    assert "the timeout killed the jail" in results["outlive the timeout"]
    assert "Cannot fork" in results["fork bomb"] and "sandbox" in results["fork bomb"]
    assert "MemoryError" in results["memory hog"]
    assert "Cannot fork" in results["many processes"]

    model_server.reset()
    results_off, escaped_off, _ = _run_suite(tmp_path, model_server, "off")
    print("\nsandbox off, escaped:", json.dumps(escaped_off, indent=1))
    # what the jail alone stops: without it these get out (documented in docs/plugins/sandbox.md)
    for name in ("home file", "another workspace", "write outside", "symlink to outside", "loopback port",
                 "many processes", "memory (600 MiB)"):
        assert escaped_off[name], (name, results_off[name])


@pytest.mark.skipif(JAIL_PROBLEM is not None, reason=f"bubblewrap cannot run here: {JAIL_PROBLEM}")
@pytest.mark.parametrize("mode", ["bwrap", "off"])
def test_network_grant_reaches_only_the_granted_host(tmp_path, model_server, mode):
    """A grant naming one loopback host:port: `clawkit run` (every builtin) whose model makes granted
    shell_exec calls — curl to the granted port succeeds through the proxy; urllib to another port
    is refused with the reason in the tool result and an audit record; a direct socket gets nowhere.
    With the sandbox off, the other port and the direct socket get through (docs: the escape table)."""
    import http.server

    class Hello(http.server.BaseHTTPRequestHandler):
        disable_nagle_algorithm = True

        def do_GET(self):
            body = b"GRANTED-HOST-BODY"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    granted = server.server_address[1]
    other = Listener()
    ws = tmp_path / "ws"
    (ws / "probe").mkdir(parents=True)
    probes = {
        "granted": f"curl -sS http://127.0.0.1:{granted}/",
        "other port": f"python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:{other.port}/', timeout=5)\"",
        "other host": "curl -sS -p https://example.com/",
        "direct": f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {granted}), 2); print('DIRECT')\"",
    }
    for i, command in enumerate(probes.values()):
        (ws / "probe" / f"p{i}.sh").write_text(command + "\n")
    model_server.script(*[Reply.tool_calls([("shell_exec", {"command": f"sh probe/p{i}.sh", "timeout": 20})])
                          for i in range(len(probes))], "done")
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: network-grant
        model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
        workspace: ws
        tools: [shell_exec]
        plugins:
          policy:
            untrusted_egress: alarm-only  # what the jail alone stops (each probe's output is untrusted content)
            grants:
              - tools: [shell_exec]
                commands: ["sh probe/*"]
                hosts: ["127.0.0.1:{granted}"]
          sandbox: {{mode: {mode}, memory_mb: 256, processes: 32, cpu_seconds: 10}}
        """))
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    try:
        out = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "fetch", "--json"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr
        results = dict(zip(probes, (m["content"] for m in model_server.requests[-1].messages if m["role"] == "tool")))
        audit = subprocess.run([sys.executable, "-m", "clawkit", "audit", "list", "--agent", "agent.yaml",
                                "--decision", "tool.network", "--json"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
        other.sock.close()
    assert "exit code 0\nGRANTED-HOST-BODY" in results["granted"]  # (the shield wraps shell output as untrusted)
    assert audit.returncode == 0, audit.stderr
    records = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    if mode == "off":
        assert other.accepted > 0 and "DIRECT" in results["direct"] and not records
        return
    assert "HTTP Error 403" in results["other port"] and other.accepted == 0
    assert f"the network proxy refused 127.0.0.1:{other.port}: not granted to shell_exec" in results["other port"]
    assert "response 403" in results["other host"] and "refused example.com:443" in results["other host"]
    assert "DIRECT" not in results["direct"] and "Connection refused" in results["direct"]
    decisions = sorted((r["data"]["host"], r["data"]["port"], r["data"]["decision"]) for r in records)
    assert decisions == sorted([("127.0.0.1", granted, "allowed"), ("127.0.0.1", other.port, "refused"),
                                ("example.com", 443, "refused")])
