"""Items 7–13 through the CLI (one interpreter runs the batch): grants and symlinks, secrets in
transcripts, command-pattern grants, hangs, bad input; plus the process-level items (children
die with the agent, one process per session) with real signals and concurrent processes."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from clawkit.testing.server import Reply

from .conftest import Cases, audit_rows, cli_env, run_batch, write_agent

SAFE_ALL = """\
policy:
  risk: {"*": safe}
"""
SECRET_TOKEN = "ghp_" + "Zx9Yw8Vu7Ts6" * 3


def calls(*pairs):
    return Reply.tool_calls(list(pairs))


def bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, server, audit_home):
    root = tmp_path_factory.mktemp("medium")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE-SECRET-CONTENT")
    cases = Cases()
    jobs = []

    def job(name, message, *replies, tools=(), plugins=SAFE_ALL, files=None, agent_text=None, argv_extra=()):
        ws = root / name
        write_agent(ws, server, list(tools), plugins)
        if agent_text is not None:
            (ws / "agent.yaml").write_text(agent_text)
        for rel, text in (files or {}).items():
            p = ws / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text)
        tag = cases.add(name, *replies)
        jobs.append({"name": name, "cwd": str(ws),
                     "argv": ["run", "agent.yaml", f"{tag} {message}", "--json", *argv_extra]})
        return ws

    # 7: a denied step grant widens nothing; a symlink swapped in mid-turn is resolved afresh
    job("denied_grant", "read it", calls(("read_file", {"path": str(outside / "secret.txt")})),
        calls(("read_file", {"path": str(outside / "secret.txt")})), "ok",
        tools=("read_file",), plugins="policy: {step_grant_scope: run}\n")
    ws = job("symlink_swap", "read twice", calls(("read_file", {"path": "link.txt"})),
             calls(("shell_exec", {"command": f"ln -sfn {outside / 'secret.txt'} link.txt"})),
             calls(("read_file", {"path": "link.txt"})), "ok", tools=("read_file", "shell_exec"),
             files={"inside.txt": "inside text"})
    os.symlink("inside.txt", ws / "link.txt")
    # 8: secrets in the user's message, in tool arguments and in the final reply never reach storage
    job("transcript", f"my password=hunter2hunter2 and token {SECRET_TOKEN}",
        calls(("write_file", {"path": "notes.txt", "content": f"api_key: {SECRET_TOKEN}"})),
        f"Saved. Your token {SECRET_TOKEN} and DB url postgres://u:Pa55word9@db/x are safe.", tools=("write_file",))
    # 9: pre-approved command patterns never reach outside through options or arguments
    grants = f"""\
        policy:
          grants: [{{tools: [shell_exec], commands: ["git diff*", "cat *", "git -C*"]}}]
        """
    job("pattern_no_index", "diff", calls(("shell_exec", {"command": f"git diff --no-index {outside / 'secret.txt'} /dev/null"})), "ok",
        tools=("shell_exec",), plugins=grants)
    job("pattern_output", "diff", calls(("shell_exec", {"command": f"git diff --output={outside / 'written.txt'}"})), "ok",
        tools=("shell_exec",), plugins=grants)
    job("pattern_dotdot", "cat", calls(("shell_exec", {"command": "cat ../outside/secret.txt"})), "ok",
        tools=("shell_exec",), plugins=grants)
    job("pattern_dash_c", "log", calls(("shell_exec", {"command": f"git -C{outside} diff"})), "ok",
        tools=("shell_exec",), plugins=grants)
    job("pattern_control", "cat", calls(("shell_exec", {"command": "cat inside.txt"})), "ok",
        tools=("shell_exec",), plugins=grants, files={"inside.txt": "PATTERN-CONTROL-RAN"})
    # 10: hangs — every parser and pattern is bounded
    job("yaml_bomb", "hi", agent_text=f"name: bomb\nmodel: openai/x\n{bomb()}")
    job("yaml_deep", "hi", agent_text="name: deep\nmodel: openai/x\nplugins: " + "[" * 3000 + "]" * 3000 + "\n")
    job("frontmatter_bomb", "hi", "fine", files={".agents/prompts/evil.md": "---\n" + bomb() + "---\nbody\n"})
    job("glob_stars", "find", calls(("glob", {"pattern": "**/" * 12 + "*.txt"})), calls(("glob", {"pattern": "**/*/**/*/**/*.txt"})), "ok",
        tools=("glob",), files={f"d{i}/e{j}/f{k}.txt": "x" for i in range(6) for j in range(6) for k in range(6)})

    def read_back(request):
        text = json.dumps(request.messages)
        m = re.search(r"(out_[A-Za-z0-9_]+)", text)
        return calls(("read_tool_output", {"output_id": m.group(1) if m else "missing", "pattern": "(a+)+$"}))

    job("regex_redos", "grep", calls(("shell_exec", {"command": "python3 -c \"print('a'*60000+'!')\""})), read_back,
        calls(("read_tool_output", {"output_id": "x", "pattern": r"(a)\1"})), "ok", tools=("shell_exec", "read_tool_output"))
    # 12: bad input becomes an error result, never a crash
    job("non_utf8_names", "list", calls(("list_dir", {"path": "."}), ("glob", {"pattern": "*"})), "ok",
        tools=("list_dir", "glob"), files={os.fsdecode(b"bad\xff\xfename.txt"): "x"})
    job("huge_int", "read", Reply.malformed_tool_call("read_file", '{"path": "a.txt", "offset": 1' + "0" * 5000 + "}"), "ok",
        tools=("read_file",), files={"a.txt": "x"})
    job("deep_json", "read", Reply.malformed_tool_call("read_file", '{"path": ' + "[" * 50000 + "]" * 50000 + "}"), "ok",
        tools=("read_file",))
    job("lone_surrogate", "hi", Reply.text("broken \ud800 reply"), tools=())
    job("surrogate_args", "write", calls(("write_file", {"path": "s.txt", "content": "x\udcffy"})), "ok", tools=("write_file",))
    server.script(cases)
    results = run_batch(jobs, audit_home, root)
    return results, cases, root, outside


def _ok(results, name):
    res = results[name]
    assert res["rc"] == 0 and "CRASH" not in res["stderr"] and "Traceback" not in res["stderr"], res["stderr"][-3000:]
    return res


def test_denied_step_grant_widens_nothing(outcome):
    results, cases, root, outside = outcome
    _ok(results, "denied_grant")
    assert "OUTSIDE-SECRET-CONTENT" not in cases.seen("denied_grant")
    rows = audit_rows(root / "denied_grant")
    assert [r["approval_result"] for r in rows if r["kind"] == "approval"] == ["denied", "denied"]
    assert not any(r["kind"] == "grant" for r in rows)


def test_symlink_swapped_mid_turn_is_resolved_again(outcome):
    results, cases, root, outside = outcome
    _ok(results, "symlink_swap")
    results_seen = cases.tool_list("symlink_swap")
    assert "inside text" in results_seen[0]
    assert "OUTSIDE-SECRET-CONTENT" not in cases.seen("symlink_swap")
    decisions = [r for r in audit_rows(root / "symlink_swap") if r["kind"] == "decision" and r["tool"] == "read_file"]
    assert decisions[-1]["decision"] == "require_approval" and "outside the workspace" in decisions[-1]["reason"]


def test_transcripts_and_exports_hold_no_secrets(outcome, audit_home):
    results, cases, root, outside = outcome
    res = _ok(results, "transcript")
    ws = root / "transcript"
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    stored = json.dumps(conn.execute("SELECT content, data FROM messages").fetchall())
    events = json.dumps(conn.execute("SELECT data FROM events").fetchall())
    conn.close()
    export = subprocess.run([sys.executable, "-m", "clawkit", "sessions", "export", res["json"]["session_id"]], cwd=ws,
                            env=cli_env(audit_home), capture_output=True, text=True, timeout=60)
    assert export.returncode == 0, export.stderr
    for text in (stored, events, export.stdout):
        for secret in ("hunter2hunter2", SECRET_TOKEN, "Pa55word9"):
            assert secret not in text
    assert "[REDACTED]" in export.stdout


@pytest.mark.parametrize("name", ["pattern_no_index", "pattern_output", "pattern_dotdot", "pattern_dash_c"])
def test_pattern_grants_stay_in_scope(outcome, name):
    results, cases, root, outside = outcome
    _ok(results, name)
    assert "OUTSIDE-SECRET-CONTENT" not in "".join(cases.tool_results(name).values())
    assert not (outside / "written.txt").exists()
    decisions = [r for r in audit_rows(root / name) if r["kind"] == "decision"]
    assert decisions[-1]["decision"] == "require_approval"
    assert not any(r["kind"] == "execution" for r in audit_rows(root / name))


def test_pattern_grant_still_pre_approves_in_scope(outcome):
    results, cases, root, outside = outcome
    _ok(results, "pattern_control")
    assert "PATTERN-CONTROL-RAN" in "".join(cases.tool_results("pattern_control").values())


@pytest.mark.parametrize("name,message", [("yaml_bomb", "expands to more than"), ("yaml_deep", "nested")])
def test_hostile_agent_yaml_is_refused_quickly(outcome, name, message):
    results, cases, root, outside = outcome
    res = results[name]
    assert res["rc"] == 2 and message in res["stderr"] and "agent.yaml" in res["stderr"], res["stderr"]
    assert res["seconds"] < 10


def test_hostile_front_matter_does_not_hang_the_turn(outcome):
    results, cases, root, outside = outcome
    res = _ok(results, "frontmatter_bomb")
    assert res["json"]["reply"] == "fine" and res["seconds"] < 60


def test_glob_is_bounded(outcome):
    results, cases, root, outside = outcome
    _ok(results, "glob_stars")
    first, second = cases.tool_list("glob_stars")
    assert "too complex" in first
    assert "d5/e5/f5.txt" in second
    rows = audit_rows(root / "glob_stars")
    assert sum(1 for r in rows if r["kind"] == "execution") == 2


def test_model_supplied_regex_runs_in_linear_time(outcome):
    results, cases, root, outside = outcome
    res = _ok(results, "regex_redos")
    shown = cases.tool_list("regex_redos")
    assert len(shown) == 3 and "backreferences" in shown[2]
    assert res["seconds"] < 60


@pytest.mark.parametrize("name", ["non_utf8_names", "huge_int", "deep_json", "lone_surrogate", "surrogate_args"])
def test_bad_input_is_an_error_not_a_crash(outcome, name):
    results, cases, root, outside = outcome
    res = _ok(results, name)
    assert res["json"].get("session_id")
    seen = cases.tool_results(name)
    if name == "non_utf8_names":
        assert all("bad\\xff\\xfename.txt" in r for r in seen.values())
    if name in ("huge_int", "deep_json"):
        assert all(r.startswith("Error:") or "Error:" in r for r in seen.values())


# --- 11: children die with the agent ------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_shell_children_die_with_the_agent(tmp_path, server, audit_home, sig):
    ws = tmp_path / "ws"
    write_agent(ws, server, ["shell_exec"], SAFE_ALL)
    server.reset()
    marker = f"{os.getpid()}{sig.value}7"  # finds the children from outside any sandbox's PID namespace
    server.script(calls(("shell_exec", {"command": f"sleep 300.{marker}1 & sleep 300.{marker}2", "timeout": 600})), "ok")
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "run", "agent.yaml", "go"], cwd=ws, env=cli_env(audit_home),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        pids = _sleepers(marker)
        while len(pids) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the shell command never started"
            time.sleep(0.1)
            pids = _sleepers(marker)
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        alive = pids
        while alive and time.monotonic() < deadline:
            alive = [p for p in pids if _alive(p)]
            time.sleep(0.1)
        assert not alive, f"children {alive} outlived the agent ({sig.name})"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in _sleepers(marker):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read().split(b"\0")
            except OSError:
                continue
            if cmd and cmd[0].endswith(b"sleep") and any(marker.encode() in part for part in cmd[1:]):
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) is dead
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


# --- 13: one process per session -----------------------------------------------------------


def test_second_process_on_a_session_waits_or_fails_clearly(tmp_path, server, audit_home):
    ws = tmp_path / "ws"
    write_agent(ws, server, ["shell_exec"], SAFE_ALL)
    cases = Cases()
    slow = cases.add("slow", calls(("shell_exec", {"command": "touch started; while [ ! -f release ]; do sleep 0.05; done",
                                                    "timeout": 300})), "first done")
    second = cases.add("second", "second done")
    third = cases.add("third", "third done")
    server.reset()
    server.script(cases)
    env = cli_env(audit_home, CLAWKIT_SESSION_LOCK_WAIT="90")
    base = [sys.executable, "-m", "clawkit", "run", "agent.yaml"]
    first = subprocess.Popen(base + [f"{slow} go", "--new-session", "ses_shared", "--json"], cwd=ws, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not (ws / "started").exists():
        assert time.monotonic() < deadline and first.poll() is None, first.stderr.read() if first.poll() is not None else ""
        time.sleep(0.05)
    waiter = subprocess.Popen(base + [f"{second} hi", "--session", "ses_shared", "--json"], cwd=ws, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    quick = subprocess.run(base + [f"{third} hi", "--session", "ses_shared"], cwd=ws, capture_output=True, text=True,
                           env=cli_env(audit_home, CLAWKIT_SESSION_LOCK_WAIT="0.2"), timeout=120, start_new_session=True)
    (ws / "release").touch()  # the first turn may end now
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = waiter.communicate(timeout=120)
    assert first.returncode == 0 and waiter.returncode == 0, err1 + err2
    assert quick.returncode == 2 and "in use by another process" in quick.stderr, quick.stderr
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    roles = [r[0] for r in conn.execute("SELECT role FROM messages WHERE session_id = 'ses_shared' ORDER BY id")]
    conn.close()
    # never interleaved: each turn's messages are contiguous, and every tool call is answered before the next turn
    assert roles[:4] == ["user", "assistant", "tool", "assistant"], roles
    assert "second done" in out2
    assert any(r["kind"] == "execution" and r["tool"] == "shell_exec" for r in audit_rows(ws))


# --- 10: a tool that never returns ----------------------------------------------------------


def test_tools_that_never_return_are_abandoned_at_their_deadline(http_agent):
    import asyncio as aio
    import threading

    from clawkit import hookimpl

    release = threading.Event()

    class Hanging:
        @hookimpl
        def register_tools(self, register, agent):
            async def hang_async(ctx) -> str:
                """Never returns."""
                await aio.sleep(3600)
                return "late"

            def hang_sync(ctx) -> str:
                """Blocks its thread."""
                release.wait(3600)
                return "late"

            register(hang_async, name="hang_async")
            register(hang_sync, name="hang_sync")

    agent = http_agent(calls(("hang_async", {}), ("hang_sync", {})), "gave up", plugins=(Hanging(),),
                       tools=["hang_async", "hang_sync"], limits={"tool_timeout": 1})
    started = time.monotonic()
    result = agent.run("go")
    release.set()
    assert time.monotonic() - started < 120  # the first model call imports litellm (slow on a busy machine)
    assert result.reply == "gave up"
    assert all(c["is_error"] for c in result.tool_calls)
    assert len(agent.store.events(result.session_id, "tool.timeout")) == 2
