"""Per-host network grants: the jail reaches only the granted hosts, through the host-side proxy
that checks each connection against the grant and audits it; nothing else has a route out."""

from __future__ import annotations

import http.server
import threading

import pytest

import clawkit_policy
import clawkit_sandbox
import clawkit_tools
from clawkit.testing.scripted import ScriptedReply
from clawkit_sandbox.config import SandboxConfig
from clawkit_sandbox.jail import problem
from clawkit_sandbox.network import _target, host_allowed

needs_bwrap = pytest.mark.skipif(problem(SandboxConfig()) is not None, reason="bubblewrap cannot run here")


class Hello(http.server.BaseHTTPRequestHandler):
    disable_nagle_algorithm = True

    def do_GET(self):
        body = f"hello from {self.server.server_address[1]} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def servers():
    started = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello) for _ in range(2)]
    for s in started:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    yield [s.server_address[1] for s in started]
    for s in started:
        s.shutdown()
        s.server_close()


def shell(agent, *commands):
    for c in commands:
        agent.provider.add(ScriptedReply.calls(("shell_exec", {"command": c, "timeout": 20})))
    agent.provider.add("done")
    result = agent.run("go")
    return [m.tool_result.content for m in agent.store.messages(result.session_id) if m.role == "tool"], result


@needs_bwrap
def test_only_granted_hosts_are_reachable_through_the_proxy(make_agent, servers):
    granted, other = servers
    policy = {"grants": [{"tools": ["shell_exec"], "commands": ["*"], "hosts": [f"127.0.0.1:{granted}"]}]}
    agent = make_agent([], plugins=(clawkit_tools, clawkit_sandbox, clawkit_policy), tools=["shell_exec"],
                       plugin_config={"policy": policy, "sandbox": {"memory_mb": 512}}, approver=lambda *a: True)
    urlopen = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{}/x', timeout=10).read().decode())\""
    results, run = shell(agent, f"curl -sS http://127.0.0.1:{granted}/plain",
                         f"curl -sS -p http://127.0.0.1:{granted}/tunnel",
                         urlopen.format(granted),
                         urlopen.format(other),
                         f"curl -sS -p http://127.0.0.1:{other}/tunnel",
                         f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {granted}), 2); print('DIRECT')\"")
    plain, tunnel, py_ok, py_refused, tunnel_refused, direct = results
    assert f"exit code 0\nhello from {granted} /plain" in plain  # absolute-URI request through the proxy
    assert f"exit code 0\nhello from {granted} /tunnel" in tunnel  # CONNECT tunnel
    assert f"exit code 0\nhello from {granted} /x" in py_ok
    assert "403" in py_refused and f"the network proxy refused 127.0.0.1:{other}" in py_refused
    assert f"granted hosts: 127.0.0.1:{granted}" in py_refused and f"hello from {other}" not in py_refused
    assert "CONNECT tunnel failed, response 403" in tunnel_refused and "refused" in tunnel_refused
    assert "DIRECT" not in direct and "Connection refused" in direct  # no route but the proxy
    ledger = clawkit_policy.ledger_for(agent.store)
    net = [r for r in ledger.records(session=run.session_id) if r["decision"] == "tool.network"]
    assert [(r["data"]["port"], r["data"]["decision"]) for r in net] == [
        (granted, "allowed"), (granted, "allowed"), (granted, "allowed"), (other, "refused"), (other, "refused")]
    assert all(r["step_id"] for r in net) and "is not granted to shell_exec" in net[3]["data"]["reason"]
    sandbox = [r for r in ledger.records(session=run.session_id) if r["decision"] == "tool.sandbox"]
    assert "through the sandbox's policy-checked proxy" in sandbox[0]["data"]["network"]
    assert ledger.verify().ok


def test_grant_matching_and_request_targets():
    assert host_allowed("127.0.0.1", 8080, ["127.0.0.1:8080"]) and not host_allowed("127.0.0.1", 8081, ["127.0.0.1:8080"])
    assert host_allowed("api.example.com", 443, ["*.example.com"]) and not host_allowed("example.org", 443, ["*.example.com"])
    assert host_allowed("10.1.2.3", 22, ["10.0.0.0/8"]) and not host_allowed("name.test", 22, ["10.0.0.0/8"])
    assert _target("CONNECT", "example.com:443") == ("example.com", 443, "")
    assert _target("GET", "http://[::1]:8080/a?b") == ("::1", 8080, "/a?b")
    assert _target("GET", "http://user@host") == ("host", 80, "/")
    assert _target("GET", "ftp://host/") is None and _target("CONNECT", "host:0") is None


def test_a_granted_name_resolving_to_a_non_public_address_is_refused():
    """A granted name that resolves to the host's loopback (or the LAN) does not open it: the address
    is checked once, on the host, and the connection goes to that address."""
    import asyncio
    import ipaddress
    import socket

    from clawkit_sandbox.network import NetworkProxy

    name = socket.gethostname()
    try:
        addresses = {ipaddress.ip_address(i[4][0]) for i in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    except OSError:
        pytest.skip(f"this machine's name {name!r} does not resolve")
    if any(a.is_global for a in addresses):
        pytest.skip(f"this machine's name {name!r} resolves to a public address")

    async def resolve(grant, host):
        proxy = NetworkProxy(None, "shell_exec", grant)
        try:
            return await proxy._resolve(host, 80)
        finally:
            await proxy.close()

    address, why = asyncio.run(resolve([name], name))  # granted by name only
    assert address is None and "a non-public address the grant does not name" in why
    granted_too = [name] + [str(a) for a in addresses]
    assert asyncio.run(resolve(granted_too, name))[0] in {str(a) for a in addresses}  # the address granted too
    assert asyncio.run(resolve(["localhost"], "localhost"))[0] is not None  # a loopback name is loopback by definition
    assert asyncio.run(resolve(["127.0.0.2"], "127.0.0.2")) == ("127.0.0.2", "")


@needs_bwrap
@pytest.mark.parametrize("setting", ["all", "refuse"])
def test_network_grants_all_shares_the_host_network_and_refuse_keeps_it_off(make_agent, servers, setting):
    granted = servers[0]
    policy = {"grants": [{"tools": ["shell_exec"], "commands": ["*"], "hosts": [f"127.0.0.1:{granted}"]}]}
    agent = make_agent([], plugins=(clawkit_tools, clawkit_sandbox, clawkit_policy), tools=["shell_exec"],
                       plugin_config={"policy": policy, "sandbox": {"network_grants": setting}}, approver=lambda *a: True)
    (direct,), run = shell(agent, f"echo proxy=$HTTP_PROXY; python3 -c \"import socket; "
                                  f"socket.create_connection(('127.0.0.1', {granted}), 2); print('DIRECT')\"")
    assert "proxy=\n" in direct  # no proxy in either: all or nothing
    assert ("DIRECT" in direct) is (setting == "all")
    rows = [r for r in clawkit_policy.ledger_for(agent.store).records(session=run.session_id)
            if r["decision"] == "tool.sandbox"]
    assert rows[0]["data"]["network"] == (f"host network (grant names 127.0.0.1:{granted})" if setting == "all" else "none")
