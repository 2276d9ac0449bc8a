"""clawkit-mcp against an MCP server written with the SDK (tests/mcp_test_server.py), stdio and HTTP,
with every builtin plugin loaded and the model on the loopback model_server."""

from __future__ import annotations

import json
import os

import pytest

from clawkit.testing.server import Reply


def APPROVE(call, reason, ctx):  # noqa: N802 - the person says yes: these tests are about transports, not approvals
    return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def tool_names(request) -> list[str]:
    return sorted(t["function"]["name"] for t in request.tools if t["function"]["name"].startswith("mcp__"))


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m.get("role") == "tool"]


def test_discovery_allowlist_gates_and_approval(mcp_agent, model_server, stdio_server):
    asked = []

    def approver(call, reason, ctx):
        asked.append((call.name, reason))
        return True

    agent = mcp_agent(
        Reply.tool_calls([("mcp__demo__add", {"a": 2, "b": 3})]),
        "It is 5.",
        servers={"demo": stdio_server()},
        tools=["mcp__demo__add", "mcp__demo__e*"],
        approver=approver,
    )
    result = agent.run("add 2 and 3")
    assert result.reply == "It is 5."
    first, second = model_server.requests
    # the allowlist decides: add explicitly, echo and erase by pattern; crash, hang, pid… not offered
    assert tool_names(first) == ["mcp__demo__add", "mcp__demo__echo", "mcp__demo__erase"]
    add = next(t for t in first.tools if t["function"]["name"] == "mcp__demo__add")
    assert add["function"]["parameters"]["required"] == ["a", "b"]
    # guarded by default: the policy asked, once, and the approver said yes
    assert [name for name, _ in asked] == ["mcp__demo__add"]
    (content,) = tool_results(second)
    assert "5" in content and "UNTRUSTED DATA" in content  # the shield wrapped the MCP result
    risks = {t.name: t.definition.risk.value for t in agent.tools.visible() if t.name.startswith("mcp__")}
    assert risks == {"mcp__demo__add": "guarded", "mcp__demo__echo": "guarded", "mcp__demo__erase": "unsafe"}
    policy = pytest.importorskip("clawkit_policy")
    kinds = {(r["kind"], r["tool"]) for r in policy.ledger_for(agent.store).records()}
    assert ("approval", "mcp__demo__add") in kinds
    events = [e["type"] for e in agent.store.events(result.session_id)]
    assert "tool.approval" in events


def test_denied_approval_is_reported_and_the_server_is_not_called(mcp_agent, model_server, stdio_server):
    agent = mcp_agent(
        Reply.tool_calls([("mcp__demo__echo", {"text": "hi"})]),
        "Denied.",
        servers={"demo": stdio_server()},
        tools=["mcp__demo__*"],
        approver=lambda call, reason, ctx: False,
    )
    agent.run("echo hi")
    (content,) = tool_results(model_server.requests[1])
    assert "not approved" in content


def test_crash_mid_session_is_recovered_and_close_leaves_no_process(mcp_agent, model_server, workspace, stdio_server):
    pid_file = workspace / "pids.txt"
    agent = mcp_agent(
        Reply.tool_calls([("mcp__demo__pid", {})]),
        Reply.tool_calls([("mcp__demo__crash", {})]),
        Reply.tool_calls([("mcp__demo__add", {"a": 1, "b": 1})]),
        "Recovered.",
        servers={"demo": stdio_server(env={"MCP_TEST_PID_FILE": str(pid_file)}, risk="safe")},
        tools=["mcp__demo__*"],
        approver=APPROVE,  # MCP descriptions are untrusted content: each MCP call after them is asked for
    )
    result = agent.run("go")
    assert result.reply == "Recovered."
    pid_result, crashed, added = tool_results(model_server.requests[-1])
    assert "Error" in crashed and "crashed" in crashed
    assert "2" in added and "Error" not in added
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2 and str(pids[0]) in pid_result  # started once, restarted once after the crash
    assert alive(pids[1])
    agent.close()
    assert not any(alive(p) for p in pids)


