"""Thirteen plugins, one agent (issue 11): every builtin loaded, driven through the CLI
against the loopback model server. One test (or a few) per numbered point of the issue.

The CLI runs in a subprocess with the full install (no CLAWKIT_LOAD_PLUGINS), so what
is asserted here is what a user of the README gets.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "real-skills"


@pytest.fixture(scope="module")
def server():
    with ModelServer() as ms:
        yield ms


@pytest.fixture
def model(server):
    """The module's server, emptied: script it per test (``model.script(...)``)."""
    server.reset()
    yield server
    server.reset()


def write_agent(folder: Path, server: ModelServer, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "agent.yaml"
    head = f'name: composed\nmodel: {{name: openai/test, api_base: "{server.url}", api_key: x, max_retries: 0, timeout: 20}}\n'
    path.write_text(head + textwrap.dedent(body).lstrip(), encoding="utf-8")
    return path


def clawkit(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180,
            input_text: str | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}  # the full install
    full.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(cwd), "NO_COLOR": "1"})
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout, input=input_text if input_text is not None else "")


def system_of(request) -> str:
    return next((m["content"] for m in request.messages if m["role"] == "system"), "")


def tool_names(request) -> set[str]:
    return {t["function"]["name"] for t in request.tools}


def main_requests(server: ModelServer) -> list:
    """Requests of the agent's own turns (not the classifier's or a summariser's)."""
    return [r for r in server.requests if "classify" not in system_of(r).lower()]


# --- 1. one allowlist -----------------------------------------------------------------------------------


def test_allowlist_is_exact_and_skills_need_an_entry(tmp_path, model):
    model.script(lambda req: "Done.")
    plain = write_agent(tmp_path / "plain", model, "instructions: You list files.\ntools: [read_file, list_dir]\n")
    r = clawkit(plain.parent, "run", str(plain), "What is in the folder?")
    assert r.returncode == 0, r.stderr
    (req,) = main_requests(model)
    assert tool_names(req) == {"read_file", "list_dir"}
    system = system_of(req)
    assert "You list files." in system
    for leak in ("## Skills", "load_skill", "skill_weather", "Manners", "greet"):
        assert leak not in system, leak

    model.reset()
    model.script(lambda req: "Done.")
    skilled = write_agent(tmp_path / "skilled", model, "tools: [read_file, list_dir, skills]\n")
    r = clawkit(skilled.parent, "run", str(skilled), "What is in the folder?")
    assert r.returncode == 0, r.stderr
    (req,) = main_requests(model)
    assert tool_names(req) == {"read_file", "list_dir", "load_skill"}  # skill tools only once a skill is active
    assert "## Skills" in system_of(req) and "- weather:" in system_of(req)


def test_unknown_tool_name_is_a_config_error_with_file_line_and_known_tools(tmp_path, model):
    agent = write_agent(tmp_path, model, "instructions: hi\ntools:\n  - read_file\n  - lst_dir\n")
    r = clawkit(tmp_path, "run", str(agent), "hello")
    assert r.returncode == 2
    assert f"{agent}:6: tools[1]: unknown tool 'lst_dir' (did you mean 'list_dir'?)" in r.stderr
    assert "list_dir" in r.stderr and "read_file" in r.stderr
    assert model.requests == []


# --- 2. every refused call is audited --------------------------------------------------------------------


def test_refused_calls_are_audited_with_the_same_ids(tmp_path, model):
    (tmp_path / "notes.txt").write_text("hello\n")
    model.script(
        Reply.tool_calls([("write_file", {"path": "x.txt", "content": "no"}), ("launch_rockets", {}),
                          ("read_file", {"path": "notes.txt"})]),
        "Done.",
    )
    agent = write_agent(tmp_path, model, "tools: [read_file]\n")
    r = clawkit(tmp_path, "run", str(agent), "go", "--json")
    assert r.returncode == 0, r.stderr
    calls = json.loads(r.stdout)["tool_calls"]
    ids = {c["name"]: c["id"] for c in calls}
    db = sqlite3.connect(tmp_path / ".clawkit" / "state.db")
    db.row_factory = sqlite3.Row
    rows = [dict(x) for x in db.execute("SELECT * FROM policy_audit ORDER BY seq")]
    blocked = {x["tool"]: x for x in rows if x["decision"] == "tool.blocked"}
    assert set(blocked) == {"write_file", "launch_rockets"}
    assert "allowlist" in blocked["write_file"]["reason"] and blocked["launch_rockets"]["reason"] == "unknown tool"
    executed = next(x for x in rows if x["tool"] == "read_file" and x["kind"] == "execution")
    for name, rec in blocked.items():
        assert rec["step_id"] == ids[name]
        for key in ("session_id", "trace_id", "task_id", "run_id"):
            assert rec[key] and rec[key] == executed[key], key
    tool_msgs = [m for m in model.requests[-1].messages if m["role"] == "tool"]
    assert sum("unknown tool" in m["content"] for m in tool_msgs) == 2


