"""Contributors' ``prepare``: called at once, awaitables awaited (several concurrently, one in place),
a None answer costs no task, and a failing one — raising at once or when awaited — is reported, never
fatal (issue 29 goal 5: the kernel used to wrap every ``prepare`` in a task of its own)."""

from __future__ import annotations

import asyncio

from clawkit import hookimpl
from clawkit.prompt import PromptContributor, PromptSection


class _Waits(PromptContributor):
    def __init__(self, id: str, log: list) -> None:
        self.id, self.log, self.priority = id, log, 20

    async def prepare(self, ctx):
        await asyncio.sleep(0)
        self.log.append(self.id)

    def contribute(self, ctx):
        return PromptSection(self.id, f"{self.id} prepared" if self.id in self.log else f"{self.id} NOT prepared")


class _Nothing(PromptContributor):
    id, priority = "nothing", 30

    def prepare(self, ctx):
        return None

    def contribute(self, ctx):
        return PromptSection("nothing", "no wait needed")


class _Raises(PromptContributor):
    def __init__(self, id: str, at_once: bool) -> None:
        self.id, self.at_once, self.priority = id, at_once, 40

    def prepare(self, ctx):
        if self.at_once:
            raise RuntimeError("broken at once")

        async def later():
            raise RuntimeError("broken later")
        return later()

    def contribute(self, ctx):
        return PromptSection(self.id, f"{self.id} still contributes")


def _plugin(contributors):
    class P:
        name = "lean-prepare"

        @hookimpl
        def register_prompt_contributor(self, register, agent):
            for c in contributors:
                register(c)
    return P()


def test_one_awaitable_is_awaited_in_place_and_failures_are_reported(make_agent):
    log: list = []
    agent = make_agent(["ok"], plugins=(_plugin([_Waits("alpha", log), _Nothing(), _Raises("boom", True)]),))
    assert agent.run("hi").reply == "ok"
    system = agent.provider.requests[0].system
    assert "alpha prepared" in system and "no wait needed" in system and "boom still contributes" in system


def test_several_awaitables_are_awaited_and_a_late_failure_is_reported(make_agent):
    log: list = []
    agent = make_agent(["ok"], plugins=(_plugin([_Waits("alpha", log), _Waits("beta", log), _Raises("late", False)]),))
    assert agent.run("hi").reply == "ok"
    system = agent.provider.requests[0].system
    assert "alpha prepared" in system and "beta prepared" in system and "late still contributes" in system
    assert sorted(log) == ["alpha", "beta"]
