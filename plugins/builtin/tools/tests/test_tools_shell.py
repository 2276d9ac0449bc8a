"""shell_exec: working directory, timeout with process-group kill, output cap, scrubbed env."""

from __future__ import annotations

import asyncio
import time

import pytest

import clawkit_tools
from clawkit.testing.server import Reply
from clawkit.tools import ToolError
from clawkit_tools import scrubbed_env, shell_exec


def run(coro):
    return asyncio.run(coro)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            state = next(line for line in fh if line.startswith("State:"))
        return "Z" not in state.split()[1]  # a zombie waiting for its reaper is dead
    except (FileNotFoundError, StopIteration):
        return False


def test_string_and_argv_commands(workspace, ctx_for):
    ctx = ctx_for(workspace)
    (workspace / "sub").mkdir()
    assert run(shell_exec(ctx, "echo hello && exit 3")) == "exit code 3\nhello\n"
    assert run(shell_exec(ctx, ["printf", "%s|", "a b", "$HOME"])) == "exit code 0\na b|$HOME|"
    assert run(shell_exec(ctx, "pwd", cwd="sub")).endswith("/sub\n")
    assert run(shell_exec(ctx, "echo oops >&2")) == "exit code 0\noops\n"
    with pytest.raises(ToolError, match="outside the workspace"):
        run(shell_exec(ctx, "pwd", cwd=".."))
    with pytest.raises(ToolError, match="not found"):
        run(shell_exec(ctx, ["definitely-not-a-command-xyz"]))
    with pytest.raises(ToolError, match="empty"):
        run(shell_exec(ctx, "  "))


def test_timeout_kills_the_whole_process_group(workspace, ctx_for):
    ctx = ctx_for(workspace)
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 0.5 s; the process group was killed") as info:
        run(shell_exec(ctx, "sleep 30 & echo $! > bg.pid; echo started; sleep 30", timeout=0.5))
    assert time.monotonic() - started < 5
    assert "started" in str(info.value)
    pid = int((workspace / "bg.pid").read_text())
    deadline = time.monotonic() + 2
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid), "the background child survived the timeout"


def test_timeout_is_capped_by_config(workspace, ctx_for):
    ctx = ctx_for(workspace, shell_max_timeout=0.3, kill_grace=0.0)
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 0.3 s"):
        run(shell_exec(ctx, "sleep 10", timeout=100))
    assert time.monotonic() - started < 3


def test_output_is_capped(workspace, ctx_for):
    ctx = ctx_for(workspace, shell_output_bytes=1000)
    out = run(shell_exec(ctx, "head -c 300000 /dev/zero | tr '\\0' 'a'"))
    assert out.startswith("exit code 0\n" + "a" * 100)
    assert "[output truncated: 299000 more bytes not shown]" in out


def test_secrets_are_scrubbed_from_the_environment(workspace, ctx_for, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-1234567890abcdef")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_abcdefghijklmnopqrstuvwxyz")
    monkeypatch.setenv("DB_PASSWORD", "hunter22")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:p@db/x")
    monkeypatch.setenv("MY_SETTING", "visible")
    monkeypatch.setenv("CUSTOM_THING", "hidden-by-config")
    out = run(shell_exec(ctx_for(workspace, env_deny=["CUSTOM_*"], env_allow=["GITHUB_TOKEN"]), "env"))
    assert "MY_SETTING=visible" in out and "PATH=" in out
    for gone in ("sk-test-1234567890abcdef", "hunter22", "postgres://", "hidden-by-config"):
        assert gone not in out
    assert "GITHUB_TOKEN=ghp_" in out  # explicitly allowed
    env = scrubbed_env({"AWS_SECRET_ACCESS_KEY": "x", "HOME": "/h", "SESSION_COOKIE": "c", "LANG": "C"})
    assert env == {"HOME": "/h", "LANG": "C"}


def test_model_driven_shell_exec(llm_agent, model_server, workspace):
    agent = llm_agent(
        Reply.tool_calls([("shell_exec", {"command": ["sh", "-c", "echo from-model > out.txt; cat out.txt"]})]),
        "Ran it.",
        plugins=(clawkit_tools,), tools=["shell_exec"], approver=lambda c, r, ctx: True,
    )
    assert agent.run("run it").reply == "Ran it."
    tool_msg = [m for m in model_server.requests[1].messages if m["role"] == "tool"][0]
    assert "exit code 0\nfrom-model\n" in tool_msg["content"]  # the full install's shield wraps it as data
    assert (workspace / "out.txt").read_text() == "from-model\n"
    risk = {t.name: t.definition.risk.value for t in agent.tools.visible()}
    assert risk == {"shell_exec": "unsafe"}