# --- 3. clawkit prompt is exact ----------------------------------------------------------------------------


def test_prompt_preview_is_what_the_turn_sends(tmp_path, model):
    model.script(lambda req: "Sunny.")
    agent = write_agent(tmp_path, model, "instructions: You help.\ntools: [read_file, list_dir, skills]\n")
    message = "What's the weather in Paris today?"
    p = clawkit(tmp_path, "prompt", str(agent), "--message", message, "--json")
    assert p.returncode == 0, p.stderr
    preview = json.loads(p.stdout)
    r = clawkit(tmp_path, "run", str(agent), message)
    assert r.returncode == 0, r.stderr
    (sent,) = main_requests(model)
    assert preview["prompt"] == system_of(sent)
    assert set(preview["tools"]) == tool_names(sent)
    assert "skill_weather" in preview["tools"] and "### Skill: weather" in preview["prompt"]  # routed, as in the turn
    sent_schemas = {t["function"]["name"]: t["function"]["parameters"] for t in sent.tools}
    assert {t["name"]: t["parameters"] for t in preview["request"]["tools"]} == sent_schemas


# --- 4. ordering that composes ----------------------------------------------------------------------------


def test_hook_order_with_every_builtin_loaded():
    from clawkit.hooks import HookRunner
    from clawkit.plugins import get_plugin_manager

    hooks = HookRunner(get_plugin_manager())
    order = lambda name: [p for p, _, _ in hooks.impls(name)]  # noqa: E731
    assert order("before_tool_call") == ["skills", "budgets", "policy", "tools", "mcp", "sequence", "subagents", "shield", "otel"]
    assert order("after_tool_call") == ["policy", "truncator", "shield", "sequence", "budgets", "otel"]
    # sequence at 55 (issue 27 item 1: rules stated next to their tools) — changed deliberately
    assert order("message_received") == ["otel", "policy", "budgets", "directives", "mcp", "skills", "translation",
                                         "memory", "sequence", "contributors", "classifier", "subagents", "plans"]
    assert order("before_llm_call") == ["skills", "directives", "translation", "healing", "subagents", "toolsearch",
                                        "mcp", "truncator", "compaction", "shield", "budgets", "otel"]
    assert order("message_sending")[:2] == ["translation", "directives"]  # then contrib hello, if installed


def test_third_party_positions_tryfirst_trylast_and_explicit():
    """An unmarked third-party hookimpl runs after the builtins' work, tryfirst before them, trylast
    after the unmarked ones, and ``hook_order`` between two builtins (docs/hook-order.md)."""
    from clawkit import hook_order, hookimpl
    from clawkit.hooks import HookRunner
    from clawkit.plugins import get_plugin_manager

    class Plain:
        @hookimpl
        def after_tool_call(self, ctx, call, result): ...

        @hookimpl
        def before_tool_call(self, ctx, call): ...

    class First:
        @hookimpl(tryfirst=True)
        def after_tool_call(self, ctx, call, result): ...

    class Last:
        @hookimpl(trylast=True)
        def after_tool_call(self, ctx, call, result): ...

    class Between:
        @hookimpl
        @hook_order(25)
        def after_tool_call(self, ctx, call, result): ...

    pm = get_plugin_manager(extra=[Plain(), First(), Last(), Between()])
    names = {"Plain": "plain", "First": "first", "Last": "last", "Between": "between"}
    got = [names.get(type(pm.get_plugin(p)).__name__, p) for p, _, _ in HookRunner(pm).impls("after_tool_call")]
    assert got == ["first", "policy", "truncator", "between", "shield", "sequence", "budgets", "plain", "last", "otel"]
    gates = [names.get(type(pm.get_plugin(p)).__name__, p) for p, _, _ in HookRunner(pm).impls("before_tool_call")]
    assert gates == ["skills", "budgets", "policy", "tools", "mcp", "sequence", "subagents", "plain", "shield", "otel"]  # a rewrite is validated


