"""Plugins meet through hooks and kernel registries, never by importing each other:
approvers by name (register_approvers), skills offered to routers (list_skills),
embeddings through register_embedding_provider — and any builtin can be uninstalled
(CLAWKIT_LOAD_PLUGINS without it) while the others keep working."""

from __future__ import annotations

import asyncio
import ast
import textwrap
from pathlib import Path

import pytest

from clawkit import hookimpl
from clawkit.testing import ScriptedReply, call
from clawkit.testing.server import Reply
from clawkit.types import Decision

ROOT = Path(__file__).resolve().parents[1]
BUILTINS = sorted(p.name for p in (ROOT / "plugins" / "builtin").iterdir() if (p / "pyproject.toml").exists())


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize("where", ["kernel"] + BUILTINS)
def test_no_plugin_imports_another_and_the_kernel_imports_none(where):
    base = ROOT / "kernel" / "src" if where == "kernel" else ROOT / "plugins" / "builtin" / where / "src"
    own = "clawkit" if where == "kernel" else f"clawkit_{where}"
    for path in base.rglob("*.py"):
        others = {m for m in _imported_modules(path) if m.startswith("clawkit_") and m != own}
        assert not others, f"{path.relative_to(ROOT)} imports {sorted(others)}"
    import re

    for path in base.rglob("*.py"):
        looked_up = set(re.findall(r"sys\.modules\.get\([\"'](clawkit_\w+)", path.read_text(encoding="utf-8")))
        assert not {m for m in looked_up if m != own}, f"{path.relative_to(ROOT)} looks up {sorted(looked_up)}"


class Gate:
    name = "needs-approval"

    @hookimpl
    def before_tool_call(self, ctx, call):
        return Decision(action="require_approval", reason="test gate")


class Panel:
    """A front-end's approver, registered by name: the agent picks it without importing us."""

    name = "panel"

    def __init__(self):
        self.asked = []

    @hookimpl
    def register_approvers(self, register):
        def approve(call, reason, ctx):
            self.asked.append((call.name, reason))
            return call.arguments.get("ok") is True

        register("panel", approve)


def test_approver_is_chosen_by_name_from_the_registry(make_agent):
    def poke(ok: bool) -> str:
        """Poke."""
        return "poked"

    class Tools:
        name = "poke-tools"

        @hookimpl
        def register_tools(self, register, agent):
            register(poke)

    panel = Panel()
    agent = make_agent([ScriptedReply.calls(call("poke", ok=True), call("poke", ok=False)), "done"],
                       plugins=(Tools(), Gate(), panel), tools=["poke"], approver="panel")
    result = agent.run("go")
    assert [c["is_error"] for c in result.tool_calls] == [False, True]
    assert panel.asked == [("poke", "needs-approval: test gate")] * 2
    from clawkit.approvals import collect_approvers

    assert set(collect_approvers(agent.hooks)) >= {"terminal", "deny", "panel"}
    with pytest.raises(Exception, match="unknown approver 'nope'"):
        make_agent([], approver="nope")


def test_policy_replaces_the_kernels_terminal_approver(make_agent):
    import clawkit_policy

    from clawkit.approvals import collect_approvers, terminal_approver

    plain = make_agent([], narrow="the kernel's own terminal approver, with no policy plugin loaded")
    assert collect_approvers(plain.hooks)["terminal"] is terminal_approver
    with_policy = make_agent([], plugins=(clawkit_policy,))
    assert collect_approvers(with_policy.hooks)["terminal"] is clawkit_policy.terminal_approver


class Weather:
    """A skill provider other than clawkit-skills: the router sees it through list_skills."""

    name = "weather-skills"

    class Skill:
        name, description, trigger, keywords, weight, lexicon = "forecast", "Weather forecasts", "", ("umbrella",), 1.0, None

    @hookimpl
    def list_skills(self, ctx):
        return [self.Skill()]


def test_translation_routes_among_skills_listed_through_the_hook(make_agent):
    import clawkit_translation

    agent = make_agent(["ok"], plugins=(clawkit_translation, Weather()))
    r = agent.run("do I need an umbrella tomorrow?")
    assert agent.session(r.session_id).get("translation.route")["skills"] == ["forecast"]


def test_memory_embeds_remotely_only_through_a_registered_provider(tmp_path):
    from clawkit_memory.config import EmbeddingConfig
    from clawkit_memory.embeddings import EmbeddingError, resolve_provider

    remote = EmbeddingConfig(model="openai/text-embedding-3-small")
    with pytest.raises(EmbeddingError, match="install clawkit-litellm"):
        resolve_provider(remote, {})
    from clawkit.hooks import HookRunner
    from clawkit.plugins import get_plugin_manager
    from clawkit_memory.embeddings import collect_providers

    import clawkit_litellm

    # narrow: which embedding provider litellm alone registers
    found = collect_providers(HookRunner(get_plugin_manager(extra=(clawkit_litellm,), load_entry_points=False)))
    # auto: the remote provider first, the local model as its fallback (issue 27 item 10)
    assert type(resolve_provider(remote, found).remote).__name__ == "LiteLLMEmbeddings"


# --- uninstall any builtin ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    from clawkit.testing.server import ModelServer

    with ModelServer() as ms:
        yield ms


@pytest.mark.parametrize("removed", BUILTINS)
def test_any_builtin_can_be_uninstalled(removed, server, tmp_path, monkeypatch):
    from clawkit.runtime import open_agent

    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", ",".join(f"clawkit-{b}" for b in BUILTINS if b != removed))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    server.reset()
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    tools = "[read_file, list_dir]" if removed != "tools" else "[]"
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: partial
        model: {{name: openai/test, api_base: "{server.url}", api_key: x, max_retries: 0, timeout: 20}}
        instructions: Answer from the notes.
        tools: {tools}
        """))
    if removed == "tools":
        server.script("No tools here.")
    else:
        server.script(Reply.tool_calls([("read_file", {"path": "notes.txt"})]), "It is 42.")
    agent = open_agent(tmp_path / "agent.yaml")
    try:
        loaded = {n for n, _ in agent.pm.list_name_plugin()}
        assert removed not in loaded
        result = asyncio.run(agent.turn("What is the answer?"))
        assert result.reply in ("It is 42.", "No tools here.")
        if removed != "tools":
            tool_msg = [m for m in server.requests[-1].messages if m["role"] == "tool"][0]
            assert "42" in tool_msg["content"]
        assert "Answer from the notes." in next(m["content"] for m in server.requests[0].messages if m["role"] == "system")
    finally:
        agent.close()
