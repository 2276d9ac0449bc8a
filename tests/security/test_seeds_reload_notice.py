"""Issue 27 item 8 through the real CLI (``clawkit chat``) with every builtin loaded: a skill whose
hot reload fails tells the chat user in one line (and the last good version stays active), not
only the log. Old main: the chat showed nothing; the failure was in the log and the events only."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import cli_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _read_until(proc: subprocess.Popen, wanted: str, timeout: float = 60) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            lines.append(line.rstrip("\n"))
            if lines[-1] == wanted:
                return lines
        elif proc.poll() is not None:
            raise AssertionError(f"chat exited early: {proc.stderr.read()}")
    raise AssertionError(f"no {wanted!r} from chat; got {lines}")


def test_a_failed_hot_reload_is_one_line_for_the_chat_user(tmp_path, server, audit_home):
    (tmp_path / "skills").mkdir()
    claws = tmp_path / "skills" / "weather.claws"
    shutil.copy(ROOT / "skills" / "weather.claws", claws)
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""\
        name: weather-chat
        model: {{name: openai/test, api_base: "{server.url}", api_key: x, max_retries: 0}}
        tools: [skills]
        """))
    server.reset()
    server.script(*([lambda request: "Noted."] * 10))
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "chat", "agent.yaml"], cwd=tmp_path, env=cli_env(audit_home),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        proc.stdin.write("What's the weather in Paris today?\n")
        proc.stdin.flush()
        first = _read_until(proc, "Noted.")
        assert not any("did not load" in x for x in first)
        claws.write_text(claws.read_text().replace("# MANIFEST", "# NOTHING"))
        time.sleep(0.3)
        proc.stdin.write("And tomorrow?\n")
        proc.stdin.flush()
        second = _read_until(proc, "Noted.")
        told = [x for x in second if "did not load" in x]
        assert len(told) == 1, second
        assert told[0].startswith("[notice] skill file ") and "weather.claws" in told[0]
        assert "the last good version of weather stays active" in told[0]
        proc.stdin.write("And the day after?\n")  # told once, not every turn
        proc.stdin.flush()
        third = _read_until(proc, "Noted.")
        assert not any("did not load" in x for x in third)
    finally:
        proc.stdin.close()
        proc.wait(30)
