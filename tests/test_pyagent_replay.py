"""issue 26 item 7: ``clawkit run … --record cas.yaml`` then ``--replay cas.yaml`` in the same folder,
twice, and in another folder — with every builtin loaded (memory recalls the recorded session into
the next prompt; the runtime section names the folder; ``list_dir`` sees the cassette itself)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # the full install: every builtin plugin
    env["CLAWKIT_AUDIT_HOME"] = str(tmp / "audit-home")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def _run(ws: Path, env: dict[str, str], *extra: str, message: str = "list it") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", message, *extra],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_record_then_replay_same_folder_twice_and_elsewhere(tmp_path, wire):
    env = _env(tmp_path)
    ws = tmp_path / "proj"
    ws.mkdir()
    (ws / "notes.txt").write_text("apples\n")
    with ModelServer() as server:
        base = server.url if wire == "openai" else server.base_url
        (ws / "agent.yaml").write_text(
            f'name: lister\nmodel: {{name: {wire}/test, api_base: "{base}", api_key: sk-test-123456, max_retries: 0}}\n'
            "instructions: List what is asked.\ntools: [list_dir, read_file]\n")
        server.script(Reply.tool_calls([("list_dir", {"path": "."})]),
                      Reply.tool_calls([("read_file", {"path": "notes.txt"})]),
                      "There is notes.txt (apples).")
        rec = _run(ws, env, "--record", "cas.yaml")
        assert rec.returncode == 0, rec.stderr
        assert rec.stdout.strip() == "There is notes.txt (apples)."
        assert "recorded 3 model call(s)" in rec.stderr
    text = (ws / "cas.yaml").read_text()
    assert str(ws) not in text and "<workspace>" in text and "sk-test-123456" not in text
    # the same folder, twice: the second run's memory would recall the first (and list_dir shows cas.yaml now)
    for _ in range(2):
        out = _run(ws, env, "--replay", "cas.yaml")
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "There is notes.txt (apples)."
    # another folder, with nothing but the agent and the cassette (the model server is gone: offline)
    other = tmp_path / "elsewhere" / "copy"
    other.mkdir(parents=True)
    shutil.copy(ws / "agent.yaml", other)
    shutil.copy(ws / "cas.yaml", other)
    out = _run(other, env, "--replay", "cas.yaml")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "There is notes.txt (apples)."
    # a changed message still fails with the diff against the nearest recorded request
    out = _run(ws, env, "--replay", "cas.yaml", message="list that")
    assert out.returncode == 1
    assert "no recorded request matches" in out.stderr
    assert re.search(r'^-\s+"(content|text)": "list it",$', out.stderr, re.M), out.stderr
    assert re.search(r'^\+\s+"(content|text)": "list that",$', out.stderr, re.M), out.stderr
    # a tool call the recording never made fails the same way, with a diff against the nearest recorded call
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    shutil.copy(ws / "agent.yaml", tampered)
    head, tape = text.split("\ntool_results:", 1)
    assert "path: .\n" in tape
    (tampered / "cas.yaml").write_text(head + "\ntool_results:" + tape.replace("path: .\n", "path: sub\n", 1))
    out = _run(tampered, env, "--replay", "cas.yaml")
    assert out.returncode == 1
    assert "the recording made no tool call like this one" in out.stderr
    assert '-  "path": "sub"' in out.stderr and '+  "path": "."' in out.stderr
    # the recorded state stays out of the user's folder, and a --session resume is refused clearly
    assert not (ws / ".clawkit" / "state.db").exists()
    out = _run(ws, env, "--replay", "cas.yaml", "--session", "ses_x")
    assert out.returncode != 0 and "fresh state" in out.stderr
