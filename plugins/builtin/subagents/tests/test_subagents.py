"""Sub-agents in process (every installed plugin, a provider answering by model name): approvals
asked through the parent's approver, vetoes from before_tool_call and message_sending, the
parallel limit, attenuated grants, bad child files and bad tasks, events and the tree printer."""

from __future__ import annotations

import asyncio
import time

import pytest

from clawkit import hookimpl
from clawkit.types import Decision, LlmResponse, ToolCall, Usage


class ByName:
    """A provider plugin: ``scripts[model]`` is a list of replies (str text, or list of (tool, args) calls);
    ``delay[model]`` seconds before answering; ``log`` keeps (model, start, end, request)."""

    name = "test-models"

    def __init__(self, **scripts):
        self.scripts = {k: list(v) for k, v in scripts.items()}
        self.delay: dict[str, float] = {}
        self.log: list[tuple[str, float, float, object]] = []

    @hookimpl
    def register_providers(self, register):
        plugin = self

        class Provider:
            def __init__(self, config):
                self.model = config.name

            async def complete(self, request, on_text=None):
                start = time.monotonic()
                await asyncio.sleep(plugin.delay.get(self.model, 0))
                item = plugin.scripts[self.model].pop(0)
                plugin.log.append((self.model, start, time.monotonic(), request))
                usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cost=0.001)
                if isinstance(item, list):
                    return LlmResponse(tool_calls=[ToolCall(name=n, arguments=a) for n, a in item], usage=usage)
                return LlmResponse(content=item, usage=usage)

        register("by-name", Provider)

    def requests(self, model):
        return [r for m, _, _, r in self.log if m == model]


def model(name):
    return {"name": name, "provider": "by-name"}


def child(name, tools=(), **extra):
    return {"name": name, "model": model(name), "tools": list(tools), **extra}


@pytest.fixture
def tree(make_agent):
    def build(models, subagents, tools=("read_file", "shell_exec", "write_file"), plugins=(), approver=None, **config):
        return make_agent(plugins=(models, *plugins), load_entry_points=True, provider="config", model=model("lead"),
                          tools=list(tools), subagents=subagents, approver=approver, **config)

    return build


def test_a_childs_approval_is_asked_through_the_parents_approver_naming_the_child(tree):
    models = ByName(lead=[[("agent_writer", {"task": "write a.txt"})], "done"],
                    writer=[[("write_file", {"path": "a.txt", "content": "x"})], "written"])
    asked = []

    def approver(call, reason, ctx):
        asked.append((call.name, reason, ctx.agent.name))
        return True

    agent = tree(models, {"writer": {"agent": child("writer", ["write_file"])}}, approver=approver)
    result = agent.run("please write")
    assert result.reply == "done"
    assert asked and asked[0][0] == "write_file" and asked[0][1].startswith("sub-agent 'writer' asks:")
    assert asked[0][2] == "writer"


def test_non_interactive_denies_a_childs_approval(tree, workspace):
    models = ByName(lead=[[("agent_writer", {"task": "write a.txt"})], "done"],
                    writer=[[("write_file", {"path": "a.txt", "content": "x"})], "could not write"])
    agent = tree(models, {"writer": {"agent": child("writer", ["write_file"])}})
    agent.run("please write")
    denied = [m for m in models.requests("writer")[1].messages if m.role == "tool"][-1].content
    assert "not approved" in denied and "non-interactive" in denied
    assert not (workspace / "a.txt").exists()


class VetoSpawn:
    name = "veto-spawn"

    @hookimpl
    def before_tool_call(self, ctx, call):
        if call.name.startswith("agent_") and "secret" in call.arguments.get("task", ""):
            return Decision.block("no secrets for sub-agents")
        return None


class VetoDelivery:
    name = "veto-delivery"

    def __init__(self):
        self.seen = []

    @hookimpl
    def message_sending(self, ctx, outbound):
        if outbound.kind == "routed":
            self.seen.append((outbound.metadata.get("to"), outbound.content))
            if outbound.metadata.get("to") == "blocked":
                outbound.cancel()
            elif outbound.metadata.get("from_agent") == "rewritten":
                return outbound.content.upper()
        return None


