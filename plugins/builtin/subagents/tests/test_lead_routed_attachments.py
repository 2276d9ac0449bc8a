"""A routed task is the user's message handed on: the images and files attached to it reach the
sub-agent the router dispatched to (``clawkit run -a``, every plugin, the loopback model). Before,
the child got the text alone and answered about a picture it never saw.

The parent speaks the OpenAI wire, the child the Anthropic one: the bytes cross both. A child whose
model takes no images refuses them with the attachment's name, and the parent's model hears it; a
call the lead's model makes itself carries only its task text."""

from __future__ import annotations

import base64
import json

import pytest

from clawkit.testing.media import png
from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e


def _agents(tmp_path, kit, server, vision: bool = True):
    child = {"name": "anthropic/claude-viewer", "api_base": server.url, "api_key": "sk-test", "max_retries": 0,
             "timeout": 30, "supports_vision": vision}
    kit.write(tmp_path / "researcher.yaml", f"""
        name: researcher
        model: {json.dumps(child)}
        instructions: You research security topics.
        tools: []
        """)
    kit.write(tmp_path / "parent.yaml", f"""
        name: front
        model: {kit.model_block(server, "front")}
        tools: [agent_researcher]
        subagents:
          researcher: {{agent: researcher.yaml, description: Researches security topics}}
        plugins:
          translation:
            dispatch_threshold: 0.3  # "in this screenshot" dilutes the research intent (0.35)
            profiles:
              research: {{subagent: researcher}}
        """)
    (tmp_path / "shot.png").write_bytes(png())


def _child_requests(server):
    return [r for r in server.requests if (r.body or {}).get("model") == "claude-viewer"]


def test_the_routed_child_sees_the_users_attachment(tmp_path, kit, model_server):
    _agents(tmp_path, kit, model_server)
    model_server.script(kit.ByModel(**{"claude-viewer": ["The screenshot shows CVE-2026-0001."]},
                                    front=["CVE-2026-0001, from your screenshot."]))
    result = kit.run_json(tmp_path, "parent.yaml", "Search for Node.js vulnerabilities in this screenshot", "-a", "shot.png")
    assert result["reply"] == "CVE-2026-0001, from your screenshot."
    assert [c["name"] for c in result["tool_calls"]] == ["agent_researcher"]
    (req,) = _child_requests(model_server)
    content = req.body["messages"][-1]["content"]
    b64 = base64.b64encode(png()).decode()
    assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}} in content
    assert {"type": "text", "text": "Search for Node.js vulnerabilities in this screenshot"} in content
    shown = kit.clawkit(tmp_path, "sessions", "list", "--json")  # the child's session keeps the reference, not the bytes
    assert b64 not in shown.stdout


def test_a_child_model_without_vision_refuses_by_name_and_the_lead_hears_it(tmp_path, kit, model_server):
    _agents(tmp_path, kit, model_server, vision=False)
    model_server.script(kit.ByModel(front=["The researcher cannot read images."]))
    result = kit.run_json(tmp_path, "parent.yaml", "Search for Node.js vulnerabilities in this screenshot", "-a", "shot.png")
    assert result["reply"] == "The researcher cannot read images."
    assert not _child_requests(model_server)
    (front,) = kit.requests_for(model_server, "front")
    said = [m["content"] for m in front.messages if m["role"] == "tool"][0]
    assert "shot.png" in said and "does not accept images" in said


def test_a_call_the_lead_model_makes_carries_only_its_task(tmp_path, kit, model_server):
    _agents(tmp_path, kit, model_server)
    model_server.script(kit.ByModel(
        front=[Reply.tool_calls([("agent_researcher", {"task": "list recent advisories"})]), "Done."],
        **{"claude-viewer": ["Two advisories."]}))
    result = kit.run_json(tmp_path, "parent.yaml", "what do you make of this picture?", "-a", "shot.png")
    assert result["reply"] == "Done."
    (req,) = _child_requests(model_server)
    assert req.body["messages"][-1]["content"] in ("list recent advisories",
                                                   [{"type": "text", "text": "list recent advisories"}])
