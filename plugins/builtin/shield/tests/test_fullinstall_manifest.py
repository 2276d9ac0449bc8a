"""Full-install twin of test_shield.py's narrowed manifest tests (issue 30 item 13): a real skill's
manifest (weather.claws: ``deny: fs.write``), routed by the installed translation device, stops a
write while the skill is active — with every builtin loaded and an approver that says yes to the
policy's own questions, so only the manifest can be what refuses."""

from __future__ import annotations

import shutil
from pathlib import Path

from clawkit.testing import ScriptedReply, call

WEATHER = Path(__file__).resolve().parents[4] / "skills" / "weather.claws"


def test_an_active_skills_manifest_denies_a_write_with_everything_loaded(make_agent, workspace, tmp_path):
    (workspace / "skills").mkdir()
    shutil.copy(WEATHER, workspace / "skills" / "weather.claws")
    asked = []
    agent = make_agent([ScriptedReply.calls(call("write_file", path="forecast.txt", content="sunny")), "ok"],
                       tools=["skills", "write_file"],
                       plugin_config={"skills": {"user_dir": str(tmp_path / "no-user-skills"), "watch": False}},
                       approver=lambda c, r, ctx: asked.append(c.name) or True)
    assert agent.test_install == "full"
    result = agent.run("What is the weather forecast in Paris tomorrow?")
    assert result.tool_calls[0]["blocked"], result.tool_calls
    assert not (workspace / "forecast.txt").exists()
    blocked = [e["data"] for e in agent.store.events(result.session_id, "shield.blocked")]
    assert blocked and "manifest denies fs.write (skill weather)" in blocked[0]["reason"], blocked