def test_plugins_veto_a_spawn_and_see_both_delivery_points(tree):
    models = ByName(lead=[[("agent_helper", {"task": "the secret plan"}), ("agent_blocked", {"task": "anything"}),
                           ("agent_rewritten", {"task": "say hi"})], "done"],
                    rewritten=["hi there"])
    watcher = VetoDelivery()
    agent = tree(models, {"helper": {"agent": child("helper")}, "blocked": {"agent": child("blocked")},
                          "rewritten": {"agent": child("rewritten")}}, plugins=(VetoSpawn(), watcher),
                 # a sibling's result may enter the context first (untrusted content): agent_* calls are then asked for
                 approver=lambda call, reason, ctx: True)
    result = agent.run("go")
    calls = {c["name"]: c for c in result.tool_calls}
    assert calls["agent_helper"]["blocked"]
    tool_msgs = {m.tool_result.name: m.content for m in models.requests("lead")[1].messages if m.role == "tool"}
    assert "no secrets for sub-agents" in tool_msgs["agent_helper"]
    assert "vetoed" in tool_msgs["agent_blocked"] and not models.requests("blocked")
    assert "HI THERE" in tool_msgs["agent_rewritten"]
    # the task on its way to the child (as the translation device's ClawDense dispatch record), the answer back
    assert any(to == "rewritten" and '"say hi"' in content for to, content in watcher.seen)
    assert ("test-agent", "hi there") in watcher.seen
    ends = {e["data"]["agent"]: e["data"]["status"] for e in agent.store.events(result.session_id, "subagent.end")}
    assert ends == {"blocked": "vetoed", "rewritten": "done"}


def test_at_most_max_parallel_subagents_run_at_once(tree):
    names = ["a", "b", "c"]
    models = ByName(lead=[[(f"agent_{n}", {"task": "work"}) for n in names], "done"], **{n: ["ok"] for n in names})
    models.delay.update({n: 0.2 for n in names})
    agent = tree(models, {n: {"agent": child(n)} for n in names}, limits={"max_parallel_subagents": 2})
    agent.run("go")
    spans = sorted((s, e) for m, s, e, _ in models.log if m in names)
    # the most model calls in flight at one moment (a sweep over starts and ends; counting the spans that
    # meet one span would count a and c both meeting b, though a had ended before c began)
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = at_most = 0
    for _, step in edges:
        running += step
        at_most = max(at_most, running)
    assert at_most == 2 and len(spans) == 3  # two ran together, the third waited for a slot


def test_grants_are_never_wider_than_the_parents(tree, workspace):
    models = ByName(lead=[[("agent_reader", {"task": "read"})], "done"], reader=["read it"])
    parent_grant = {"tools": ["read_file"], "paths": ["/srv/data/**"]}
    reader = child("reader", ["read_file"], plugins={"policy": {"grants": [
        {"tools": ["read_file"], "paths": ["/srv/data/reports/**"]},   # inside the parent's: kept
        {"tools": ["read_file"], "paths": ["/etc/**"]},                # wider: dropped
    ]}})
    agent = tree(models, {"reader": {"agent": reader}}, plugin_config={"policy": {"grants": [parent_grant]}})
    result = agent.run("go")
    prov = [m for m in agent.store.messages(result.session_id) if m.role == "tool"][0].tool_result.metadata["provenance"]
    assert [g["paths"] for g in prov["scope"]["grants"]] == [["/srv/data/reports/**"]]
    assert prov["scope"]["tools"] == ["read_file"] and prov["scope"]["depth"] == 1


