"""WebAssembly tools with one instance per task (``instance: task``): state persists across the
calls of a run, a new run gets a fresh instance, the instance is destroyed when the run ends
(and at agent close), a runaway call is stopped and its instance discarded, and the mounts are
fixed when the instance is created."""

from __future__ import annotations

import asyncio
import json
import threading
from types import SimpleNamespace

import pytest

import clawkit_policy
import clawkit_sandbox
import clawkit_tools
from clawkit.testing.server import Reply
from clawkit.types import ToolCall
from clawkit_sandbox.runtime import MODULES, Reactor, _ticker

# a reactor with state: each call answers how many calls this instance has served;
# {"spin": …} loops forever, {"grow": …} allocates until refused
COUNTER = """(module
  (memory (export "memory") 1)
  (global $count (mut i32) (i32.const 0))
  (func (export "clawkit_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "clawkit_handle") (param $p i32) (param $n i32) (result i64)
    (if (i32.eq (i32.load8_u offset=2 (local.get $p)) (i32.const 115)) (then (loop $spin (br $spin))))
    (if (i32.eq (i32.load8_u offset=2 (local.get $p)) (i32.const 103))
      (then (loop $grow
        (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1)) (then unreachable))
        (br $grow))))
    (global.set $count (i32.add (global.get $count) (i32.const 1)))
    (i32.store8 (i32.const 2048) (i32.add (i32.const 48) (global.get $count)))
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 1))))"""


def tool_messages(model_server, n=-1):
    return [m["content"] for m in model_server.requests[n].messages if m["role"] == "tool"]


def instance_events(agent, session_id):
    return [e["data"] | {"run_id": e["run_id"]} for e in agent.store.events(session_id, "tool.wasm_instance")]


@pytest.fixture
def task_agent(http_agent):
    def factory(*script, wasm_tools=(), tools=("text_stats_task",), policy=None, **kw):
        sections = {"sandbox": {"wasm_tools": list(wasm_tools)}, "policy": policy or {}}
        return http_agent(*script, plugins=(clawkit_tools, clawkit_sandbox, clawkit_policy), plugin_config=sections,
                          tools=list(tools), **kw)

    return factory


def test_state_persists_within_a_run_and_a_new_run_gets_a_fresh_instance(task_agent, model_server):
    agent = task_agent(Reply.tool_calls([("text_stats_task", {"text": "one two three"})]),
                       Reply.tool_calls([("text_stats_task", {"text": "four five"})]), "counted",
                       Reply.tool_calls([("text_stats_task", {"text": "six"})]), "again")
    tasks = agent.tools.tools["text_stats_task"].tasks
    first = agent.run("count")
    a, b = (json.loads(m) for m in tool_messages(model_server))
    assert (a["calls"], a["total_words"]) == (1, 3) and (b["calls"], b["total_words"]) == (2, 5)  # one instance
    assert tasks.live == {}  # destroyed when the run ended
    second = agent.run("count again", session_id=first.session_id)
    (c,) = (json.loads(m) for m in tool_messages(model_server)[2:])
    assert (c["calls"], c["total_words"]) == (1, 1)  # the next run: a fresh instance
    assert tasks.live == {}
    events = instance_events(agent, first.session_id)
    assert [(e["action"], e["run_id"]) for e in events] == [
        ("created", first.run_id), ("destroyed", first.run_id), ("created", second.run_id), ("destroyed", second.run_id)]
    assert events[1]["calls"] == 2 and events[3]["calls"] == 1
    assert events[0]["preopens"][0]["access"] == "rw" and events[0]["memory_mb"] == 64


def test_a_runaway_call_is_stopped_and_its_instance_discarded(task_agent, model_server, workspace):
    (workspace / "counter.wat").write_text(COUNTER)
    decls = [{"name": "counter", "module": "counter.wat", "instance": "task", "fuel": 2_000_000, "memory_mb": 4,
              "risk": "safe"},
             {"name": "counter_slow", "module": "counter.wat", "instance": "task", "fuel": 10**15, "timeout": 0.3,
              "risk": "safe"}]
    calls = [("counter", {"n": 1}), ("counter", {"n": 1}), ("counter", {"spin": 1}), ("counter", {"n": 1}),
             ("counter", {"grow": 1}), ("counter", {"n": 1}), ("counter_slow", {"n": 1}), ("counter_slow", {"spin": 1}),
             ("counter_slow", {"n": 1})]
    agent = task_agent(*[Reply.tool_calls([c]) for c in calls], "stopped", wasm_tools=decls, tools=["counter*"])
    result = agent.run("go")
    out = tool_messages(model_server)
    assert out[:2] == ["1", "2"]
    assert "used up its fuel (2,000,000 instructions)" in out[2] and "instance was discarded" in out[2]
    assert out[3] == "1"  # fresh: the state went with the discarded instance
    assert "stopped at the memory limit (4 MiB" in out[4] and "discarded" in out[4]
    assert out[5] == "1"
    assert out[6] == "1" and "ran past its deadline (0.3 s)" in out[7] and out[8] == "1"
    actions = [e["action"] for e in instance_events(agent, result.session_id) if e["tool"] == "counter"]
    assert actions == ["created", "discarded", "created", "discarded", "created", "destroyed"]
    assert agent.tools.tools["counter"].tasks.live == {}


