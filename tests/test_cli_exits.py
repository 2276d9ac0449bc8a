"""How the CLI ends: interrupted replies (cut stream, Ctrl-C in chat through a pseudo-terminal,
SIGTERM mid-turn), closed pipes, unknown sessions, bad flags, missing workspaces."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from clawkit.testing.server import Fault, Reply

pytestmark = pytest.mark.e2e
KERNEL_ONLY = {"CLAWKIT_LOAD_PLUGINS": "clawkit-litellm"}


@pytest.fixture
def agent_dir(tmp_path, model_server):
    model = {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "max_retries": 0}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({"name": "exit-bot", "model": model,
                                                        "instructions": "Be brief."}))
    return tmp_path


def env_with(extra: dict | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}
    env.update(extra or {})
    return env


def clawkit(cwd: Path, *args: str, env: dict | None = KERNEL_ONLY, timeout: float = 120, **kw):
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=env_with(env),
                          capture_output=True, text=True, timeout=timeout, **kw)


def sessions(cwd: Path) -> list[dict]:
    return json.loads(clawkit(cwd, "sessions", "list", "--json").stdout)


def show(cwd: Path, sid: str) -> str:
    return clawkit(cwd, "sessions", "show", sid).stdout


def test_cut_stream_is_stored_as_interrupted_and_exits_4(agent_dir, model_server):
    model_server.script(Fault.cut_stream(after_chunks=3, reply="one two three four five"), "I saw the cut.")
    out = clawkit(agent_dir, "run", "agent.yaml", "count")
    assert out.returncode == 4, out.stderr
    assert out.stdout == "one two three \n" and "interrupted" in out.stderr and "Traceback" not in out.stderr
    sid = sessions(agent_dir)[0]["id"]
    assert "[assistant, interrupted: stream_cut] one two three" in show(agent_dir, sid)
    resumed = clawkit(agent_dir, "run", "agent.yaml", "what happened?", "--session", sid, "--json")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["interrupted"] is False
    seen = [m for m in model_server.requests[1].messages if m["role"] == "assistant"]
    assert seen[0]["content"].startswith("one two three") and "interrupted before it was finished" in seen[0]["content"]


def test_cut_stream_in_json_mode_says_interrupted(agent_dir, model_server):
    model_server.script(Fault.cut_stream(after_chunks=2, reply="alpha beta gamma"))
    out = clawkit(agent_dir, "run", "agent.yaml", "go", "--json")
    assert out.returncode == 4, out.stderr
    result = json.loads(out.stdout)
    assert result["interrupted"] is True and result["reply"] == "alpha beta " and result["stop_reason"] == "interrupted"


def test_a_trickling_stream_meets_the_total_deadline(agent_dir, model_server):
    """A stream that sends a word every 0.3 s never trips the per-read timeout; call_timeout ends it."""
    model_server.script(Reply.text("word " * 200, chunk_delay=0.3))
    started = time.monotonic()
    out = clawkit(agent_dir, "run", "agent.yaml", "talk", "--set", "model.call_timeout=2", env=None)
    took = time.monotonic() - started
    assert out.returncode == 4, out.stderr
    assert out.stdout.startswith("word word") and "model.call_timeout = 2s" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and took < 60
    sid = sessions(agent_dir)[0]["id"]
    assert "interrupted: stream_cut" in show(agent_dir, sid)


@pytest.mark.parametrize("env", [None, KERNEL_ONLY], ids=["native-provider", "litellm"])
def test_a_silent_model_meets_the_total_deadline_whatever_the_provider(agent_dir, model_server, env):
    model_server.script(Fault.delay(30, then="too late"))
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--set", "model.call_timeout=1.5", env=env)
    assert out.returncode == 3, out.stderr
    assert "no complete answer within model.call_timeout = 1.5s" in out.stderr and "Traceback" not in out.stderr


def test_unknown_session_is_an_error_and_new_session_is_explicit(agent_dir, model_server):
    model_server.script("Hello.")
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--session", "ses_typo")
    assert out.returncode == 2 and "--session ses_typo: no such session" in out.stderr
    assert not model_server.requests
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--new-session", "ses_mine", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["session_id"] == "ses_mine"
    again = clawkit(agent_dir, "run", "agent.yaml", "hi", "--new-session", "ses_mine")
    assert again.returncode == 2 and "exists already" in again.stderr


def test_bad_set_names_the_flag(agent_dir):
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--set", "limits.max_tool_rounds=-1")
    assert out.returncode == 2 and "--set limits.max_tool_rounds: Input should be greater than 0" in out.stderr
    assert "agent.yaml:1" not in out.stderr
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--set", "limits.nope=1")
    assert out.returncode == 2 and "--set limits.nope: unknown key" in out.stderr


def test_missing_workspace_is_an_error_unless_asked_to_create_it(agent_dir, model_server):
    model_server.script("Made.")
    target = agent_dir / "no" / "such" / "dir"
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--workspace", str(target))
    assert out.returncode == 2 and f"workspace {target} does not exist" in out.stderr
    assert not (agent_dir / "no").exists()
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--workspace", str(target), "--create-workspace")
    assert out.returncode == 0, out.stderr
    assert (target / ".clawkit" / "state.db").is_file()


def run_into_closed_pipe(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Like ``clawkit ARGS | head -0``: the reader is gone before anything is written."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=env_with(KERNEL_ONLY),
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)


def test_listing_commands_into_a_closed_pipe_exit_quietly(agent_dir, model_server):
    model_server.script("A reply to list.")
    assert clawkit(agent_dir, "run", "agent.yaml", "hi").returncode == 0
    sid = sessions(agent_dir)[0]["id"]
    for args in (["sessions", "list"], ["sessions", "show", sid], ["sessions", "export", sid], ["plugins"],
                 ["schema"], ["run", "agent.yaml", "again"]):
        if args[0] == "run":
            model_server.script("Streamed into nowhere.")
        out = run_into_closed_pipe(agent_dir, *args)
        assert out.returncode == 0, (args, out.stderr)
        assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, (args, out.stderr)
    # the run whose reader went away still finished its turn and stored it
    assert "[assistant] Streamed into nowhere." in show(agent_dir, sessions(agent_dir)[0]["id"])


def slow_reply(text: str = "slow words keep coming one by one until the end") -> Reply:
    return Reply.text(text, chunk_delay=0.4)


def wait_for(fd: int, needle: bytes, timeout: float = 90.0) -> bytes:
    """Read from ``fd`` until ``needle`` appears (the output so far)."""
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{needle!r} did not appear; got {buf[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            if not chunk:
                raise AssertionError(f"output ended before {needle!r}; got {buf[-2000:]!r}")
            buf += chunk
    return buf


def test_ctrl_c_in_chat_cancels_the_reply_and_the_chat_goes_on(agent_dir, model_server):
    model_server.script(slow_reply(), "Answered the second.")
    pid, fd = pty.fork()
    if pid == 0:  # the child: chat on the pseudo-terminal, the full install
        os.chdir(agent_dir)
        os.execve(sys.executable, [sys.executable, "-m", "clawkit", "chat", "agent.yaml"], env_with(None))
    try:
        wait_for(fd, b"you> ")
        os.write(fd, b"tell me slowly\r")
        wait_for(fd, b"keep")  # the reply is streaming
        os.write(fd, b"\x03")  # Ctrl-C, through the terminal's line discipline
        wait_for(fd, b"you> ")
        os.write(fd, b"and now?\r")
        out = wait_for(fd, b"Answered the second.")
        if b"you> " not in out[out.index(b"Answered the second."):]:  # (a loaded machine: one read brings both)
            wait_for(fd, b"you> ")
        os.write(fd, b"\x04")  # Ctrl-D at the empty prompt leaves
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    text = show(agent_dir, sessions(agent_dir)[0]["id"])
    assert "[assistant, interrupted: cancelled] slow words" in text and "[assistant] Answered the second." in text
    second = model_server.requests[1].messages
    assert any("interrupted before it was finished" in (m.get("content") or "") for m in second)


def test_sigterm_mid_turn_exits_cleanly_with_the_message_saved(agent_dir, model_server):
    model_server.script(slow_reply())
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "run", "agent.yaml", "tell me slowly"], cwd=agent_dir,
                            env=env_with(None), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(proc.stdout.fileno(), b"keep")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err.decode()
    assert b"Traceback" not in err and b"was never awaited" not in err
    text = show(agent_dir, sessions(agent_dir)[0]["id"])
    assert "[user] tell me slowly" in text and "[assistant, interrupted: cancelled] slow words" in text
