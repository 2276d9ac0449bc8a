"""The HTTP client's share of goal 4: client CPU per session for many concurrent sessions, layer by layer.

Run:
    .venv/bin/python tests/benchmarks/bench_http_client.py [--sessions 1000] [--only stock,lean,provider,bare]

The same model server as ``bench_concurrency.py`` (the test kit's ``ModelServer`` in another
process, answering after ``--latency``); each "session" is two sequential streamed POSTs of a
~3 KB chat request with one tool (the model's tool call, then its answer), ``--sessions`` of
them at once, run twice (the first pass opens the connections). Variants:

* ``stock``: ``httpx.AsyncClient.stream`` + ``aiter_lines`` with httpcore's pool, pools of 32
  requests in flight (what clawkit-http did before issue 13's fifth session);
* ``lean``: the same client calls over ``clawkit_http.pool.LeanTransport`` (its pool and
  asyncio network layer);
* ``provider``: ``HttpProvider.complete`` twice (request body from an ``LlmRequest``, the
  SSE parsing, the response assembled) — what a session's two model calls cost the agent;
* ``bare``: a hand-written asyncio HTTP/1.1 client (no parsing library, no error handling),
  not a candidate, only the floor: what any Python HTTP client must at least spend here.

Printed per variant and pass: wall, client CPU per session (this process), the model
server's CPU per session (the other process), sessions/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_concurrency import SERVER, process_cpu  # noqa: E402

SYSTEM = "x" * 3000
TOOL = {"type": "function", "function": {"name": "ping", "description": "Answer pong.",
                                         "parameters": {"type": "object", "properties": {}}}}


def body(step: int) -> dict:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "ping"}]
    if step:
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_0_ping", "type": "function", "function": {"name": "ping", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0_ping", "content": "pong"}]
    return {"model": "scripted", "messages": messages, "tools": [TOOL], "stream": True,
            "stream_options": {"include_usage": True}}


def httpx_session(clients: list):
    async def session(i: int) -> None:
        client = clients[i % len(clients)]
        for step in range(2):
            async with client.stream("POST", "chat/completions", json=body(step)) as response:
                async for _ in response.aiter_lines():
                    pass
    return session


def provider_session(url: str):
    from clawkit.config import ModelConfig
    from clawkit.types import LlmRequest, Message, ToolDef, ToolResult
    from clawkit_http.provider import HttpProvider

    prov = HttpProvider(ModelConfig(name="openai/scripted", api_base=url, api_key="k", timeout=60, max_retries=0))
    tools = [ToolDef(name="ping", description="Answer pong.")]

    async def session(i: int) -> None:
        messages = [Message(role="user", content="ping")]
        first = await prov.complete(LlmRequest(model="", system=SYSTEM, messages=messages, tools=tools))
        call = first.tool_calls[0]
        messages += [Message(role="assistant", content=first.content, tool_calls=first.tool_calls),
                     Message(role="tool", content="pong", tool_result=ToolResult(call_id=call.id, name="ping", content="pong"))]
        await prov.complete(LlmRequest(model="", system=SYSTEM, messages=messages, tools=tools))
    return session


def bare_session(url: str):
    u = urlsplit(url + "/chat/completions")
    idle: list = []

    async def session(i: int) -> None:
        for step in range(2):
            data = json.dumps(body(step)).encode()
            reader, writer = idle.pop() if idle else await asyncio.open_connection(u.hostname, u.port)
            writer.write(b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (u.path.encode(), u.netloc.encode(), len(data), data))
            await reader.readuntil(b"\r\n\r\n")
            while True:  # chunked: size line, data, CRLF; the last chunk is empty
                size = int((await reader.readline()).split(b";")[0], 16)
                await reader.readexactly(size + 2)
                if not size:
                    break
            idle.append((reader, writer))
    return session


async def run(variant: str, url: str, n: int, server_pid: int) -> None:
    import httpx

    if variant == "stock":
        clients = [httpx.AsyncClient(base_url=url + "/", limits=httpx.Limits(max_connections=1000,
                                                                             max_keepalive_connections=100))
                   for _ in range(max(1, n // 32))]
        session = httpx_session(clients)
    elif variant == "lean":
        from clawkit_http.pool import LeanTransport

        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
        clients = [httpx.AsyncClient(base_url=url + "/",
                                     transport=LeanTransport(verify=httpx.create_ssl_context(), limits=limits))]
        session = httpx_session(clients)
    elif variant == "provider":
        session = provider_session(url)
    else:
        session = bare_session(url)
    await asyncio.gather(*(session(i) for i in range(20)))  # imports, first connections
    for attempt in (1, 2):
        server0, cpu0, t0 = process_cpu(server_pid), time.process_time(), time.perf_counter()
        await asyncio.gather(*(session(i) for i in range(n)))
        wall, cpu, server = time.perf_counter() - t0, time.process_time() - cpu0, process_cpu(server_pid) - server0
        print(f"  {variant:9s} pass {attempt}: {wall * 1000:6.0f} ms wall, client {cpu / n * 1000:5.2f} ms CPU per session, "
              f"server {server / n * 1000:5.2f} ms, {n / wall:5.0f} sessions/s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--only", default="stock,lean,provider,bare")
    args = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.latency)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        print(f"load average {os.getloadavg()[0]:.2f}; {args.sessions} sessions at once, two streamed POSTs each")
        for variant in args.only.split(","):
            asyncio.run(run(variant, url, args.sessions, server.pid))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
