"""Typed output's cost when the first answer validates (issue 26): model requests and CPU per turn.

    .venv/bin/python tests/benchmarks/bench_typed_output.py [--turns 60]

The same agent (kernel + every builtin, persistence on) answers ``--turns`` turns against the
loopback model server, untyped and typed (a pydantic model), on the OpenAI wire (native
``response_format``) and the Anthropic wire (forced ``final_answer`` tool). Variants interleave
in the same run; the figures are the model requests per turn (goal: typed = untyped, i.e. no
extra model call) and the CPU per turn as a ratio against the untyped baseline of that wire.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time

from pydantic import BaseModel

from clawkit.config import AgentConfig
from clawkit.loop import Agent
from clawkit.testing.server import ModelServer, Reply

ANSWER = {"name": "Ada", "age": 36, "tags": ["maths", "poetry"]}


class Person(BaseModel):
    name: str
    age: int
    tags: list[str]


def responder(request):
    body = request.body
    tools = [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools", [])]
    if "final_answer" in tools:
        return Reply.tool_calls([("final_answer", ANSWER)])
    return json.dumps(ANSWER)


async def turns(agent: Agent, n: int, output_type) -> float:
    started = time.process_time()
    for i in range(n):
        result = await agent.turn(f"who is it? ({i})", output_type=output_type)
        if output_type is not None:
            assert result.output == Person(**ANSWER)
    return time.process_time() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=60)
    args = ap.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f}")
    with ModelServer() as server, tempfile.TemporaryDirectory() as ws:
        server.script(responder)
        for wire, model in (("openai", "openai/gpt-4o-mini"), ("anthropic", "anthropic/claude-3-5-haiku-20241022")):
            cfg = AgentConfig(name="bench", workspace=ws, model={"name": model, "api_base": server.url, "api_key": "k",
                                                                  "max_retries": 0})
            with Agent(cfg) as agent:
                asyncio.run(turns(agent, 3, None))  # warm-up: imports, first connection
                asyncio.run(turns(agent, 3, Person))
                cpu = {"untyped": 0.0, "typed": 0.0}
                calls = {"untyped": 0, "typed": 0}
                for rnd in range(4):  # interleaved, so load moves both alike
                    for variant, kind in (("untyped", None), ("typed", Person)):
                        before = len(server.requests)
                        cpu[variant] += asyncio.run(turns(agent, args.turns // 4, kind))
                        calls[variant] += len(server.requests) - before
            n = (args.turns // 4) * 4
            print(f"{wire:9s} model requests per turn: untyped {calls['untyped'] / n:.2f}, typed {calls['typed'] / n:.2f}"
                  f" | CPU per turn: untyped {cpu['untyped'] / n * 1e3:.2f} ms, typed {cpu['typed'] / n * 1e3:.2f} ms"
                  f" (x{cpu['typed'] / cpu['untyped']:.2f})")
            assert calls["typed"] == calls["untyped"], "typed output added model calls"


if __name__ == "__main__":
    main()