def test_skill_tool_called_without_its_dialect_field_is_filled_not_blocked(tmp_path, model):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "web-fetch.claws").write_text((FIXTURES / "claws" / "web-fetch.claws").read_text())
    model.script(Reply.tool_calls([("skill_web_fetch", {"question": "what is new?"})]), "Done.")
    agent = write_agent(tmp_path, model, "tools: [skills, read_file]\n")
    r = clawkit(tmp_path, "run", str(agent), "Please summarize https://docs.python.org/3/whatsnew/ for me", "--json")
    assert r.returncode == 0, r.stderr
    (call,) = json.loads(r.stdout)["tool_calls"]
    assert not call["blocked"] and not call["is_error"], call
    tool_msg = next(m["content"] for m in model.requests[-1].messages if m["role"] == "tool")
    assert '"url": "https://docs.python.org/3/whatsnew/"' in tool_msg and '"action": "summarize"' in tool_msg


# --- 5. big files keep their tail (and 4: truncate, then wrap) ----------------------------------------------


@pytest.mark.parametrize("shield", ["on", "off"])
def test_big_log_reaches_the_model_with_head_and_tail(tmp_path, model, shield):
    log = tmp_path / "app.log"
    with log.open("w") as fh:
        fh.write("FIRST LINE: service started\n")
        for i in range(200_000):
            fh.write(f"{i:08d} INFO request handled in 3 ms from 10.0.0.{i % 250}\n")
        fh.write("ERROR: disk full while writing segment 99 (the answer is at the end)\n")
    assert log.stat().st_size > 10_000_000
    model.script(Reply.tool_calls([("read_file", {"path": "app.log"})]), "Disk full.")
    extra = "plugins: {shield: {enabled: false}}\n" if shield == "off" else ""
    agent = write_agent(tmp_path, model, "tools: [read_file]\nlimits: {context_window: 32000}\n" + extra)
    r = clawkit(tmp_path, "run", str(agent), "What went wrong?", "--json")
    assert r.returncode == 0, r.stderr
    tool_msg = next(m["content"] for m in model.requests[-1].messages if m["role"] == "tool")
    assert "FIRST LINE: service started" in tool_msg
    assert "ERROR: disk full while writing segment 99" in tool_msg
    assert len(tool_msg) < 200_000
    assert "bytes omitted: bytes" in tool_msg  # read_file's own head+tail marker (it read only its cap)
    import re

    if shield == "on":  # cut first, then wrapped: one data block holding both head and tail
        m = re.fullmatch(r"\[UNTRUSTED DATA (\w+) from read_file[^\n]*\]\n(.*)\n\[END UNTRUSTED DATA \1\]", tool_msg, re.S)
        assert m, tool_msg[:300] + " … " + tool_msg[-300:]
        inner = m.group(2)
        assert inner.startswith("FIRST LINE") and "ERROR: disk full" in inner.splitlines()[-1]
    else:
        assert tool_msg.startswith("FIRST LINE") and "UNTRUSTED" not in tool_msg
        assert tool_msg.rstrip().endswith("(the answer is at the end)")


# --- 6. hot reload refreshes everything derived from skills -----------------------------------------------

SKILL = """# MANIFEST
id: {id}
version: "1"
---
# VIBE
**Purpose:** {purpose}
---
# CLAW-IDL
interface {iface} {{
  {field}: string;
}}
---
# ENGINE
1. Answer from the {field}.
"""


def _readline(proc: subprocess.Popen, timeout: float = 120) -> str:
    line = proc.stdout.readline()  # chat answers one line per message; a dead chat gives ""
    assert line, f"chat gave no reply: {proc.stderr.read() if proc.poll() is not None else ''}"
    return line.rstrip("\n")


def _summary_lines(system: str) -> list[str]:
    """The tools summary section's lines ("- name: description")."""
    part = system.split("You can call these tools:\n", 1)[1]
    return [ln for ln in part.split("\n\n", 1)[0].splitlines() if ln.startswith("- ")]


def _index_lines(system: str) -> list[str]:
    part = system.split("## Skills", 1)[1]
    return [ln for ln in part.split("\n\n#", 1)[0].splitlines() if ln.startswith("- ")]


