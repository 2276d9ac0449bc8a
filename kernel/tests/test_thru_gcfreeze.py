"""After the process's first turn the kernel freezes the heap (clawkit.gcfreeze): the start-up objects of a
full install leave the cycle collector's walks (issue 29 goal 5); once per process; only in a process the
``clawkit`` command owns, or with CLAWKIT_GC_FREEZE=1 (an embedding application keeps its collector);
CLAWKIT_GC_FREEZE=0 turns it off. Run in a child process: the freeze is process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import asyncio, gc, json, sys, tempfile
from clawkit.config import collect_sections, validate_agent
from clawkit.hooks import HookRunner
from clawkit.loop import Agent
from clawkit.testing import ScriptedProvider
from clawkit.testing.install import plugin_manager

calls = []
real_freeze = gc.freeze
gc.freeze = lambda: (calls.append(1), real_freeze())[1]

with tempfile.TemporaryDirectory() as ws:
    pm = plugin_manager()  # every installed plugin, as a user's install
    cfg = validate_agent({"name": "a", "model": "scripted/test", "workspace": ws}, "<t>", {}, collect_sections(HookRunner(pm)))
    agent = Agent(cfg, pm=pm, provider=ScriptedProvider(["one", "two"]))
    before = gc.get_freeze_count()
    first = asyncio.run(agent.turn("hi")).reply
    after_first = gc.get_freeze_count()
    second = asyncio.run(agent.turn("again")).reply
    after_second = gc.get_freeze_count()
    agent.close()
print(json.dumps({"replies": [first, second], "before": before, "after_first": after_first, "after_second": after_second, "calls": len(calls)}))
"""


def run(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_GC_FREEZE"}
    if env_value is not None:
        env["CLAWKIT_GC_FREEZE"] = env_value
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_first_turn_freezes_the_heap_once_when_switched_on_and_a_host_keeps_its_collector():
    on = run("1")
    assert on["replies"] == ["one", "two"]
    assert on["before"] == 0 and on["after_first"] > 10_000  # the full install's start-up heap
    assert on["calls"] == 1  # once per process: later objects stay collectable
    for value in (None, "0"):  # an application embedding clawkit: its collector is its own
        off = run(value)
        assert off["replies"] == ["one", "two"]
        assert off["before"] == off["after_first"] == off["after_second"] == 0 and off["calls"] == 0


def test_the_clawkit_command_owns_its_process():
    code = ("import json, sys; from clawkit import cli, gcfreeze; before = gcfreeze.enabled(); "
            "rc = cli.main(['plugins', '--json']); print(json.dumps([before, gcfreeze.enabled(), rc]), file=sys.stderr)")
    for value, expected in ((None, [False, True, 0]), ("0", [False, False, 0])):
        env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_GC_FREEZE"}
        if value is not None:
            env["CLAWKIT_GC_FREEZE"] = value
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert json.loads(out.stderr.strip().splitlines()[-1]) == expected, out.stderr[-2000:]
