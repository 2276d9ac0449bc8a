"""Long tasks end to end, every builtin plugin loaded, through the CLI and the loopback model server:
plans that survive SIGKILL, pre-analysis, stop-and-think, hard budgets with their exit code, the
wrap-up round."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clawkit.testing.server import Fault, Reply

pytestmark = pytest.mark.e2e
EXIT_BUDGET = 5


@pytest.fixture
def agent_dir(tmp_path, model_server):
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: long-tasks
        model: {{name: openai/test-model, api_base: "{model_server.url}", api_key: sk-test, timeout: 20, max_retries: 0}}
        instructions: You work through long tasks.
        tools: [read_file, list_dir, update_plan]
        limits: {{context_window: 32000, max_tool_rounds: 12}}
        """))
    return tmp_path


def clawkit(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKIT_")}
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _sid(proc: subprocess.CompletedProcess) -> str:
    if proc.stdout.strip().startswith("{"):
        return json.loads(proc.stdout)["session_id"]
    return proc.stderr.split("[session ")[1].split("]")[0].split()[0]


def _system(request) -> str:
    return next((m["content"] for m in request.messages if m["role"] == "system"), "")


def _final(request) -> str:
    """The request's final message: where the healing notes go (issue 27 item 9)."""
    return (request.messages[-1].get("content") or "") if request.messages else ""


STEPS = [{"title": "list the folder", "status": "done"}, {"title": "read notes.txt", "status": "in_progress"}]


def test_plan_survives_sigkill_and_is_in_the_resumed_request(agent_dir, model_server):
    model_server.script(Reply.tool_calls([("update_plan", {"steps": STEPS, "note": "halfway"})]), Fault.delay(60))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKIT_")}
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "run", "agent.yaml", "read my notes", "--json"],
                            cwd=agent_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(model_server.requests) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert len(model_server.requests) == 2, proc.communicate(timeout=5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with sqlite3.connect(agent_dir / ".clawkit" / "state.db") as db:
        (sid, meta), = db.execute("SELECT id, metadata FROM sessions").fetchall()
    assert json.loads(meta)["plan"]["steps"] == STEPS
    model_server.reset()
    model_server.script("Notes read: hello.")
    out = clawkit(agent_dir, "run", "agent.yaml", "continue", "--session", sid, "--json")
    assert out.returncode == 0, out.stderr
    system = _system(model_server.requests[0])
    assert "## Plan" in system and "1. [x] list the folder\n2. [>] read notes.txt" in system and "Note: halfway" in system
    shown = clawkit(agent_dir, "sessions", "show", sid, "--agent", "agent.yaml")
    assert "read notes.txt" in shown.stdout


def test_pre_analysis_then_stop_and_think_after_three_failures(agent_dir, model_server):
    verdict = {"is_complex": True, "reasoning": "several files", "plan": ["read a", "read b", "report"]}
    failing = [Reply.tool_calls([("read_file", {"path": f"missing_{i}.txt"})]) for i in range(3)]
    model_server.script(json.dumps(verdict), *failing, "I could not find the files; here is why.")
    out = clawkit(agent_dir, "run", "agent.yaml", "read a.txt and b.txt and report", "--json",
                  "--set", "plugins.plans.pre_analysis.enabled=true")
    assert out.returncode == 0, out.stderr
    analysis, *main = model_server.requests
    assert "lead architect" in _system(analysis) and not analysis.tools
    assert "1. [>] read a\n2. [ ] read b\n3. [ ] report" in _system(main[0])
    assert "STOP and THINK" not in _final(main[2]) and "STOP and THINK" in _final(main[3])
    assert "STOP and THINK" not in _system(main[3])
    assert json.loads(out.stdout)["reply"] == "I could not find the files; here is why."


def test_pre_analysis_simple_request_goes_straight_on(agent_dir, model_server):
    model_server.script('{"is_complex": false, "reasoning": "a greeting", "plan": []}', "Hello!")
    out = clawkit(agent_dir, "run", "agent.yaml", "hi", "--json", "--set", "plugins.plans.pre_analysis.enabled=true")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["reply"] == "Hello!"
    assert "[>]" not in _system(model_server.requests[1])


def worker(request):
    """A model that lists the folder while tools are offered and summarises when they are not."""
    if request.tools:
        return Reply.tool_calls([("list_dir", {"path": "."})])
    return "Done so far: listed the folder twice. Left: the report."


def test_budget_stops_with_exit_5_and_the_session_resumes_with_a_raised_budget(agent_dir, model_server):
    model_server.script(worker)
    out = clawkit(agent_dir, "run", "agent.yaml", "survey the folder", "--set", "plugins.budgets.run.tool_calls=2")
    assert out.returncode == EXIT_BUDGET, out.stderr
    assert "stopped by a budget: run tool calls 2 of 2" in out.stderr
    assert out.stdout.strip() == "Done so far: listed the folder twice. Left: the report."  # never empty
    last = model_server.requests[-1]
    assert last.tools == [] and "what is left" in last.messages[-1]["content"]
    sid = _sid(out)
    # the session budget is spent: refused without a model call; raised: it continues
    n = len(model_server.requests)
    again = clawkit(agent_dir, "run", "agent.yaml", "go on", "--session", sid, "--set", "plugins.budgets.session.tool_calls=2", "--json")
    assert again.returncode == EXIT_BUDGET and len(model_server.requests) == n
    assert json.loads(again.stdout)["stop_reason"] == "budget"
    model_server.reset()
    model_server.script("Report: two entries.")
    raised = clawkit(agent_dir, "run", "agent.yaml", "go on", "--session", sid, "--set", "plugins.budgets.session.tool_calls=10", "--json")
    assert raised.returncode == 0, raised.stderr
    assert json.loads(raised.stdout)["reply"] == "Report: two entries."


@pytest.mark.parametrize("cap", ["tokens=30", "model_calls=1", "wall_time=0.001"])
def test_each_budget_kind_stops_the_run(agent_dir, model_server, cap):
    model_server.script(worker)
    out = clawkit(agent_dir, "run", "agent.yaml", "survey", "--json", "--set", f"plugins.budgets.run.{cap}")
    assert out.returncode == EXIT_BUDGET, out.stderr
    result = json.loads(out.stdout)
    assert result["stop_reason"] == "budget" and cap.split("=")[0].replace("_", " ") in result["stop_detail"]
    assert result["reply"] and model_server.requests[-1].tools == []


def test_8k_window_keeps_skill_instructions_with_their_tool_and_records_every_cut(tmp_path, model_server):
    (tmp_path / "README.md").write_text("# Project\n" + "This project forecasts weather for travellers. " * 170)
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: ctx8k
        model: {{name: openai/test-model, api_base: "{model_server.url}", api_key: sk-test, context_window: 8000, max_retries: 0}}
        instructions: You help travellers.
        tools: [read_file, skills]
        """))
    model_server.script("It is dry in Paris.")
    out = clawkit(tmp_path, "run", "agent.yaml", "Is it raining in Paris?", "--json")
    assert out.returncode == 0, out.stderr
    request = model_server.requests[0]
    system = _system(request)
    tools = {t["function"]["name"] for t in request.tools}
    skill_tools = {t for t in tools if t.startswith("skill_")}
    assert skill_tools, f"the weather question should activate a skill: {sorted(tools)}"
    assert "## Active skills" in system  # its instructions are there whenever its tool is offered
    assert "You help travellers." in system and "Is it raining in Paris?" in [m["content"] for m in request.messages]
    assert len(system) < 8000 * 4 * 0.6
    sid = json.loads(out.stdout)["session_id"]
    with sqlite3.connect(tmp_path / ".clawkit" / "state.db") as db:
        cuts = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE session_id = ? AND type = 'context.cut'", (sid,))]
    readme = [c for c in cuts if c["section"] == "project-context"]
    assert readme and readme[0]["action"] == "trimmed" and readme[0]["tokens_before"] > readme[0]["tokens_after"] > 0


def test_stagnation_alert_through_the_cli(agent_dir, model_server):
    n = iter(range(100))

    def looping(request):  # alternates two calls: never identical twice in a row, never new after the first two
        if not request.tools or "Stagnation alert" in _final(request):
            return "I am going in circles; stopping."
        return Reply.tool_calls([("list_dir", {"path": "." if next(n) % 2 else ".."})])

    model_server.script(looping)
    out = clawkit(agent_dir, "run", "agent.yaml", "survey", "--json", "--set", "plugins.healing.stagnation_steps=4")
    assert out.returncode == 0, out.stderr
    alerted = [i for i, r in enumerate(model_server.requests) if "Stagnation alert" in _final(r)]
    assert alerted == [6], alerted  # two new calls, then four repeats without progress
    assert json.loads(out.stdout)["reply"] == "I am going in circles; stopping."


def test_cost_budget_uses_the_price_table(agent_dir, model_server):
    model_server.script(worker)
    out = clawkit(agent_dir, "run", "agent.yaml", "survey", "--json", "--model", "openai/gpt-4o-mini",
                  "--set", "plugins.budgets.run.cost=0.000001")
    assert out.returncode == EXIT_BUDGET, out.stderr
    result = json.loads(out.stdout)
    assert "run cost" in result["stop_detail"] and result["usage"]["cost"] > 0


CATALOG_PLUGIN = '''
import sys
sys.path.insert(0, {data!r})
from catalog import TOOLS
from clawkit import hookimpl
from clawkit.tools import tool_from_function

def _tool(name, description, args):
    t = tool_from_function(lambda query="": None, name=name)
    t.definition.description = description
    t.definition.trusted_output = True  # a stub answering "<name> done": no outside content
    t.fn = lambda **kw: name + " done"
    return t

@hookimpl
def register_tools(register, agent):
    for name, description, args in TOOLS:
        register(_tool(name, description, args))
'''


def test_300_tools_each_request_carries_at_most_k_and_find_tools_brings_another(agent_dir, model_server):
    data = Path(__file__).resolve().parents[1] / "plugins/builtin/toolsearch/tests/data"
    site = agent_dir / "site"
    (site / "catalog_tools-0.1.dist-info").mkdir(parents=True)
    (site / "catalog_tools-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: catalog-tools\nVersion: 0.1\n")
    (site / "catalog_tools-0.1.dist-info" / "entry_points.txt").write_text("[clawkit]\ncatalog = catalog_tools\n")
    (site / "catalog_tools.py").write_text(CATALOG_PLUGIN.format(data=str(data)))
    (agent_dir / "agent.yaml").write_text((agent_dir / "agent.yaml").read_text().replace(
        "tools: [read_file, list_dir, update_plan]", 'tools: ["*_*", find_tools]'))
    model_server.script(
        Reply.tool_calls([("weather_forecast", {"query": "Rome"})]),
        Reply.tool_calls([("find_tools", {"query": "send an sms text message to a phone"})]),
        Reply.tool_calls([("twilio_send_sms", {"query": "ready"})]),
        "Forecast checked and the customer texted.",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLAWKIT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "What is the weather forecast for Rome this weekend?",
                          "--json"], cwd=agent_dir, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    sent = [{t["function"]["name"] for t in r.tools} for r in model_server.requests]
    k = 8
    sys.path.insert(0, str(data))
    from catalog import TOOLS

    catalog = {t[0] for t in TOOLS}
    for names in sent:
        assert len(names & catalog) <= k, names  # at most k of the 300 (used and found ones first)
    assert "weather_forecast" in sent[0] and "find_tools" in sent[0]
    assert "twilio_send_sms" not in sent[1] and "twilio_send_sms" in sent[2]
    result = json.loads(out.stdout)
    assert [c["name"] for c in result["tool_calls"]] == ["weather_forecast", "find_tools", "twilio_send_sms"]
    assert not any(c["is_error"] for c in result["tool_calls"])


def test_clawkit_prompt_shows_every_cut(tmp_path):
    (tmp_path / "README.md").write_text("# Project\n" + "This project forecasts weather for travellers. " * 170)
    (tmp_path / "agent.yaml").write_text(textwrap.dedent("""
        name: ctx8k
        model: {name: openai/test-model, api_base: "http://127.0.0.1:9/v1", api_key: sk-test, context_window: 8000}
        instructions: You help travellers.
        tools: [read_file]
        """))
    out = clawkit(tmp_path, "prompt", "agent.yaml", "--message", "hi", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)["contributors"]}
    readme = rows["project-context"]
    assert readme["source"] == "project_files" and readme["chars_before"] > readme["chars"] == 3200
    assert "trimmed from" in readme["detail"] and "project_files budget" in readme["detail"]
