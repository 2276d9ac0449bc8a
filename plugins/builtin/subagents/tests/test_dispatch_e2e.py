"""The translation device dispatches to sub-agents (``clawkit run``, every plugin, the loopback model):
a confident route spawns the named sub-agent; a message of several intents spawns one child per
intent in parallel and merges the answers; the dispatch record is ClawDense (lossless) and the
metrics count dispatches and the transport compression ratio."""

from __future__ import annotations

import json

import pytest

from clawkit.testing.server import Fault, Reply

pytestmark = pytest.mark.e2e

SUMMARY = "Node.js advisories: CVE-2026-0001 (high, fixed in 20.1) and CVE-2026-0002 (low)."


def _agents(tmp_path, kit, server):
    kit.write(tmp_path / "researcher.yaml", f"""
        name: researcher
        model: {kit.model_block(server, "researcher")}
        instructions: You research security topics and answer with a clean summary.
        tools: [web_fetch]
        """)
    sysadmin = json.dumps({"name": "sysadmin", "model": json.loads(kit.model_block(server, "sysadmin")), "tools": ["list_dir"]})
    kit.write(tmp_path / "parent.yaml", f"""
        name: front
        model: {kit.model_block(server, "front")}
        tools: [web_fetch, list_dir, read_file]
        subagents:
          researcher: {{agent: researcher.yaml, description: Researches security topics}}
          sysadmin: {{agent: {sysadmin}, description: Looks at the file system}}
        plugins:
          translation:
            profiles:
              research: {{subagent: researcher}}
              system: {{subagent: sysadmin}}
        """)


def _stats(tmp_path, kit):
    return json.loads(kit.clawkit(tmp_path, "translation", "stats", "--json").stdout)


def test_a_confident_route_spawns_the_research_subagent(tmp_path, kit, model_server, store_at):
    _agents(tmp_path, kit, model_server)
    model_server.script(kit.ByModel(researcher=[SUMMARY]))
    result = kit.run_json(tmp_path, "parent.yaml", "Search for Node.js vulnerabilities")
    assert result["reply"] == SUMMARY  # a clean summary, straight from the research sub-agent
    assert not kit.requests_for(model_server, "front")  # the front agent's own model was not needed
    (req,) = kit.requests_for(model_server, "researcher")
    assert req.messages[-1]["content"] == "Search for Node.js vulnerabilities"  # natural language
    assert result["usage"]["total_tokens"] > 0  # the child's usage is the turn's

    store = store_at(tmp_path / ".clawkit" / "state.db")
    (start,) = store.events(result["session_id"], "subagent.start")
    record = start["data"]["dispatch"]
    assert start["data"]["transport"] == "clawdense" and record.startswith(">>$sub(researcher)")
    from clawkit_translation import ct1, decode_from_transport

    decoded = decode_from_transport(None, record)  # lossless: the CT/1 dispatch comes back exactly
    assert decoded.get("goal") == "Search for Node.js vulnerabilities" and decoded.get("agent") == "researcher"
    assert ct1.serialize(decoded).startswith("CT/1 TASK subagent agent=researcher")
    (child_run,) = store.child_runs(store.runs(result["session_id"])[0]["id"])
    assert child_run["agent"] == "researcher" and child_run["status"] == "done"
    store.close()
    stats = _stats(tmp_path, kit)
    assert stats["subagent_dispatches"] == 1 and stats["dispatch_routes"] == 1
    assert 0 < stats["transport_ratio_vs_json"] < 1


def test_multi_intent_message_spawns_two_children_in_parallel_and_merges(tmp_path, kit, model_server):
    _agents(tmp_path, kit, model_server)
    model_server.script(kit.ByModel(
        researcher=[Fault.delay(0.8, then=SUMMARY)],
        sysadmin=[Reply.tool_calls([("list_dir", {"path": "."})]), Fault.delay(0.3, then="src holds main.py and util.py.")],
    ))
    result = kit.run_json(tmp_path, "parent.yaml", "Search for Node.js vulnerabilities and list the files in the src folder")
    assert result["reply"] == (
        f"## web_search (researcher)\n\n{SUMMARY}\n\n## files (sysadmin)\n\nsrc holds main.py and util.py."
    )
    research = kit.requests_for(model_server, "researcher")[0]
    first_sys = kit.requests_for(model_server, "sysadmin")[0]
    assert research.messages[-1]["content"] == "Search for Node.js vulnerabilities"
    assert first_sys.messages[-1]["content"] == "list the files in the src folder"
    assert abs(research.received - first_sys.received) < 0.5  # spawned together
    stats = _stats(tmp_path, kit)
    assert stats["subagent_dispatches"] == 2 and stats["dispatch_multi"] == 1
    assert stats["transport_ratio_vs_json"] < 1
