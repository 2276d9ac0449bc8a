"""docs/plugins/subagents.md: the two-agent example runs as written, against an OpenAI-compatible
endpoint (the loopback model server standing in for it through OPENAI_BASE_URL)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[4] / "docs" / "plugins" / "subagents.md"


def test_the_documented_two_agent_example_runs_as_written(tmp_path, kit, model_server):
    text = DOC.read_text(encoding="utf-8")
    yamls = re.findall(r"```yaml\n(.*?)```", text, re.S)
    (tmp_path / "lead.yaml").write_text(yamls[0])
    (tmp_path / "researcher.yaml").write_text(yamls[1])
    commands = re.findall(r"```bash\n(.*?)```", text, re.S)[0].strip().splitlines()
    answer = {"answer": "Release 2.1 fixes the login bug.", "sources": ["NOTES.md"]}
    model_server.script(kit.ByModel(**{
        "gpt-4o": [Reply.tool_calls([("agent_researcher", {"task": "What does release 2.1 fix? Read NOTES.md."})]),
                   "Release 2.1 fixes the login bug (NOTES.md)."],
        "gpt-4o-mini": [Reply.tool_calls([("read_file", {"path": "NOTES.md"})]), json.dumps(answer)],
    }))
    env = {**kit.env(), "OPENAI_BASE_URL": model_server.url, "OPENAI_API_KEY": "sk-test"}
    env.pop("LEAD_MODEL", None), env.pop("RESEARCHER_MODEL", None)
    session = None
    for line in commands:
        if line.startswith("export "):
            continue  # the key: set above
        if line.startswith("echo "):
            content, target = re.match(r'echo "(.*)" > (\S+)', line).groups()
            (tmp_path / target).write_text(content + "\n")
            continue
        args = re.findall(r'"[^"]*"|\S+', line)[1:]
        args = [a.strip('"') for a in args]
        if "SESSION_ID" in args:
            args[args.index("SESSION_ID")] = session
        out = subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, line + "\n" + out.stdout + out.stderr
        if args[0] == "run":
            assert out.stdout.strip() == "Release 2.1 fixes the login bug (NOTES.md)."
        if args[:2] == ["sessions", "list"]:
            session = next(l.split()[0] for l in out.stdout.splitlines() if " lead " in l)
        if "--tree" in args:
            assert "researcher" in out.stdout and "via agent_researcher" in out.stdout
    child = model_server.requests[1]
    assert child.body["model"] == "gpt-4o-mini"
    child_tools = {t["function"]["name"] for t in child.tools}
    # the skills plugin adds its own inert tools (load_skill, the routed skills' skill_*) to any agent's request
    assert {n for n in child_tools if not n.startswith(("skill_", "load_skill"))} == {"list_dir", "read_file"}
    # the child's run is typed (clawkit.output): gpt-4o-mini takes the schema as a JSON-schema response_format
    assert child.body["response_format"]["json_schema"]["schema"]["required"] == ["answer", "sources"]
    delivered = [m for m in model_server.requests[-1].messages if m["role"] == "tool"][-1]["content"]
    assert json.dumps(answer) in delivered and '<subagent_result agent="researcher">' in delivered