def test_mounts_are_fixed_when_the_instance_is_created(task_agent, model_server, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("alpha beta gamma")
    stats = str(MODULES / "text_stats_task.wasm")
    decls = [{"name": "per_task", "module": stats, "instance": "task", "dirs": [".", str(outside)], "risk": "safe"},
             {"name": "per_call", "module": stats, "instance": "call", "dirs": [".", str(outside)], "risk": "safe"}]
    # "dir" names the directory, so approving the step grants it (a preopen is a directory)
    target = {"path": str(outside / "f.txt"), "dir": str(outside)}
    agent = task_agent(Reply.tool_calls([("per_task", {"text": "x"})]),
                       Reply.tool_calls([("per_task", target)]),
                       Reply.tool_calls([("per_call", target)]), "done",
                       wasm_tools=decls, tools=["per_task", "per_call"], approver=lambda *a: True)
    agent.run("go")
    created, widened, per_call = tool_messages(model_server)
    assert json.loads(created)["calls"] == 1
    # approving the step granted the path, but the live instance keeps the mounts it was created with
    assert "cannot open" in widened and "alpha" not in widened
    assert json.loads(per_call)["words"] == 3  # the same approval, a fresh instance: it sees the grant


def test_a_command_module_cannot_be_kept_per_task(task_agent, model_server):
    decl = {"name": "cmd_task", "module": str(MODULES / "text_stats.wasm"), "instance": "task", "risk": "safe"}
    agent = task_agent(Reply.tool_calls([("cmd_task", {"text": "a"})]), "ok", wasm_tools=[decl], tools=["cmd_task"])
    agent.run("go")
    (msg,) = tool_messages(model_server)
    assert "must be a WASI reactor exporting clawkit_alloc and clawkit_handle" in msg and "instance: call" in msg


def test_agent_close_destroys_instances_a_run_left_behind(task_agent):
    agent = task_agent()
    tool = agent.tools.tools["text_stats_task"]
    kept = []
    ctx = SimpleNamespace(run_id="run-x", at_end=kept.append, workspace=agent.config.workspace, state={},
                          step_id=None, runtime=None, emit=lambda *a, **k: None)
    result = asyncio.run(tool.run(ctx, ToolCall(id="c1", name="text_stats_task", arguments={"text": "a b"})))
    assert json.loads(result.content)["calls"] == 1 and len(kept) == 1  # the run never ended
    reactor = tool.tasks.live["run-x"]
    assert reactor.alive
    agent.close()  # agent_closing
    assert tool.tasks.live == {} and not reactor.alive


def test_closing_during_a_call_destroys_the_instance_when_the_call_stops(tmp_path):
    wat = tmp_path / "counter.wat"
    wat.write_text(COUNTER)
    reactor = Reactor(str(wat), memory_mb=4, preopens=[])
    assert reactor.call(b'{"n": 1}', fuel=10**6, timeout=1).stdout == "1"
    outcome = {}
    with _ticker:
        worker = threading.Thread(target=lambda: outcome.update(r=reactor.call(b'{"spin": 1}', fuel=10**15, timeout=0.5)))
        worker.start()
        while not reactor.lock.locked():
            pass
        assert reactor.close() is False  # busy: destroyed when the call stops, not under it
        worker.join(10)
    assert "deadline" in outcome["r"].failure and not reactor.alive
    assert "destroyed" in reactor.call(b'{"n": 1}', fuel=10**6, timeout=1).failure


def test_a_cancelled_run_destroys_its_instance(make_agent, workspace):
    """The run is cancelled while its per-task call spins: the run's end (``ctx.at_end``) releases
    the instance, which is destroyed as soon as the running call stops at its deadline."""
    from clawkit.testing.scripted import ScriptedReply

    (workspace / "counter.wat").write_text(COUNTER)
    decl = {"name": "counter", "module": "counter.wat", "instance": "task", "fuel": 10**15, "timeout": 1.0,
            "risk": "safe"}
    agent = make_agent([ScriptedReply.calls(("counter", {"n": 1})), ScriptedReply.calls(("counter", {"spin": 1})), "x"],
                       plugins=(clawkit_tools, clawkit_sandbox, clawkit_policy), tools=["counter"],
                       plugin_config={"sandbox": {"wasm_tools": [decl]}})
    tasks = agent.tools.tools["counter"].tasks

    async def cancel_mid_call():
        turn = asyncio.ensure_future(agent.turn("go"))
        while not (tasks.live and next(iter(tasks.live.values())).calls == 1
                   and next(iter(tasks.live.values())).lock.locked()):
            await asyncio.sleep(0.01)
        reactor = next(iter(tasks.live.values()))
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn
        return reactor

    reactor = asyncio.run(cancel_mid_call())
    assert tasks.live == {}  # released by the cancelled run's end
    reactor.lock.acquire(timeout=5)  # the spinning call stops at its 1 s deadline
    reactor.lock.release()
    assert not reactor.alive
    (session,) = agent.store.list()
    actions = [e["data"]["action"] for e in agent.store.events(session["id"], "tool.wasm_instance")]
    assert actions == ["created", "destroy_pending"]  # released mid-call: destroyed when the call stopped
