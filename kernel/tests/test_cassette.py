"""Cassettes: record a session's model traffic through the loopback proxy, replay it with the model
server stopped, and fail loudly (with a diff) when a request changes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from clawkit import hookimpl
from clawkit.errors import ProviderError
from clawkit.testing.cassette import CassetteError, CassetteServer, canonical, loopback_only, request_key
from clawkit.testing.server import Reply

SECRET = "sk-live-DO-NOT-LEAK-1234567890"


class NoteTools:
    """A real tool with a visible effect: every call appends to notes.txt in the workspace."""

    def __init__(self, workspace):
        self.workspace = workspace

    @hookimpl
    def register_tools(self, register, agent):
        ws = self.workspace

        def note(text: str) -> str:
            """Write a note.

            Args:
                text: what to note
            """
            with open(ws / "notes.txt", "a") as f:
                f.write(text + "\n")
            return f"noted {text!r} ({len((ws / 'notes.txt').read_text().splitlines())} notes)"

        register(note)


def make(make_agent, workspace, api_base):
    litellm = pytest.importorskip("clawkit_litellm")
    tools = NoteTools(workspace)
    # memory off: under the full install it indexes the recorded session's turns in the background and
    # recalls them into the replay's prompt once it catches up, so a replay would differ at random
    return make_agent(plugins=(litellm, tools), provider="config", tools=["note"], instructions="Take notes.",
                      plugin_config={"memory": {"enabled": False}},
                      model={"name": "openai/test-model", "api_base": api_base, "api_key": SECRET, "timeout": 10,
                             "max_retries": 0})


def changed(diff: str, old: str, new: str) -> bool:
    """The diff removes a line holding ``old`` and adds one holding ``new``."""
    lines = diff.splitlines()
    return any(ln.startswith("-") and old in ln for ln in lines) and any(ln.startswith("+") and new in ln for ln in lines)


def transcript(agent, sid):
    return [(m.role, m.content, [(c.name, c.arguments) for c in m.tool_calls]) for m in agent.store.messages(sid)]


def session(agent, *messages):
    sid = None
    for text in messages:
        sid = agent.run(text, session_id=sid).session_id
    return sid


def test_record_replay_identical_then_diff_on_change(make_agent, model_server, workspace, tmp_path):
    path = tmp_path / "session.json"
    model_server.script(
        Reply.tool_calls([("note", {"text": "apples"})]), "Noted apples.",
        Reply.tool_calls([("note", {"text": "pears"})]), "Noted pears.",
    )
    with CassetteServer(path, record=True, upstream=model_server.url) as rec:
        agent = make(make_agent, workspace, rec.url)
        recorded = transcript(agent, session(agent, "note apples", "note pears"))
    assert len(json.loads(path.read_text())["interactions"]) == 4
    text = path.read_text()
    assert SECRET not in text and "authorization" not in text.lower()  # no key, no headers
    model_server.stop()
    (workspace / "notes.txt").unlink()

    with CassetteServer(path) as replay, loopback_only():
        agent = make(make_agent, workspace, replay.url)
        assert transcript(agent, session(agent, "note apples", "note pears")) == recorded
        replay.check()
    assert (workspace / "notes.txt").read_text() == "apples\npears\n"  # the tool ran for real again

    with CassetteServer(path) as replay, loopback_only():
        agent = make(make_agent, workspace, replay.url)
        with pytest.raises(ProviderError):
            agent.run("note bananas")
        with pytest.raises(CassetteError) as failure:
            replay.check()
    message = str(failure.value)
    assert "no recorded request matches" in message
    assert changed(message, '"content": "note apples"', '"content": "note bananas"')


def test_volatile_ids_and_timestamps_do_not_change_the_key():
    def body(call_id, when, nonce):
        return {"model": "m", "stream": True, "temperature": 0.1, "messages": [
            {"role": "system", "content": f"Date: {when}"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function",
                                                                   "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": call_id, "content": f"[UNTRUSTED DATA {nonce}] x [END UNTRUSTED DATA {nonce}]"}]}

    a = body("call_abc", "2026-11-24T17:00:01Z", "9f3a1c2e")
    b = body("toolu_xyz", "2027-01-02T08:09:10+01:00", "07bd44aa")
    assert request_key(a) == request_key(b)
    assert "stream" not in canonical(a) and canonical(a)["messages"][2]["tool_call_id"] == "call_1"
    b["messages"][0]["content"] = "Date: 2026-11-24, be brief"
    assert request_key(a) != request_key(b)


def test_replay_refuses_connections_beyond_loopback():
    with loopback_only():
        with pytest.raises(CassetteError, match="loopback only"):
            socket.create_connection(("10.255.255.1", 80), timeout=0.5)
        with socket.socket() as s:  # loopback stays allowed (the replay server itself)
            with pytest.raises(OSError):
                s.connect(("127.0.0.1", 1))


def test_missing_cassette_is_a_clear_error(tmp_path):
    with pytest.raises(CassetteError, match="no cassette at .*record it first"):
        CassetteServer(tmp_path / "nope.json")


@pytest.mark.cassette("cassettes/hello.yaml")
@pytest.mark.narrow("replays a cassette recorded with the kernel alone: the full install's prompt contributors change the request it matches")
def test_the_fixture_replays_a_committed_cassette(cassette, make_agent, model_server, workspace):
    """Recorded once with ``CLAWKIT_RECORD=1`` against model_server (as against a real endpoint); replayed
    from the committed YAML ever since."""
    model_server.script("Hello from the cassette.")
    server = cassette(upstream=model_server.url)
    agent = make(make_agent, workspace, server.url)
    assert agent.run("say hello").reply == "Hello from the cassette."


@pytest.mark.e2e
def test_clawkit_run_record_then_replay_offline(model_server, tmp_path):
    import yaml

    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump({"name": "rec", "model": {"name": "openai/test-model", "api_base": model_server.url,
                                     "api_key": SECRET, "max_retries": 0}, "instructions": "Be brief."}))
    tape = tmp_path / "run.json"
    model_server.script("Recorded answer.")
    # narrow: the kernel path of clawkit run with a provider only, recorded and replayed
    env = {"CLAWKIT_LOAD_PLUGINS": "clawkit-litellm"}
    import os

    env = {**os.environ, **env}
    run = [sys.executable, "-m", "clawkit", "run", str(agent), "hi"]
    out = subprocess.run(run + ["--record", str(tape)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "recorded 1 model call" in out.stderr and SECRET not in tape.read_text()
    model_server.stop()
    out = subprocess.run(run + ["--replay", str(tape)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Recorded answer."
    out = subprocess.run(run[:-1] + ["bye", "--replay", str(tape)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 1 and changed(out.stderr, '"content": "hi"', '"content": "bye"')
