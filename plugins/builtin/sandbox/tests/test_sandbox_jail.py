"""The bubblewrap jail through the real shell_exec, the confine_process hook and the policy's ledger."""

from __future__ import annotations

import json
import os
import time

import pytest

import clawkit_policy
import clawkit_sandbox
import clawkit_tools
from clawkit import hookimpl
from clawkit.process import ProcessLaunch, ProcessSpec, confine
from clawkit.testing.scripted import ScriptedReply
from clawkit_sandbox.jail import problem
from clawkit_sandbox.config import SandboxConfig

needs_bwrap = pytest.mark.skipif(problem(SandboxConfig()) is not None, reason="bubblewrap cannot run here")
PLUGINS = (clawkit_tools, clawkit_sandbox, clawkit_policy)
GRANT = {"grants": [{"tools": ["shell_exec"], "commands": ["*"]}]}


def tool_results(agent, session_id):
    """What each tool call returned, as stored (the full install's shield wraps it as data: compare with ``in``)."""
    return [m.tool_result.content for m in agent.store.messages(session_id) if m.role == "tool"]


def shell(agent, *commands, timeout=None):
    """Run each command as one model-driven shell_exec call; return the tool results."""
    for c in commands:
        args = {"command": c} if timeout is None else {"command": c, "timeout": timeout}
        agent.provider.add(ScriptedReply.calls(("shell_exec", args)))
    agent.provider.add("done")
    result = agent.run("go")
    return tool_results(agent, result.session_id), result


@pytest.fixture
def jailed(make_agent):
    def factory(sandbox=None, policy=GRANT, **kw):
        sections = {"policy": policy, "sandbox": {"cpu_seconds": 5, "memory_mb": 256, "processes": 32, **(sandbox or {})}}
        kw.setdefault("approver", lambda *a: True)  # every call approved: the jail alone contains it
        return make_agent([], plugins=PLUGINS, plugin_config=sections, tools=["shell_exec"], **kw)

    return factory