def test_reused_across_turns(mcp_agent, model_server, workspace, stdio_server):
    pid_file = workspace / "pids.txt"
    agent = mcp_agent(
        Reply.tool_calls([("mcp__demo__add", {"a": 1, "b": 2})]), "3",
        Reply.tool_calls([("mcp__demo__add", {"a": 3, "b": 4})]), "7",
        servers={"demo": stdio_server(env={"MCP_TEST_PID_FILE": str(pid_file)}, risk="safe")},
        tools=["mcp__demo__add"],
    )
    sid = agent.run("one").session_id
    agent.run("two", session_id=sid)
    assert len(pid_file.read_text().split()) == 1


def test_hanging_call_and_hanging_start_become_tool_errors(mcp_agent, model_server, stdio_server):
    agent = mcp_agent(
        Reply.tool_calls([("mcp__slow__hang", {}), ("mcp__stuck__add", {"a": 1, "b": 1})]),
        "Gave up.",
        servers={
            "slow": stdio_server(risk="safe", call_timeout=1),
            "stuck": stdio_server(risk="safe", startup_timeout=2, env={"MCP_TEST_HANG_ON_START": "1"}),
        },
        tools=["mcp__slow__hang", "mcp__stuck__add"],
        approver=APPROVE,  # MCP descriptions are untrusted content: each MCP call after them is asked for
    )
    result = agent.run("try")
    assert result.reply == "Gave up."
    hung, stuck = tool_results(model_server.requests[1])
    assert "did not answer within 1 s" in hung
    assert "did not start within 2 s" in stuck and "hanging on purpose" in stuck
    events = {e["type"] for e in agent.store.events(result.session_id)}
    assert "mcp.server_error" in events


def test_list_changed_refreshes_the_tools(mcp_agent, model_server, stdio_server):
    agent = mcp_agent(
        Reply.tool_calls([("mcp__demo__grow", {})]),
        Reply.tool_calls([("mcp__demo__double", {"x": 21})]),
        "42",
        servers={"demo": stdio_server(risk="safe")},
        tools=["mcp__demo__*"],
        approver=APPROVE,  # MCP descriptions are untrusted content: each MCP call after them is asked for
    )
    agent.run("grow")
    first, second, third = model_server.requests
    assert "mcp__demo__double" not in tool_names(first)
    assert "mcp__demo__double" in tool_names(second)
    assert "42" in tool_results(third)[-1]


def test_http_transport_prompts_and_resources(mcp_agent, model_server, http_server):
    agent = mcp_agent(
        Reply.tool_calls([("mcp__remote__add", {"a": 20, "b": 22}), ("mcp__remote__read_resource", {"uri": "memo://notes"})]),
        "Done mcp-styled.",
        servers={"remote": {"url": http_server, "headers": {"Authorization": "Bearer test-token"}, "risk": "safe",
                            "prompts": ["house_style"]}},
        tools=["mcp__remote__*"],
        approver=APPROVE,  # MCP descriptions are untrusted content: each MCP call after them is asked for
    )
    agent.run("add")
    first, second = model_server.requests
    assert "mcp__remote__list_resources" in tool_names(first)
    system = first.messages[0]["content"]
    assert "mcp-styled" in system  # the server's prompt became a prompt section
    added, note = tool_results(second)
    assert "42" in added and "secret number is 42" in note


def test_mcp_list_cli(tmp_path, stdio_server):
    import subprocess
    import sys

    import yaml

    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump({"name": "lister", "model": "openai/none", "tools": ["mcp__demo__a*"],
                                     "mcp": {"servers": {"demo": stdio_server()}}}))
    out = subprocess.run([sys.executable, "-m", "clawkit", "mcp", "list", str(agent), "--json"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["state"] == "ready"
    by_name = {t["name"]: t for t in row["tools"]}
    assert by_name["mcp__demo__add"]["allowed"] and not by_name["mcp__demo__echo"]["allowed"]
    assert by_name["mcp__demo__erase"]["risk"] == "unsafe"
