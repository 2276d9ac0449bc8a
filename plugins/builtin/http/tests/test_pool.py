"""The provider's connection pool (clawkit_http.pool) and asyncio network layer (clawkit_http.netio),
through httpx against the loopback model_server."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from clawkit.config import ModelConfig
from clawkit.testing.replies import Fault, Reply
from clawkit.types import LlmRequest, Message
from clawkit_http.pool import LeanTransport
from clawkit_http.provider import HttpProvider

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def client(max_connections: int, **timeouts) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.AsyncClient(timeout=httpx.Timeout(5, **timeouts),
                             transport=LeanTransport(verify=httpx.create_ssl_context(), limits=limits))


def test_many_requests_in_flight_share_a_bounded_pool_and_one_user_keeps_one_connection(model_server):
    model_server.script(lambda req: Fault.delay(0.1, then=Reply.text("pong")))
    cfg = ModelConfig(name="openai/m", api_base=model_server.url, api_key="k", timeout=5, max_retries=0,
                      max_connections=8)
    prov = HttpProvider(cfg)

    def request(stream: bool) -> LlmRequest:
        return LlmRequest(model="", messages=[Message(role="user", content="ping")], stream=stream)

    async def scenario():
        first = await prov.complete(request(False))
        again = await prov.complete(request(True))
        pool = prov.client().transport._pool
        sequential_idle = pool._idle_count
        many = await asyncio.gather(*(prov.complete(request(bool(i % 2))) for i in range(30)))
        after = pool._idle_count, pool._in_flight
        await prov.aclose()
        return first, again, sequential_idle, many, after

    first, again, sequential_idle, many, (idle, in_flight) = asyncio.run(scenario())
    assert first.content == again.content == "pong" and sequential_idle == 1  # one connection, reused
    assert [r.content for r in many] == ["pong"] * 30
    assert idle <= 8 and in_flight == 0


def test_requests_beyond_max_connections_wait_then_time_out_as_a_pool_timeout(model_server):
    model_server.script(lambda req: Fault.delay(0.5, then=Reply.text("late")))

    async def scenario():
        async with client(1, pool=0.1) as http:
            url = model_server.url + "/chat/completions"
            slow = asyncio.ensure_future(http.post(url, json=BODY))
            await asyncio.sleep(0.05)
            with pytest.raises(httpx.PoolTimeout):
                await http.post(url, json=BODY)
            return (await slow).json()["choices"][0]["message"]["content"]

    assert asyncio.run(scenario()) == "late"


def test_a_cancelled_request_gives_its_slot_and_connection_back(model_server):
    model_server.script(lambda req: Fault.delay(0.3, then=Reply.text("ok")))

    async def scenario():
        async with client(1) as http:
            url = model_server.url + "/chat/completions"
            doomed = asyncio.ensure_future(http.post(url, json=BODY))
            waiting = asyncio.ensure_future(http.post(url, json=BODY))  # queued behind it
            await asyncio.sleep(0.05)
            doomed.cancel()
            with pytest.raises(asyncio.CancelledError):
                await doomed
            second = await waiting
            third = await http.post(url, json=BODY)
            pool = http._transport._pool
            return second.status_code, third.status_code, pool._in_flight

    assert asyncio.run(scenario()) == (200, 200, 0)


def test_a_connection_the_server_closed_is_not_reused(model_server):
    model_server.script("one", "two")

    async def scenario():
        async with client(4) as http:
            url = model_server.url + "/chat/completions"
            one = await http.post(url, json=BODY)
            pool = http._transport._pool
            (conn,) = [c for stack in pool._idle.values() for c in stack]
            for sock in list(model_server._conns):  # the server hangs up on the idle connection
                sock.shutdown(2)
            for _ in range(100):
                if conn.has_expired():  # the hang-up reached our protocol
                    break
                await asyncio.sleep(0.01)
            expired = conn.has_expired()
            two = await http.post(url, json=BODY)
            return one.status_code, expired, two.json()["choices"][0]["message"]["content"], conn.is_closed()

    assert asyncio.run(scenario()) == (200, True, "two", True)


def test_connection_errors_keep_their_classes(model_server):
    async def scenario():
        async with client(2, connect=2) as http:
            with pytest.raises(httpx.ConnectError) as info:
                await http.post("http://127.0.0.1:9/v1/chat/completions", json=BODY)
            return info.value

    err = asyncio.run(scenario())
    assert isinstance(err.__cause__.__cause__, ConnectionRefusedError)


def test_proxies_from_the_environment_still_apply(model_server, monkeypatch):
    """With HTTP_PROXY set the request goes through httpx's own client, which uses the proxy
    (here a closed port: the call fails) unless NO_PROXY exempts the host."""
    from clawkit.providers import ProviderError

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
                 "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    model_server.script("direct")
    cfg = ModelConfig(name="openai/m", api_base=model_server.url, api_key="k", timeout=5, max_retries=0)
    req = LlmRequest(model="", messages=[Message(role="user", content="hi")])
    with pytest.raises(ProviderError) as info:
        asyncio.run(HttpProvider(cfg).complete(req))
    assert info.value.kind == "connection" and model_server.requests == []
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert asyncio.run(HttpProvider(cfg).complete(req)).content == "direct"


def test_https_through_the_asyncio_network_layer(model_server, tmp_path, monkeypatch):
    """TLS (asyncio's start_tls under httpcore): plain and streamed answers, connections reused;
    a certificate nobody trusts is a ``tls`` error, not retried."""
    import ssl
    import subprocess

    from clawkit.providers import ProviderError

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    model_server._httpd.socket = tls.wrap_socket(model_server._httpd.socket, server_side=True)
    model_server.script("plain over tls", Reply.text("streamed over tls"), "again")
    url = f"https://127.0.0.1:{model_server.port}/v1"
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    prov = HttpProvider(ModelConfig(name="openai/m", api_base=url, api_key="k", timeout=5, max_retries=0))

    def request() -> LlmRequest:
        return LlmRequest(model="", messages=[Message(role="user", content="hi")])

    async def scenario():
        plain = await prov.complete(request().model_copy(update={"stream": False}))
        deltas: list[str] = []
        streamed = await prov.complete(request(), deltas.append)
        again = await prov.complete(request())
        idle = prov.client().transport._pool._idle_count
        await prov.aclose()
        return plain.content, "".join(deltas), streamed.content, again.content, idle

    assert asyncio.run(scenario()) == ("plain over tls", "streamed over tls", "streamed over tls", "again", 1)
    monkeypatch.delenv("SSL_CERT_FILE")
    with pytest.raises(ProviderError, match="CERTIFICATE_VERIFY_FAILED") as info:
        asyncio.run(HttpProvider(ModelConfig(name="openai/m", api_base=url, api_key="k", timeout=5,
                                             max_retries=0)).complete(request()))
    assert info.value.kind == "tls" and not info.value.retryable