def test_hot_reload_refreshes_schemas_summary_and_index_in_the_next_request(tmp_path, model):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "tides.claws").write_text(SKILL.format(id="tides", purpose="TIDES-V1 tide tables for a port.",
                                                     iface="TideQuery", field="port"))
    (skills / "currents.claws").write_text(SKILL.format(id="currents", purpose="CURRENTS sea currents.",
                                                        iface="CurrentQuery", field="strait"))
    model.script(lambda req: "Noted.")
    agent = write_agent(tmp_path, model, "tools: [read_file, skills]\nplugins: {skills: {always: [tides, currents]}}\n")
    full = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}  # every builtin
    full.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(tmp_path), "NO_COLOR": "1"})
    proc = subprocess.Popen([sys.executable, "-m", "clawkit", "chat", str(agent)], cwd=tmp_path, env=full,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        proc.stdin.write("Hello there\n")
        proc.stdin.flush()
        assert _readline(proc) == "Noted."
        (first,) = main_requests(model)
        assert {"skill_tides", "skill_currents", "load_skill"} <= tool_names(first)
        summary = _summary_lines(system_of(first))
        assert any(ln.startswith("- skill_tides:") for ln in summary)
        assert {ln.split(":")[0][2:] for ln in summary} == tool_names(first)  # the summary lists what is sent
        assert not any(ln.startswith("- moon:") for ln in _index_lines(system_of(first)))

        # while the chat runs: tides changes its description and its schema, currents goes, moon arrives
        (skills / "tides.claws").write_text(SKILL.format(id="tides", purpose="TIDES-V2 tide tables and moon phases.",
                                                         iface="TideQuery", field="harbour"))
        (skills / "currents.claws").unlink()
        (skills / "moon.claws").write_text(SKILL.format(id="moon", purpose="MOON-NEW phases of the moon.",
                                                        iface="MoonQuery", field="date"))
        model.requests.clear()
        proc.stdin.write("And now?\n")
        proc.stdin.flush()
        assert _readline(proc) == "Noted."
        (second,) = main_requests(model)
    finally:
        proc.stdin.close()
        assert proc.wait(60) == 0, proc.stderr.read()

    sent = {t["function"]["name"]: t["function"] for t in second.tools}
    assert "skill_currents" not in sent and "skill_moon" not in sent  # moon is listed, not active
    assert set(sent["skill_tides"]["parameters"]["properties"]) == {"harbour"}
    assert "TIDES-V2" in sent["skill_tides"]["description"]
    system = system_of(second)
    summary = _summary_lines(system)
    assert {ln.split(":")[0][2:] for ln in summary} == set(sent)  # no stale skill tool, none missing
    (tides_line,) = [ln for ln in summary if ln.startswith("- skill_tides:")]
    assert "TIDES-V2" in tides_line and "TIDES-V1" not in system
    assert "CURRENTS" not in system and "skill_currents" not in system
    assert any(ln.startswith("- moon:") and "MOON-NEW" in ln for ln in _index_lines(system))


# --- 7. directives persist -----------------------------------------------------------------------------------


def test_directive_typed_inside_a_message_persists(tmp_path, model):
    model.script(lambda req: "ok")
    agent = write_agent(tmp_path, model, "tools: []\n")
    r = clawkit(tmp_path, "chat", str(agent), input_text="/think high analyze this plan\nand the second part?\n")
    assert r.returncode == 0, r.stderr
    first, second = main_requests(model)
    assert "## Reasoning" in system_of(first) and "## Reasoning" in system_of(second)
    assert first.messages[-1]["content"] == "analyze this plan"  # the directive itself is stripped


# --- 8. classification and recall serve the first turn of a one-shot run ----------------------------------------


def test_one_shot_first_prompt_is_classified_with_the_default_wait(tmp_path, model):
    """A fresh `clawkit run`: the classifier (a second model on the loopback server, answering after
    200 ms) shapes the first prompt; the default wait counts from its request, not its provider's set-up."""
    import time

    verdict = json.dumps({"label": "login form review", "topic": "coding", "complexity": "moderate",
                          "domain": ["security"], "flags": []})

    def answer(req):
        if "You classify a conversation" in system_of(req):
            time.sleep(0.2)
            return verdict
        return "Looks fine."

    model.script(answer)
    agent = write_agent(tmp_path, model, f"""\
        instructions: You help.
        tools: [read_file]
        plugins: {{classifier: {{model: {{name: openai/classify, api_base: "{model.url}", api_key: x}}}}}}
        contributors:
          - id: sec
            content: SECURITY-REVIEW-CHECKLIST
            tags: [domain:security]
        """)
    r = clawkit(tmp_path, "run", str(agent), "Please check my login form code.")
    assert r.returncode == 0, r.stderr
    (sent,) = main_requests(model)
    assert "SECURITY-REVIEW-CHECKLIST" in system_of(sent)  # shaped by the classification, first turn
    db = sqlite3.connect(tmp_path / ".clawkit" / "state.db")
    (timing,) = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type = 'classifier.timing'")]
    assert timing["ok"] is True and 200 <= timing["request_ms"] < 1000


def test_one_shot_recall_loads_the_model_in_time_and_keeps_a_distinct_fact(tmp_path, model, extra=""):
    """Three near-identical past conversations and a MEMORY.md fact: a fresh process loads its
    embedding model during the turn, recalls in time, and the fact is not crowded out."""
    (tmp_path / "MEMORY.md").write_text("# Deploys\n\nThe production deploy window is Thursday 14:00 UTC; "
                                        "never deploy on Fridays.\n")
    # load_wait_ms: the default (4 s, bench_first_turn.py) is twice the worst load measured; a test run
    # sharing two cores with other suites can take longer, and what is tested here is the mechanism
    extra = extra or "plugins: {memory: {recall: {load_wait_ms: 30000}}}\n"
    agent = write_agent(tmp_path, model, "instructions: You help.\ntools: [read_file]\n" + extra)
    asked = "When is the production deploy window? I keep forgetting the production deploy window."
    for reply in ("I am not sure, sorry.", "Sorry, I am not sure.", "I'm not sure, sorry!"):
        model.script(lambda req, reply=reply: reply)  # near-identical, not identical
        r = clawkit(tmp_path, "run", str(agent), asked)  # a one-shot process each; the next one indexes it
        assert r.returncode == 0, r.stderr
    model.reset()
    model.script(lambda req: "Thursday 14:00 UTC.")
    r = clawkit(tmp_path, "run", str(agent), "When is the production deploy window?")
    assert r.returncode == 0, r.stderr
    (sent,) = main_requests(model)
    system = system_of(sent)
    assert "## Relevant memory" in system, system
    memory = system.split("## Relevant memory", 1)[1]
    assert "[MEMORY.md#" in memory and "Thursday 14:00 UTC" in memory  # the distinct fact made it
    assert memory.count("I keep forgetting the production deploy window") == 1  # near-duplicates collapsed


# --- 9. plugins meet through hooks, not imports ------------------------------------------------------------
# (tests/test_plugin_seams.py: no builtin imports another, and each one can be uninstalled; here the three
# seams the issue names, through the CLI with every other builtin loaded)

BUILTINS = sorted(p.name for p in (REPO / "plugins" / "builtin").iterdir() if (p / "pyproject.toml").exists())


@pytest.mark.parametrize("removed", ["policy", "litellm", "skills"])
def test_everything_but_one_named_seam_still_works(tmp_path, model, removed):
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    (tmp_path / "MEMORY.md").write_text("# Facts\n\nThe answer to everything is 42.\n")
    model.script(Reply.tool_calls([("read_file", {"path": "notes.txt"})]), "It is 42.")
    tools = "[read_file]" if removed == "skills" else "[read_file, skills]"  # `skills` is the plugin's own group
    agent = write_agent(tmp_path, model, f"instructions: Answer from the notes.\ntools: {tools}\n"
                        "plugins: {memory: {recall: {load_wait_ms: 30000}}}\n")
    only = ",".join(f"clawkit-{b}" for b in BUILTINS if b != removed)
    r = clawkit(tmp_path, "run", str(agent), "What is the answer to everything?", "--json",
                env={"CLAWKIT_LOAD_PLUGINS": only})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["reply"] == "It is 42." and not out["tool_calls"][0]["is_error"]
    first = main_requests(model)[0]
    system = system_of(first)
    assert "Answer from the notes." in system
    assert "[MEMORY.md#" in system  # memory embeds locally, whoever else is missing (litellm too)
    assert ("load_skill" in tool_names(first)) is (removed != "skills")


# --- 10. real skills, no silent loss --------------------------------------------------------------------------


def test_workspace_skill_wins_and_skills_needing_absent_tools_are_not_offered(tmp_path, model):
    """OpenClaw's precedence (workspace over user over bundled): the user's own weather.claws is the one
    routed; a SKILL.md needing shell_exec is not offered to an agent without it."""
    skills = tmp_path / "skills"
    skills.mkdir()
    mine = (REPO / "skills" / "weather.claws").read_text().replace(
        "Current weather and short forecasts for any place, from the free Open-Meteo API (no key needed).",
        "MY-OWN-WEATHER forecasts from my station.")
    assert "MY-OWN-WEATHER" in mine
    (skills / "weather.claws").write_text(mine)
    import shutil

    shutil.copytree(FIXTURES / "openclaw" / "tmux-session", skills / "tmux-session")
    shutil.copytree(FIXTURES / "openclaw" / "summarize-url", skills / "summarize-url")
    model.script(lambda req: "Sunny.")
    agent = write_agent(tmp_path, model, "tools: [read_file, skills]\n")
    r = clawkit(tmp_path, "run", str(agent), "What's the weather in Paris today?")
    assert r.returncode == 0, r.stderr
    (sent,) = main_requests(model)
    system = system_of(sent)
    assert "### Skill: weather" in system and "MY-OWN-WEATHER" in system
    assert "Open-Meteo API (no key needed)" not in system  # the bundled one is shadowed
    assert "- summarize-url:" in system and "tmux-session" not in system  # requires.tools: shell_exec


# --- 11. the plugin author's path ----------------------------------------------------------------------------------


def test_a_tagged_contributor_alone_keeps_the_instructions(tmp_path, model):
    """Only a plugin's contributor that does not match (contrib hello's Manners, about a tool this agent
    lacks) and no clawkit-contributors: the request still carries the agent's instructions."""
    model.script(lambda req: "Hi.")
    agent = write_agent(tmp_path, model, "instructions: You are terse.\ntools: []\n")
    r = clawkit(tmp_path, "run", str(agent), "hello", env={"CLAWKIT_LOAD_PLUGINS": "clawkit-http,clawkit-hello"})
    assert r.returncode == 0, r.stderr
    (sent,) = model.requests
    assert sent.messages[0] == {"role": "system", "content": "You are terse."}


def test_skills_check_warns_for_every_construct_it_drops(tmp_path):
    import shutil

    shutil.copytree(FIXTURES, tmp_path / "skills")
    r = clawkit(tmp_path, "skills", "check", "--workspace", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    mine = sorted(ln.replace(f"{tmp_path}/skills/", "") for ln in r.stdout.splitlines()
                  if ln.startswith("warning:") and str(tmp_path) in ln)
    supported = ("context.action, context.cmd, context.message, context.path, context.query, context.session_id, "
                 "context.task, context.text, context.url, context.workspace, session.id, user.message, workspace")
    # exactly one located warning per construct that does not become behaviour; none for what does:
    # prose and numbered ENGINEs, awaited calls in a <script>, supported @dialect sources, vibe extras,
    # telemetry, lexicon, verification, os/requires wherever OpenClaw's metadata puts them, emoji/homepage
    assert mine == sorted([
        "warning: claws/log-triage.claws:26: [STATE CHECKPOINT] STATE is kept as metadata; checkpoints are not restored",
        "warning: claws/quiet.claws:15: [ENGINE] the ENGINE block compiles to an empty plan: its <script lang=python> "
        "code is never run and holds no comment steps or awaited calls",
        "warning: claws/quiet.claws:19: [SECRET SAUCE] unknown block: not a .claws block; its text is merged into "
        "the previous block's, not carried into behaviour",
        "warning: claws/shell-runner.claws:19: [IDL] @dialect:context.mood on RunCommand.verbosity has no source; "
        f"the field is never auto-filled (supported: {supported})",
        "warning: claws/web-fetch.claws:2: [CRYPTOGRAPHIC IDENTITY] the signature is not verified; kept as provenance metadata",
        "warning: claws/web-fetch.claws:10: [MANIFEST] manifest key 'runtime' is kept as metadata only; clawkit does not act on it",
        "warning: claws/web-fetch.claws:11: [MANIFEST] manifest key 'memory_strategy' is kept as metadata only; "
        "clawkit does not act on it",
        "warning: claws/web-fetch.claws:12: [MANIFEST] manifest key 'integrity' is kept as metadata only; "
        "clawkit does not act on it",
        "warning: claws/web-fetch.claws:47: [NEURAL FINGERPRINT] NEURAL FINGERPRINT is kept as metadata; the Shield's "
        "third layer does not use it yet",
        "warning: openclaw/apple-notes/SKILL.md:5: [FRONTMATTER] metadata 'install' is not acted on by clawkit",
        "warning: openclaw/gh-pr/SKILL.md:4: [FRONTMATTER] 'user-invocable' is not acted on by clawkit",
    ])
