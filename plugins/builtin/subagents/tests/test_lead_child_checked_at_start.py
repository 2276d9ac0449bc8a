"""A declared sub-agent's file is checked when its parent starts, as the parent's own file is: a key
that does not validate stops ``clawkit run`` with exit 2 naming the child's file, line and field,
before any model call — and ``clawkit.Agent`` raises ConfigError. Before, the run went on and
only the parent's model learned of it, as a tool error ("sub-agent 'helper' cannot start: …"),
once it called the child: the user saw a reply and exit 0."""

from __future__ import annotations

import pytest

import clawkit
from clawkit.errors import ConfigError
from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e


def test_a_broken_child_file_stops_the_run_with_its_file_line_and_field(tmp_path, kit, model_server):
    kit.write(tmp_path / "lead.yaml", f"""
        name: lead
        model: {kit.model_block(model_server, "lead")}
        subagents:
          helper: {{agent: helper.yaml, description: Helps.}}
        """)
    kit.write(tmp_path / "helper.yaml", f"""
        name: helper
        model: {kit.model_block(model_server, "helper")}
        plugins:
          sequence:
            rules:
              - tool: write_file
        """)
    model_server.script(kit.ByModel(lead=[Reply.tool_calls([("agent_helper", {"task": "help"})]), "no help"]))
    out = kit.clawkit(tmp_path, "run", "lead.yaml", "go", check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"{tmp_path / 'helper.yaml'}:6: plugins.sequence.rules.0.requires: Field required" in out.stderr, out.stderr
    assert not model_server.requests and "Traceback" not in out.stderr
    # fixed, the same command runs and the child answers
    (tmp_path / "helper.yaml").write_text((tmp_path / "helper.yaml").read_text() + "        requires: [read_file]\n")
    model_server.script(kit.ByModel(lead=[Reply.tool_calls([("agent_helper", {"task": "help"})]), "helped"],
                                    helper=["here you go"]))
    assert kit.run_json(tmp_path, "lead.yaml", "go")["reply"] == "helped"


def test_an_inline_child_is_checked_by_the_python_api_too(tmp_path, model_server, monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    model = {"name": "openai/lead", "api_base": model_server.url, "api_key": "sk-test"}
    with pytest.raises(ConfigError, match=r"subagents\.helper\.agent.*limits\.max_tool_rounds"):
        clawkit.Agent(model, workspace=str(tmp_path), subagents={"helper": {
            "agent": {"name": "helper", "model": model, "limits": {"max_tool_rounds": 0}}, "description": "Helps."}})
