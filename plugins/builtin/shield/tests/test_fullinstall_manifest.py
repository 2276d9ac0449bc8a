"""Full-install twin of test_shield.py's narrowed manifest tests (issue 30 item 13), with the manifest
rule that holds since issue 27 item 6: a real skill's manifest (weather.claws: ``deny: fs.write``)
binds the lead's own ``write_file`` only when the skill was chosen deliberately (``always:`` or
``load_skill``); a skill the installed translation device merely *routed* to the message guides and
does not veto the lead's write (docs/plugins/skills.md, "Capability requests"). Every builtin is
loaded and the approver says yes to the policy's own questions, so only the manifest can refuse."""

from __future__ import annotations

import shutil
from pathlib import Path

from clawkit.testing import ScriptedReply, call

WEATHER = Path(__file__).resolve().parents[4] / "skills" / "weather.claws"
WRITE = call("write_file", path="forecast.txt", content="sunny")


def _agent(make_agent, workspace, tmp_path, script, **skills):
    (workspace / "skills").mkdir(exist_ok=True)
    shutil.copy(WEATHER, workspace / "skills" / "weather.claws")
    cfg = {"user_dir": str(tmp_path / "no-user-skills"), "watch": False, **skills}
    agent = make_agent(script, tools=["skills", "write_file"], plugin_config={"skills": cfg},
                       approver=lambda c, r, ctx: True)
    assert agent.test_install == "full"
    return agent


def _manifest_block(agent, result):
    [write] = [c for c in result.tool_calls if c["name"] == "write_file"]
    reasons = [e["data"]["reason"] for e in agent.store.events(result.session_id, "shield.blocked")]
    return write, reasons


def test_a_skill_in_always_denies_the_leads_write_with_everything_loaded(make_agent, workspace, tmp_path):
    agent = _agent(make_agent, workspace, tmp_path, [ScriptedReply.calls(WRITE), "ok"], always=["weather"])
    result = agent.run("Please save the note.")  # nothing routes weather: only always: makes it active
    write, reasons = _manifest_block(agent, result)
    assert write["blocked"], result.tool_calls
    assert not (workspace / "forecast.txt").exists()
    assert any("manifest denies fs.write (skill weather)" in r for r in reasons), reasons


def test_a_loaded_skill_denies_the_leads_write_with_everything_loaded(make_agent, workspace, tmp_path):
    script = [ScriptedReply.calls(call("load_skill", name="weather")), ScriptedReply.calls(WRITE), "ok"]
    agent = _agent(make_agent, workspace, tmp_path, script)
    result = agent.run("Please save the note.")
    assert result.tool_calls[0]["name"] == "load_skill" and not result.tool_calls[0]["is_error"], result.tool_calls
    write, reasons = _manifest_block(agent, result)
    assert write["blocked"], result.tool_calls
    assert not (workspace / "forecast.txt").exists()
    assert any("manifest denies fs.write (skill weather)" in r for r in reasons), reasons


def test_a_merely_routed_skill_does_not_veto_the_leads_write_with_everything_loaded(make_agent, workspace, tmp_path):
    agent = _agent(make_agent, workspace, tmp_path, [ScriptedReply.calls(WRITE), "ok"])
    result = agent.run("What is the weather forecast in Paris tomorrow?")
    active = [e["data"]["skills"] for e in agent.store.events(result.session_id, "skills.active")]
    assert any("weather" in s for s in active), active  # the router did choose weather for this message
    write, reasons = _manifest_block(agent, result)
    assert not write["blocked"] and not write["is_error"], result.tool_calls
    assert (workspace / "forecast.txt").read_text() == "sunny"
    assert not any("manifest" in r for r in reasons), reasons
