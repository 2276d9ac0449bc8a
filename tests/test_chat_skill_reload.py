"""A running `clawkit chat` picks up an edited .claws file on the next request, and a
broken edit keeps the previous version active and is reported (issue 6 acceptance)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clawkit.sessions import SessionStore

ROOT = Path(__file__).resolve().parents[1]


def _readline(proc: subprocess.Popen, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            return line.rstrip("\n")
        if proc.poll() is not None:
            raise AssertionError(f"chat exited early: {proc.stderr.read()}")
    raise AssertionError("no reply from chat")


@pytest.fixture
def chat_workspace(tmp_path, model_server):
    (tmp_path / "skills").mkdir()
    shutil.copy(ROOT / "skills" / "weather.claws", tmp_path / "skills" / "weather.claws")
    (tmp_path / "agent.yaml").write_text(
        textwrap.dedent(
            f"""
            name: weather-chat
            model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
            instructions: You help with the weather.
            tools: [skills]
            """
        )
    )
    return tmp_path


def test_edit_while_chat_runs_changes_the_next_request(chat_workspace, model_server):
    model_server.script(lambda request: "Noted.")
    env = dict(os.environ, CLAWKIT_LOAD_PLUGINS="clawkit-litellm,clawkit-skills,clawkit-translation")
    proc = subprocess.Popen(
        [sys.executable, "-m", "clawkit", "chat", "agent.yaml"], cwd=chat_workspace, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
    )
    claws = chat_workspace / "skills" / "weather.claws"
    try:
        proc.stdin.write("What's the weather in Paris today?\n")
        proc.stdin.flush()
        assert _readline(proc) == "Noted."
        first = model_server.requests[-1]
        assert "Open-Meteo" in first.messages[0]["content"]
        assert "skill_weather" in {t["function"]["name"] for t in first.tools}

        # a good edit: new purpose text and a new IDL field
        text = claws.read_text()
        edited = text.replace("from the free Open-Meteo API (no key needed)", "MARKER-V2 from the Open-Meteo API").replace(
            "units?: \"metric\" | \"imperial\";", "units?: \"metric\" | \"imperial\";\n  hourly?: boolean   // hourly detail"
        )
        claws.write_text(edited)
        time.sleep(0.3)
        proc.stdin.write("And the weather in Paris tomorrow?\n")
        proc.stdin.flush()
        assert _readline(proc) == "Noted."
        second = model_server.requests[-1]
        assert "MARKER-V2" in second.messages[0]["content"]
        weather_tool = next(t for t in second.tools if t["function"]["name"] == "skill_weather")
        assert "hourly" in weather_tool["function"]["parameters"]["properties"]

        # a broken edit: the manifest is gone; the last good version stays active
        claws.write_text(edited.replace("# MANIFEST", "# NOTHING").replace("id: weather", "id weather: ["))
        time.sleep(0.3)
        proc.stdin.write("What is the weather in Paris now?\n")
        proc.stdin.flush()
        # the chat user is told of the broken edit first (issue 27 item 8) — changed deliberately
        told = [_readline(proc) for _ in range(2)]
        assert told[0] == "" and told[1].startswith("[notice] skill file ") and "weather.claws" in told[1]
        assert _readline(proc) == "Noted."
        third = model_server.requests[-1]
        assert "MARKER-V2" in third.messages[0]["content"], third.messages[0]["content"]
    finally:
        proc.stdin.close()
        proc.wait(30)
    store = SessionStore(chat_workspace / ".clawkit" / "state.db")
    sid = store.list()[0]["id"]
    errors = store.events(sid, "skills.error")
    assert errors and "weather.claws" in str(errors[0]["data"])