@needs_bwrap
def test_jail_confines_and_is_audited(jailed, workspace, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET")
    agent = jailed()
    results, run = shell(agent, "echo hi", f"cat {outside}/secret.txt", f"echo pwned > {outside}/new.txt",
                         f"ln -s {outside}/secret.txt link && cat link", "id -u && echo made > inside.txt")
    assert "exit code 0\nhi\n" in results[0]
    assert "No such file or directory" in results[1] and "TOP-SECRET" not in results[1]
    assert "sandboxed (bubblewrap)" in results[1]  # the reason reaches the model
    assert "cannot create" in results[2] and "sandboxed" in results[2]
    assert not (outside / "new.txt").exists()
    assert "TOP-SECRET" not in results[3]
    assert "exit code 0\n65534\n" in results[4] and (workspace / "inside.txt").read_text() == "made\n"
    ledger = clawkit_policy.ledger_for(agent.store)
    rows = [r for r in ledger.records() if r["decision"] == "tool.sandbox"]
    assert len(rows) == 5
    data = rows[0]["data"]
    assert data["mode"] == "bwrap" and data["network"] == "none"
    assert {"path": os.path.realpath(workspace), "access": "rw", "why": "workspace"} in data["mounts"]
    assert data["limits"]["processes"] == 32
    assert ledger.verify().ok


@needs_bwrap
def test_granted_paths_are_mounted_as_granted(jailed, tmp_path):
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir(), rw.mkdir()
    (ro / "data.txt").write_text("readable")
    policy = {"grants": [{"tools": ["shell_exec"], "commands": ["*"]},
                         {"tools": ["shell_exec"], "paths": [str(ro)], "access": "ro"},
                         {"tools": ["shell_exec"], "paths": [str(rw)]}]}
    agent = jailed(policy=policy)
    results, _ = shell(agent, f"cat {ro}/data.txt", f"echo x > {ro}/new.txt", f"echo y > {rw}/new.txt")
    assert "exit code 0\nreadable" in results[0]
    assert "Read-only file system" in results[1] and not (ro / "new.txt").exists()
    assert "exit code 0\n" in results[2] and (rw / "new.txt").read_text() == "y\n"


@needs_bwrap
def test_limits_fork_bomb_memory_and_timeout(jailed, workspace):
    agent = jailed()
    results, _ = shell(agent, "python3 -c 'a = []\nwhile True: a.append(bytearray(1 << 24))'", "b(){ b | b & }; b; sleep 3",  # the shell outlives the bomb until a fork fails ('wait' could end first)
                       timeout=5)
    assert "MemoryError" in results[0] and "256 MiB memory" in results[0]
    # held at the process limit; the jail dies with its first shell (or at the timeout)
    assert "Cannot fork" in results[1] and ("sandboxed (bubblewrap)" in results[1] or "killed the jail" in results[1])
    started = time.monotonic()
    results, _ = shell(agent, "setsid sh -c 'sleep 3; echo late > late.txt' & sleep 30", timeout=1)
    assert "timed out after 1 s" in results[0] and "killed the jail" in results[0]
    time.sleep(max(0.0, started + 3.5 - time.monotonic()))
    assert not (workspace / "late.txt").exists(), "a process outlived the jail's timeout"


def test_unavailable_bwrap_refuses_with_cause_and_setting(jailed, workspace):
    agent = jailed(sandbox={"bwrap": "/nonexistent/bwrap"})
    results, _ = shell(agent, "echo should-not-run > ran.txt")
    assert "not installed" in results[0] and "plugins.sandbox.mode: off" in results[0]
    assert not (workspace / "ran.txt").exists()
    rows = [r for r in clawkit_policy.ledger_for(agent.store).records() if r["decision"] == "tool.sandbox"]
    assert rows and rows[0]["data"]["mode"] == "refused"


def test_mode_off_runs_unsandboxed_and_says_so(jailed, tmp_path):
    agent = jailed(sandbox={"mode": "off"})
    (tmp_path / "outside.txt").write_text("visible")
    results, _ = shell(agent, f"cat {tmp_path}/outside.txt")
    assert "exit code 0\nvisible" in results[0]
    rows = [r for r in clawkit_policy.ledger_for(agent.store).records() if r["decision"] == "tool.sandbox"]
    assert rows[0]["data"]["mode"] == "off"


def test_without_the_sandbox_plugin_tools_run_as_before(make_agent, tmp_path):
    # a command pattern pre-approves arguments outside the workspace only within the grant's paths (issue 12)
    grant = {"grants": [{**GRANT["grants"][0], "paths": [str(tmp_path)]}]}
    agent = make_agent([], plugins=(clawkit_tools, clawkit_policy), plugin_config={"policy": grant, "sandbox": {"enabled": False}},
                       tools=["shell_exec"])
    (tmp_path / "outside.txt").write_text("visible")
    results, _ = shell(agent, f"cat {tmp_path}/outside.txt")
    assert "exit code 0\nvisible" in results[0]


class FailingJail:
    @hookimpl
    def confine_process(self, ctx, spec):
        raise RuntimeError("jail broken")


class PrefixJail:
    def __init__(self):
        self.seen = []

    @hookimpl
    def confine_process(self, ctx, spec):
        self.seen.append(spec)
        return ProcessLaunch(argv=["env", "JAILED=1", *spec.argv], cwd=spec.cwd, env=spec.env, sandbox={"mode": "test"})


def test_confine_process_hook_fails_closed_and_can_wrap(make_agent, workspace):
    agent = make_agent([], plugins=(clawkit_tools, FailingJail()), tools=["shell_exec"], approver=lambda *a: True)
    results, _ = shell(agent, "echo ran > ran.txt")
    assert "not run" in results[0] and "jail broken" in results[0] and not (workspace / "ran.txt").exists()
    jail = PrefixJail()
    agent = make_agent([], plugins=(clawkit_tools, jail), tools=["shell_exec"], approver=lambda *a: True)
    results, _ = shell(agent, "echo $JAILED")
    assert "exit code 0\n1\n" in results[0]
    assert isinstance(jail.seen[0], ProcessSpec) and jail.seen[0].tool == "shell_exec"


def test_confine_without_hooks_is_the_spec(workspace):
    import asyncio

    spec = ProcessSpec("t", ["true"], str(workspace), {"PATH": "/usr/bin"}, 1.0)
    launch = asyncio.run(confine(object(), spec))
    assert launch.argv == ["true"] and launch.sandbox == {}


def test_doctor_reports_whether_the_sandbox_works(capsys):
    from clawkit.cli import main

    code = main(["doctor", "--json"])
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)}
    assert {"bubblewrap", "process limit", "wasmtime"} <= set(checks)
    works = problem(SandboxConfig()) is None
    assert checks["bubblewrap"]["ok"] is works and (code == 0) is works
    if works:
        assert checks["jail runs"]["ok"] and checks["home hidden"]["ok"] and checks["system read-only"]["ok"]
        assert checks["per-host network"]["ok"], checks["per-host network"]
    assert main(["doctor", "--bwrap", "/nonexistent/bwrap"]) == 1
    err = capsys.readouterr().err
    assert "plugins.sandbox.mode: off" in err


@needs_bwrap
def test_the_jail_dies_with_the_agent_process(workspace, tmp_path):
    """--die-with-parent: the agent killed by SIGKILL mid-command takes the whole jail with it."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "agent.py"
    script.write_text(
        "import asyncio, sys\n"
        "from types import SimpleNamespace\n"
        "import clawkit_sandbox\n"
        "from clawkit.hooks import HookRunner\n"
        "from clawkit.plugins import get_plugin_manager\n"
        "from clawkit_tools import shell_exec\n"
        "pm = get_plugin_manager(extra=(clawkit_sandbox,), load_entry_points=False)\n"
        "ctx = SimpleNamespace(workspace=sys.argv[1], state={}, plugin_config=lambda n: None, agent=None,\n"
        "                      step_id=None, hooks=HookRunner(pm), emit=lambda *a, **k: None)\n"
        "asyncio.run(shell_exec(ctx, \"setsid sh -c 'sleep 3; echo late > late.txt' & echo started > started.txt; sleep 60\"))\n"
    )
    proc = subprocess.Popen([sys.executable, str(script), str(workspace)])
    try:
        deadline = time.monotonic() + 60
        while not (workspace / "started.txt").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the jailed command never started"
            time.sleep(0.05)
        started = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        time.sleep(max(0.0, started + 3.5 - time.monotonic()))
        assert not (workspace / "late.txt").exists(), "a jailed process outlived the agent"
    finally:
        if proc.poll() is None:
            proc.kill()
