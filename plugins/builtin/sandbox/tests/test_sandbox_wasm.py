"""WebAssembly tools: the shipped example through an agent on the loopback model server; fuel,
memory and deadline limits; ungranted paths; host tool proxies gated by the policy and audited."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import clawkit_policy
import clawkit_sandbox
import clawkit_tools
from clawkit.testing import unwrapped
from clawkit.testing.server import Reply
from clawkit_sandbox.wasm import MODULES, run_module

HERE = Path(__file__).parent
SPIN = """(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start") (loop $l (br $l))))"""
GROW = """(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $l
      (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1)) (then unreachable))
      (br $l))))"""


def tool_messages(model_server, n=-1):
    return [m["content"] for m in model_server.requests[n].messages if m["role"] == "tool"]


@pytest.fixture
def wasm_agent(http_agent, workspace):
    """The full install (every builtin: the shield, the budgets ... beside the sandbox), unless
    ``narrow="<why>"`` loads only tools, sandbox and policy."""
    def factory(*script, wasm_tools=(), tools=("text_stats",), policy=None, narrow=None, **sandbox):
        sections = {"sandbox": {"wasm_tools": list(wasm_tools), **sandbox}, "policy": policy or {}}
        return http_agent(*script, plugins=(clawkit_tools, clawkit_sandbox, clawkit_policy),
                          plugin_config=sections, tools=list(tools), narrow=narrow)

    return factory


def test_example_tool_runs_through_an_agent(wasm_agent, model_server, workspace):
    (workspace / "notes.txt").write_text("the quick brown fox\njumps over\n")
    agent = wasm_agent(
        Reply.tool_calls([("text_stats", {"text": "one two three\nfour"})]),
        Reply.tool_calls([("text_stats", {"path": "notes.txt"})]),
        Reply.tool_calls([("text_stats", {"path": "/etc/passwd"})]),
        Reply.tool_calls([("stats_nodirs", {"path": "notes.txt"})]),
        "counted",
        wasm_tools=[{"name": "stats_nodirs", "module": str(MODULES / "text_stats.wasm"), "risk": "safe"}],
        tools=["text_stats", "stats_nodirs"],
    )
    assert agent.run("count").reply == "counted"
    first, second, third, fourth = tool_messages(model_server)
    assert json.loads(first) == {"source": "text", "bytes": 18, "lines": 2, "words": 4, "longest_word": "three",
                                 "calls": 1, "total_words": 4}  # a fresh instance per call: always call 1
    assert json.loads(second)["words"] == 6 and json.loads(second)["lines"] == 2
    assert "not approved" in third and "root:" not in third  # the policy sees the path argument first
    assert fourth.startswith("Error: stats_nodirs: cannot open") and "quick" not in fourth  # nothing preopened


def test_limits_stop_runaway_modules(wasm_agent, model_server, workspace):
    (workspace / "spin.wat").write_text(SPIN)
    (workspace / "grow.wat").write_text(GROW)
    decls = [{"name": "spin", "module": "spin.wat", "fuel": 5_000_000},
             {"name": "spin_slow", "module": "spin.wat", "fuel": 10**15, "timeout": 0.3},
             {"name": "grow", "module": "grow.wat", "memory_mb": 8}]
    agent = wasm_agent(Reply.tool_calls([("spin", {})]), Reply.tool_calls([("spin_slow", {})]),
                       Reply.tool_calls([("grow", {})]), "stopped", wasm_tools=decls, tools=["spin*", "grow"],
                       policy={"risk": {"spin*": "safe", "grow": "safe"}})
    assert agent.run("go").reply == "stopped"
    fuel, deadline, memory = tool_messages(model_server)
    assert "used up its fuel (5,000,000 instructions)" in fuel
    assert "ran past its deadline (0.3 s)" in deadline
    assert "stopped at the memory limit (8 MiB" in memory


def test_host_proxy_is_gated_and_audited(wasm_agent, model_server, workspace, tmp_path):
    _host_proxy_is_gated_and_audited(wasm_agent, model_server, workspace, tmp_path, narrow=None)


def test_host_proxy_is_gated_and_audited_tools_sandbox_policy_only(wasm_agent, model_server, workspace, tmp_path):
    _host_proxy_is_gated_and_audited(
        wasm_agent, model_server, workspace, tmp_path,
        narrow="the host proxy's gate and ledger with only the plugins it needs, beside the full-install twin above")


def _host_proxy_is_gated_and_audited(wasm_agent, model_server, workspace, tmp_path, narrow):
    (workspace / "inside.txt").write_text("alpha beta\n")
    (tmp_path / "outside.txt").write_text("SECRET OUTSIDE")
    agent = wasm_agent(
        Reply.tool_calls([("text_stats", {"host_file": "inside.txt"})]),
        Reply.tool_calls([("text_stats", {"host_file": str(tmp_path / "outside.txt")})]),
        "done", tools=["text_stats", "read_file"], narrow=narrow,
    )
    result = agent.run("go")
    ok, refused = tool_messages(model_server)
    assert json.loads(unwrapped(ok)) == {"source": "inside.txt", "bytes": 11, "lines": 1, "words": 2, "longest_word": "alpha",
                              "calls": 1, "total_words": 2}
    assert "not approved" in refused and "SECRET" not in refused  # the policy asked; nobody could approve
    ledger = clawkit_policy.ledger_for(agent.store)
    host = [r for r in ledger.records(session=result.session_id) if r["tool"] == "read_file"]
    kinds = {(r["kind"], r["decision"]) for r in host}
    assert ("decision", "allow") in kinds and ("execution", "executed") in kinds
    assert ("decision", "require_approval") in kinds
    assert all(".host" in r["step_id"] for r in host)
    assert any(r["decision"] == "tool.host_call" for r in ledger.records(session=result.session_id))
    assert ledger.verify().ok


def test_host_tools_not_declared_are_refused(workspace):
    out = run_module(str(MODULES / "text_stats.wasm"), b'{"host_file": "x"}', memory_mb=16, fuel=10**8, timeout=5,
                     host_call=None)
    assert "host tools are not available" in out.stdout


@pytest.mark.skipif(shutil.which("uv") is None or os.environ.get("CLAWKIT_WASM_REBUILD") != "1",
                    reason="rebuilds with the pinned ziglang (a 96 MB download, minutes): set CLAWKIT_WASM_REBUILD=1")
@pytest.mark.e2e
def test_committed_module_is_reproducible(tmp_path):
    proc = subprocess.run(["bash", str(HERE.parent / "wasm" / "build.sh"), str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0 and "ziglang" in proc.stderr and "download" in proc.stderr.lower():
        pytest.skip("ziglang cannot be fetched here")
    assert proc.returncode == 0, proc.stderr
    for name in ("text_stats.wasm", "text_stats_task.wasm"):
        assert hashlib.sha256((tmp_path / name).read_bytes()).digest() == hashlib.sha256((MODULES / name).read_bytes()).digest()
