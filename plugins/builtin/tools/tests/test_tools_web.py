"""web_fetch: SSRF protection (literal addresses, DNS, redirects), caps, text extraction."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import clawkit_tools
from clawkit.testing.server import Reply
from clawkit.tools import ToolError
from clawkit_tools import FetchRefused, html_to_text, web_fetch
from clawkit_tools.web import check_url

PAGE = "<html><head><title>Hello</title><style>p{}</style></head><body><p>First para.</p><script>evil()</script><div>Second</div></body></html>"


def fetch(ctx, url, **kw):
    return asyncio.run(web_fetch(ctx, url, **kw))


@pytest.fixture
def fake_dns(monkeypatch):
    """Host names resolved from a table; anything else fails (no real DNS in tests)."""
    table: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kw):
        if host in table:
            return real(table[host], port, *args, **kw)
        if host in ("127.0.0.1", "::1", "localhost") or host.replace(".", "").isdigit() or host.startswith("0x") or ":" in host:
            return real(host, port, *args, **kw)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


LITERAL_PRIVATE = [
    "http://127.0.0.1:{port}/", "http://localhost:{port}/", "http://127.1:{port}/", "http://2130706433:{port}/",
    "http://0x7f000001:{port}/", "http://0.0.0.0:{port}/", "http://[::1]:{port}/", "http://[::ffff:127.0.0.1]:{port}/",
    "http://10.0.0.1/", "http://192.168.1.1/", "http://172.16.0.1/", "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/", "http://[fe80::1]/", "http://[fd00::1]/", "http://LOCALHOST.:{port}/",
]


@pytest.mark.parametrize("url", LITERAL_PRIVATE)
def test_private_and_loopback_addresses_are_refused(url, web, workspace, ctx_for, fake_dns):
    with pytest.raises(FetchRefused, match="non-public address"):
        fetch(ctx_for(workspace), url.format(port=web.port))
    assert web.seen == []  # refused before connecting


def test_dns_resolving_to_loopback_is_refused(web, workspace, ctx_for, fake_dns):
    fake_dns["innocent.example"] = "127.0.0.1"
    fake_dns["metadata.example"] = "169.254.169.254"
    for host in ("innocent.example", "metadata.example"):
        with pytest.raises(FetchRefused, match=f"{host} resolves to a non-public address"):
            fetch(ctx_for(workspace), f"http://{host}:{web.port}/")
    assert web.seen == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1/", "javascript:alert(1)",
                                 "http://user:pw@example.com/", "/relative/path", "http:///nohost"])
def test_other_schemes_and_credentials_are_refused(url, workspace, ctx_for):
    with pytest.raises(FetchRefused):
        fetch(ctx_for(workspace), url)


def test_granted_host_is_fetched_as_text(web, workspace, ctx_for):
    web.routes["/page"] = (200, {"Content-Type": "text/html; charset=utf-8"}, PAGE)
    ctx = ctx_for(workspace, granted={"web_fetch": {"hosts": ["127.0.0.1"]}})
    text = fetch(ctx, f"{web.url}/page")
    assert "Status: 200" in text and "# Hello" in text and "First para.\nSecond" in text
    assert "evil" not in text and "p{}" not in text
    assert web.seen[0]["host"] == f"127.0.0.1:{web.port}"


def test_redirect_from_granted_server_to_private_address_is_refused(web, workspace, ctx_for, fake_dns):
    web.routes["/to-metadata"] = (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, "")
    web.routes["/to-localhost"] = (301, {"Location": f"http://localhost:{web.port}/page"}, "")
    web.routes["/to-rebound"] = (307, {"Location": f"http://rebound.example:{web.port}/page"}, "")
    web.routes["/to-file"] = (302, {"Location": "file:///etc/passwd"}, "")
    web.routes["/fine"] = (302, {"Location": "/page"}, "")
    web.routes["/page"] = (200, {"Content-Type": "text/plain"}, "the page")
    fake_dns["rebound.example"] = "127.0.0.1"
    ctx = ctx_for(workspace, granted={"web_fetch": {"hosts": ["127.0.0.1"]}})
    assert fetch(ctx, f"{web.url}/fine").endswith("the page")
    for path in ("/to-metadata", "/to-localhost", "/to-rebound", "/to-file"):
        with pytest.raises(FetchRefused):
            fetch(ctx, web.url + path)
    assert [s["path"] for s in web.seen].count("/page") == 1  # only the same-host redirect was followed


def test_connection_is_pinned_to_the_checked_address(web, workspace, ctx_for, fake_dns):
    """The request goes to the address that was checked; Host keeps the name (no rebinding window)."""
    web.routes["/page"] = (200, {"Content-Type": "text/plain"}, "pinned")
    fake_dns["granted.internal.example"] = "127.0.0.1"
    ctx = ctx_for(workspace, granted={"web_fetch": {"hosts": ["granted.internal.example"]}})
    assert fetch(ctx, f"http://granted.internal.example:{web.port}/page").endswith("pinned")
    assert web.seen[-1]["host"] == f"granted.internal.example:{web.port}"
    cidr = ctx_for(workspace, granted={"web_fetch": {"hosts": ["127.0.0.0/8"]}})
    assert fetch(cidr, f"http://granted.internal.example:{web.port}/page").endswith("pinned")


def test_size_and_time_caps(web, workspace, ctx_for):
    web.routes["/big"] = (200, {"Content-Type": "text/plain"}, "x" * 100_000)

    def slow():
        time.sleep(10)  # a daemon thread, not waited for at the fixture's shutdown
        return 200, {}, "late"

    web.routes["/slow"] = slow
    web.routes["/missing"] = (404, {"Content-Type": "text/plain"}, "nope")
    ctx = ctx_for(workspace, granted={"web_fetch": {"hosts": ["127.0.0.1"]}}, fetch_max_bytes=1000, fetch_timeout=0.5)
    text = fetch(ctx, f"{web.url}/big")
    body = text.split("\n\n", 1)[1]
    assert body == "x" * 1000 + "\n[truncated at 1000 bytes]"
    assert fetch(ctx, f"{web.url}/big", max_bytes=10).split("\n\n", 1)[1].startswith("x" * 10 + "\n[trunc")
    started = time.monotonic()
    with pytest.raises(ToolError, match="longer than 0.5 s"):
        fetch(ctx, f"{web.url}/slow")
    assert time.monotonic() - started < 5  # the 0.5 s timeout, not the 10 s answer
    with pytest.raises(ToolError, match="HTTP 404"):
        fetch(ctx, f"{web.url}/missing")


def test_public_names_pass_the_check(workspace, fake_dns):
    fake_dns["public.example"] = "93.184.216.34"
    parts, host, port, ip = asyncio.run(check_url("https://PUBLIC.example./x", []))
    assert (host, port, ip) == ("public.example", 443, "93.184.216.34")


def test_html_to_text():
    assert html_to_text("<ul><li>a &amp; b</li><li>c</li></ul>") == "a & b\nc"


def test_model_driven_ssrf_attempts(llm_agent, model_server, web, workspace, fake_dns):
    """The model asks for loopback, DNS-to-loopback and a redirect to metadata; only the granted page loads.

    The model server itself listens on 127.0.0.1, so even it is unreachable without a grant."""
    import clawkit_policy

    web.routes["/page"] = (200, {"Content-Type": "text/plain"}, "public page text")
    web.routes["/hop"] = (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, "")
    fake_dns["sneaky.example"] = "127.0.0.1"
    urls = [model_server.url + "/models", f"http://sneaky.example:{web.port}/page", f"{web.url}/hop", f"{web.url}/page"]
    agent = llm_agent(
        Reply.tool_calls([("web_fetch", {"url": u}) for u in urls]), "Done.",
        plugins=(clawkit_tools, clawkit_policy), tools=["web_fetch"],
        sections={"policy": {"grants": [{"tools": ["web_fetch"], "hosts": [f"127.0.0.1:{web.port}"]}]}},
    )
    assert agent.run("fetch these").reply == "Done."
    results = [m["content"] for m in model_server.requests[1].messages if m["role"] == "tool"]
    # the model server (loopback, not granted): a non-interactive run cannot approve a one-step grant
    assert results[0].startswith("Error: not approved") and "host 127.0.0.1 (not a public address)" in results[0]
    # (the full install's shield wraps what the tool returned as data)
    assert "Error:" in results[1] and "sneaky.example resolves to a non-public address" in results[1]
    assert "Error:" in results[2] and "169.254.169.254" in results[2]
    assert "public page text" in results[3]
    assert len(model_server.requests) == 2  # web_fetch never reached the model server
