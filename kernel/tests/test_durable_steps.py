"""The ``durable_steps`` seam (an engine checkpoints model calls and tool executions) and
``open_turn_queue`` (front-ends find the engine's queue by URL)."""

from __future__ import annotations

import pytest

from clawkit import hookimpl
from clawkit.errors import ConfigError
from clawkit.runtime import open_turn_queue
from clawkit.testing.scripted import ScriptedReply, call


class Recorder:
    """A toy engine: records each step's result by position; a second run replays them."""

    def __init__(self) -> None:
        self.recorded: list = []
        self.replay = False
        self.reserved: list[list[str]] = []
        self.keys: list = []

    @hookimpl
    def durable_steps(self, ctx):
        runner, position = self, [0]

        class Steps:
            async def model(self, ctx, request, call_model):
                return await runner._step(position, call_model)

            def reserve(self, ctx, calls):
                runner.reserved.append([c.id for c in calls])

            async def tool(self, ctx, call, run):
                from clawkit.steps import idempotency_key

                token = idempotency_key.set(f"key-{call.id}")
                try:
                    return await runner._step(position, run)
                finally:
                    idempotency_key.reset(token)

        return Steps()

    async def _step(self, position, fn):
        i = position[0]
        position[0] += 1
        if self.replay:
            return self.recorded[i]
        value = await fn()
        self.recorded.append(value)
        return value


def test_a_replayed_turn_returns_recorded_steps_without_calling_model_or_tools(make_agent):
    effects: list = []

    class Tools:
        @hookimpl
        def register_tools(self, register, agent):
            def bump(ctx, n: int) -> str:
                """Count an effect."""
                effects.append((n, ctx.idempotency_key))
                return f"bumped {n}"

            register(bump)

    recorder = Recorder()
    script = [ScriptedReply.calls(call("bump", n=1), call("bump", n=2)), "done"]
    agent = make_agent(script, plugins=(recorder, Tools()), tools=["bump"])
    first = agent.run("go")
    assert first.reply == "done" and sorted(n for n, _ in effects) == [1, 2]
    assert all(key and key.startswith("key-") for _, key in effects)  # the tool sees the step's key
    assert len(recorder.reserved) == 1 and len(recorder.reserved[0]) == 2  # reserved in the model's order
    calls_before = len(agent.provider.requests)

    recorder.replay = True
    again = agent.run("go", session_id=first.session_id)
    assert again.reply == "done"
    assert len(agent.provider.requests) == calls_before  # the model was not called again
    assert len(effects) == 2  # nor the tools


@pytest.mark.narrow("the kernel's direct path when no durable_steps engine is installed; the full install has the workers' engine")
def test_without_an_engine_the_kernel_calls_directly(make_agent):
    agent = make_agent(["hi"])
    assert agent.run("hello").reply == "hi"
    assert not agent.hooks.has("durable_steps")


class MemoryQueue:
    @hookimpl
    def open_turn_queue(self, url):
        if not url.startswith("memq://"):
            return None
        return {"url": url}


def test_open_turn_queue_finds_the_plugin_for_the_url():
    from clawkit.plugins import get_plugin_manager

    # narrow: the kernel's queue lookup must find this probe, not an installed queue plugin
    pm = get_plugin_manager(extra=(MemoryQueue(),), load_entry_points=False)
    assert open_turn_queue("memq://here", pm=pm) == {"url": "memq://here"}
    with pytest.raises(ConfigError, match="ftp: no installed plugin runs turns on this URL"):
        open_turn_queue("ftp://x", pm=pm)
