"""The translation device dispatches to sub-agents (``clawkit run``, every plugin, the loopback model):
a confident route becomes an ``agent_<name>`` call the kernel makes through the gates (issue 30:
one delegation path) — the child's answer reaches the lead's model as a tool result wrapped as
data, and the lead answers; a message of several intents makes one call per intent, run in
parallel; the dispatch record is ClawDense (lossless) and the metrics count dispatches and the
transport compression ratio.

Changed deliberately in issue 30: the reply used to be the child's answer itself (the lead's
model was not called) and a MULTI dispatch's answers were merged by a template; both reached the
history as the lead's own words, past every gate."""

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
            dispatch_threshold: 0.4   # the default is the seed's 0.7 (issue 27 item 7); "Node.js" also reads as code
            profiles:
              research: {{subagent: researcher}}
              system: {{subagent: sysadmin}}
        """)


def _stats(tmp_path, kit):
    return json.loads(kit.clawkit(tmp_path, "translation", "stats", "--json").stdout)


def test_a_confident_route_spawns_the_research_subagent(tmp_path, kit, model_server, store_at):
    _agents(tmp_path, kit, model_server)
    model_server.script(kit.ByModel(researcher=[SUMMARY], front=["Two advisories; see CVE-2026-0001."]))
    result = kit.run_json(tmp_path, "parent.yaml", "Search for Node.js vulnerabilities")
    assert result["reply"] == "Two advisories; see CVE-2026-0001."  # the lead answers from the routed call's result
    (call,) = result["tool_calls"]
    assert call["name"] == "agent_researcher" and call["arguments"] == {"task": "Search for Node.js vulnerabilities"}
    (front,) = kit.requests_for(model_server, "front")
    planned, answer = front.messages[-2:]
    assert planned["role"] == "assistant" and planned["tool_calls"][0]["function"]["name"] == "agent_researcher"
    assert answer["role"] == "tool" and '<subagent_result agent="researcher">' in answer["content"] and SUMMARY in answer["content"]
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
        front=["Advisories found; src holds two files."],
    ))
    result = kit.run_json(tmp_path, "parent.yaml", "Search for Node.js vulnerabilities and list the files in the src folder")
    assert result["reply"] == "Advisories found; src holds two files."
    assert [c["name"] for c in result["tool_calls"]] == ["agent_researcher", "agent_sysadmin"]
    (front,) = kit.requests_for(model_server, "front")  # one lead call, after both children answered
    tool_msgs = [m["content"] for m in front.messages if m["role"] == "tool"]
    assert SUMMARY in tool_msgs[0] and "src holds main.py and util.py." in tool_msgs[1]
    research = kit.requests_for(model_server, "researcher")[0]
    first_sys = kit.requests_for(model_server, "sysadmin")[0]
    assert research.messages[-1]["content"] == "Search for Node.js vulnerabilities"
    assert first_sys.messages[-1]["content"] == "list the files in the src folder"
    assert abs(research.received - first_sys.received) < 0.5  # spawned together
    stats = _stats(tmp_path, kit)
    assert stats["subagent_dispatches"] == 2 and stats["dispatch_multi"] == 1
    assert stats["transport_ratio_vs_json"] < 1