def test_a_bad_child_file_and_a_blank_task_are_error_results(tree, workspace):
    # a file broken at the parent's start stops the start (test_lead_child_checked_at_start.py); one
    # broken afterwards (edited while a chat or a server runs) is checked again at spawn
    (workspace / "broken.yaml").write_text("name: broken\nmodel: x\ntools: [read_file]\n")
    models = ByName(lead=[[("agent_broken", {"task": "hi"}), ("agent_ok", {"task": "   "})], "done"])
    agent = tree(models, {"broken": {"agent": "broken.yaml"}, "ok": {"agent": child("ok")}})
    agent.config._source = workspace / "lead.yaml"
    (workspace / "broken.yaml").write_text("name: broken\nmodel: x\ntools: [read_file]\nbogus_key: 1\n")
    result = agent.run("go")
    assert result.reply == "done" and all(c["is_error"] for c in result.tool_calls)
    msgs = {m.tool_result.name: m.content for m in models.requests("lead")[1].messages if m.role == "tool"}
    assert "broken.yaml:4: bogus_key: unknown key" in msgs["agent_broken"]
    assert "ok" not in models.scripts or not models.requests("ok")
    assert "task" in msgs["agent_ok"]


def test_tree_printer_and_usage_roll_up(tree, capsys):
    from clawkit.commands.tree import print_tree

    models = ByName(lead=[[("agent_kid", {"task": "t"})], "done"], kid=["kid answer"])
    agent = tree(models, {"kid": {"agent": child("kid")}})
    result = agent.run("go")
    assert result.usage.total_tokens == 45 and abs(result.usage.cost - 0.003) < 1e-9  # 2 lead calls + 1 kid call
    print_tree(agent.store, result.session_id)
    out = capsys.readouterr().out.splitlines()
    assert out[1].strip().startswith("test-agent") and "tokens 45" in out[1] and "[done]" in out[1]
    assert "via agent_kid (ok)" in out[2]
    assert "kid" in out[3] and "tokens 15" in out[3] and out[3].startswith("     ")


class LedgerPeek:
    """Before each of the lead's model calls, the audit decisions committed so far, read by another
    connection (what a crash at that moment would leave)."""

    name = "ledger-peek"

    def __init__(self):
        self.seen: list[list[tuple[str, str]]] = []
        self.runs: list[list[tuple[str, str]]] = []

    @hookimpl
    def before_llm_call(self, ctx, request):
        import sqlite3

        if ctx.agent.name != "test-agent":
            return None
        conn = sqlite3.connect(str(ctx.session.store.path))
        try:
            self.runs.append(conn.execute("SELECT agent, status FROM runs WHERE parent_run_id IS NOT NULL").fetchall())
            self.seen.append(conn.execute("SELECT COALESCE(tool, ''), decision FROM policy_audit ORDER BY seq").fetchall())
        except sqlite3.OperationalError:  # no table yet: nothing recorded
            self.seen.append([])
        finally:
            conn.close()
        return None


def test_a_childs_records_are_committed_before_its_answer_reaches_the_parents_model(tree, workspace):
    # what a crash at that moment leaves on disk: the child's audit records (no longer committed by the child's
    # own turn end, but by the parent's after_tool_call for the spawn) and its finished run
    (workspace / "notes.md").write_text("CVE-2026-0001")
    models = ByName(lead=[[("agent_reader", {"task": "read notes.md"})], "done"],
                    reader=[[("read_file", {"path": "notes.md"})], "notes say CVE-2026-0001"])
    peek = LedgerPeek()
    agent = tree(models, {"reader": {"agent": child("reader", ["read_file"])}}, plugins=(peek,))
    assert agent.run("go").reply == "done"
    assert len(peek.seen) == 2
    committed = peek.seen[1]
    decisions = [d for _, d in committed]
    assert "subagent.start" in decisions and "subagent.end" in decisions
    assert any(tool == "read_file" for tool, _ in committed)  # the child's own call, executed and recorded
    assert any(tool == "agent_reader" for tool, _ in committed)  # the spawn's gate decision and execution
    assert peek.runs[1] == [("reader", "done")]  # the child's run end (its turn end's commit)
