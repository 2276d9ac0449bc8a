"""The semantics every hook promises (hookspecs.py), each with a test."""

from __future__ import annotations

import asyncio

import pytest

from clawkit import Decision, Outbound, SessionClassification, ToolResult, hookimpl
from clawkit.providers import ProviderError
from clawkit.testing import ScriptedReply, call


def echo(text: str) -> str:
    """Echo the text back."""
    return text


class Tools:
    @hookimpl
    def register_tools(self, register, agent):
        register(echo)


def events(agent, session_id, type):
    return [e["data"] for e in agent.store.events(session_id, type)]


# --- before_tool_call ------------------------------------------------------------------


def test_before_tool_call_every_impl_runs_and_rewrites_chain(make_agent):
    seen = []

    class Upper:
        @hookimpl
        def before_tool_call(self, ctx, call):
            seen.append(("upper", dict(call.arguments)))
            call.arguments["text"] = call.arguments["text"].upper()

    class Suffix:
        @hookimpl(trylast=True)
        def before_tool_call(self, ctx, call):
            seen.append(("suffix", dict(call.arguments)))
            call.arguments["text"] += "!"

    agent = make_agent([ScriptedReply.calls(call("echo", text="hi")), "done"], plugins=(Tools(), Upper(), Suffix()), tools=["echo"])
    agent.run("go")
    assert seen == [("upper", {"text": "hi"}), ("suffix", {"text": "HI"})]
    tool_msg = agent.provider.requests[1].messages[-1]
    assert tool_msg.content == "HI!"


def test_any_block_wins_over_allow_and_approval(make_agent):
    class Allow:
        @hookimpl(tryfirst=True)
        def before_tool_call(self, ctx, call):
            return Decision.allow()

    class Approve:
        @hookimpl
        def before_tool_call(self, ctx, call):
            return Decision.require_approval("needs a human")

    class Block:
        name = "blocker"

        @hookimpl(trylast=True)
        def before_tool_call(self, ctx, call):
            return Decision.block("not today")

    approvals = []
    agent = make_agent(
        [ScriptedReply.calls(call("echo", text="x")), "ok"],
        plugins=(Tools(), Allow(), Approve(), Block()),
        tools=["echo"],
        approver=lambda c, r, ctx: approvals.append(r) or True,
    )
    result = agent.run("go")
    assert approvals == []  # a block wins; nobody is asked
    assert result.tool_calls[0]["blocked"]
    assert "not today" in agent.provider.requests[1].messages[-1].content
    assert events(agent, result.session_id, "tool.blocked")[0]["reason"] == "not today"


def test_gate_exception_fails_closed_with_reason_to_model_and_event(make_agent):
    ran = []

    def danger() -> str:
        """Do something."""
        ran.append(1)
        return "did it"

    class T:
        @hookimpl
        def register_tools(self, register, agent):
            register(danger)

    class Broken:
        name = "brokengate"

        @hookimpl
        def before_tool_call(self, ctx, call):
            raise RuntimeError("policy db unreachable")

    agent = make_agent([ScriptedReply.calls(call("danger")), "ok"], plugins=(T(), Broken()), tools=["danger"])
    result = agent.run("go")
    assert ran == []
    told = agent.provider.requests[1].messages[-1].content
    assert "brokengate" in told and "policy db unreachable" in told and "failing closed" in told
    assert events(agent, result.session_id, "tool.blocked")
    assert events(agent, result.session_id, "hook.error")[0]["plugin"] == "brokengate"


def test_gate_returning_garbage_fails_closed(make_agent):
    class Weird:
        @hookimpl
        def before_tool_call(self, ctx, call):
            return "yes please"

    agent = make_agent([ScriptedReply.calls(call("echo", text="a")), "ok"], plugins=(Tools(), Weird()), tools=["echo"])
    result = agent.run("go")
    assert result.tool_calls[0]["blocked"]


def test_require_approval_asks_hook_then_approver_then_denies(make_agent):
    class Ask:
        @hookimpl
        def before_tool_call(self, ctx, call):
            return Decision.require_approval("risky")

    # no approver at all: denied
    agent = make_agent([ScriptedReply.calls(call("echo", text="a")), "ok"], plugins=(Tools(), Ask()), tools=["echo"])
    r = agent.run("go")
    assert r.tool_calls[0]["blocked"] and "non-interactive" in agent.provider.requests[1].messages[-1].content
    # an approver that says yes
    asked = []
    agent = make_agent(
        [ScriptedReply.calls(call("echo", text="a")), "ok"], plugins=(Tools(), Ask()), tools=["echo"],
        approver=lambda c, reason, ctx: asked.append(reason) or True,
    )
    r = agent.run("go")
    assert not r.tool_calls[0]["is_error"] and "risky" in asked[0]

    # a request_approval hook answers first; an async one is awaited
    class AutoDeny:
        @hookimpl
        async def request_approval(self, ctx, call, reason):
            await asyncio.sleep(0)
            return False

    agent = make_agent(
        [ScriptedReply.calls(call("echo", text="a")), "ok"], plugins=(Tools(), Ask(), AutoDeny()), tools=["echo"],
        approver=lambda *a: True,
    )
    assert agent.run("go").tool_calls[0]["blocked"]


def test_request_approval_exception_denies(make_agent):
    class Ask:
        @hookimpl
        def before_tool_call(self, ctx, call):
            return Decision.require_approval("risky")

    class Boom:
        @hookimpl
        def request_approval(self, ctx, call, reason):
            raise ValueError("approval service down")

    agent = make_agent([ScriptedReply.calls(call("echo", text="a")), "ok"], plugins=(Tools(), Ask(), Boom()), tools=["echo"], approver=lambda *a: True)
    assert agent.run("go").tool_calls[0]["blocked"]


# --- after_tool_call -------------------------------------------------------------------


def test_after_tool_call_chains_and_failure_is_isolated(make_agent):
    class Wrap:
        @hookimpl(tryfirst=True)
        def after_tool_call(self, ctx, call, result):
            return ToolResult(call_id=result.call_id, name=result.name, content=f"<{result.content}>")

    class Broken:
        @hookimpl
        def after_tool_call(self, ctx, call, result):
            raise RuntimeError("boom")

    class Mark:
        @hookimpl(trylast=True)
        async def after_tool_call(self, ctx, call, result):
            result.content += " [checked]"

    agent = make_agent([ScriptedReply.calls(call("echo", text="x")), "ok"], plugins=(Tools(), Wrap(), Broken(), Mark()), tools=["echo"])
    r = agent.run("go")
    assert agent.provider.requests[1].messages[-1].content == "<x> [checked]"
    assert events(agent, r.session_id, "hook.error")


# --- message_received / before_llm_call ------------------------------------------------


def test_message_received_rewrites_and_failure_is_isolated(make_agent):
    class Strip:
        @hookimpl
        def message_received(self, ctx, message):
            return message.content.replace("/think", "").strip()

    class Broken:
        @hookimpl
        def message_received(self, ctx, message):
            raise KeyError("x")

    agent = make_agent(["ok"], plugins=(Strip(), Broken()))
    r = agent.run("/think hello")
    assert agent.provider.requests[0].messages[-1].content == "hello"
    assert r.reply == "ok"
    assert agent.store.messages(r.session_id)[0].metadata["original"] == "/think hello"


@pytest.mark.narrow("one probe plugin's message_received answer; the directives plugin answers its own commands first")
def test_message_received_can_answer_itself(make_agent):
    class Status:
        @hookimpl
        def message_received(self, ctx, message):
            if message.content == "/status":
                ctx.state["reply"] = "all quiet"

    agent = make_agent([], plugins=(Status(),))
    assert agent.run("/status").reply == "all quiet"
    assert agent.provider.requests == []


@pytest.mark.narrow("compares the exact request a probe rewrote; the full install's contributors add prompt sections")
def test_before_llm_call_modifies_or_replaces_request(make_agent):
    class Extra:
        @hookimpl
        def before_llm_call(self, ctx, request):
            request.system += "\nBe brief."
            request.reasoning_effort = "high"

    class Replace:
        @hookimpl(trylast=True)
        def before_llm_call(self, ctx, request):
            return request.model_copy(update={"model": "other/model"})

    agent = make_agent(["ok"], plugins=(Extra(), Replace()), instructions="You help.")
    agent.run("hi")
    req = agent.provider.requests[0]
    assert req.system == "You help.\nBe brief." and req.reasoning_effort == "high" and req.model == "other/model"


def test_llm_call_failed_can_fix_and_retry_once(make_agent):
    class Compact:
        @hookimpl
        def llm_call_failed(self, ctx, request, error):
            if error.context_overflow:
                request.messages = request.messages[-1:]
                return True

    overflow = ProviderError("too long", context_overflow=True)
    agent = make_agent([overflow, "fits now"], plugins=(Compact(),))
    r = agent.run("hi")
    assert r.reply == "fits now"
    assert events(agent, r.session_id, "llm.retry")
    # at most 3 retries of one model call (issue 27 item 7: a fallback chain) — changed deliberately from 1
    agent2 = make_agent([overflow] * 3 + ["third retry"], plugins=(Compact(),))
    assert agent2.run("hi").reply == "third retry"
    agent3 = make_agent([overflow] * 4 + ["never"], plugins=(Compact(),))
    with pytest.raises(ProviderError):
        agent3.run("hi")


# --- message_sending -------------------------------------------------------------------


def test_message_sending_rewrites_and_cancels_at_each_delivery_point(make_agent):
    kinds = []

    class Filter:
        @hookimpl
        def message_sending(self, ctx, outbound):
            kinds.append(outbound.kind)
            if outbound.kind == "stream_chunk" and outbound.content == "cr":
                outbound.cancel()
            if outbound.kind == "tool_result_display":
                outbound.cancelled = False  # show tool results (what /verbose does)
                return "result: " + outbound.content
            if outbound.kind == "final_reply":
                return outbound.content.replace("secret", "[redacted]")

    delivered: list[Outbound] = []
    provider_script = [ScriptedReply.calls(call("echo", text="t")), "a secret b"]
    agent = make_agent(provider_script, plugins=(Tools(), Filter()), tools=["echo"])
    agent.provider.chunk_size = 2
    r = agent.run("go", deliver=delivered.append)
    assert {"stream_chunk", "final_reply", "tool_call_display", "tool_result_display"} <= set(kinds)
    shown = [o for o in delivered if o.kind == "tool_result_display"]
    assert shown and shown[0].content == "result: t"
    assert not any(o.kind == "tool_call_display" for o in delivered)  # quiet by default
    assert r.reply == "a [redacted] b"
    chunks = "".join(o.content for o in delivered if o.kind == "stream_chunk")
    assert chunks == "a seet b"  # the cancelled chunk was never delivered

    class Routed:
        @hookimpl
        def message_sending(self, ctx, outbound):
            if outbound.kind == "routed":
                outbound.content = outbound.content.upper()

    agent = make_agent(["x"], plugins=(Routed(),))
    session = agent.session()
    from clawkit.context import TurnContext

    ctx = TurnContext(agent.config, session, agent.hooks, agent.tools)
    out = asyncio.run(agent.send(ctx, "routed", "to the sub-agent", delivered.append))
    assert out.content == "TO THE SUB-AGENT" and delivered[-1] is out


def test_message_sending_failure_is_isolated(make_agent):
    class Broken:
        @hookimpl
        def message_sending(self, ctx, outbound):
            raise RuntimeError("x")

    delivered = []
    agent = make_agent(["hello"], plugins=(Broken(),))
    assert agent.run("hi", deliver=delivered.append).reply == "hello"
    assert delivered


# --- classify_session / on_event / register_* -----------------------------------------


def test_classify_session_first_result_wins_persisted_and_evented(make_agent):
    class Pass:
        @hookimpl(tryfirst=True)
        def classify_session(self, session, messages):
            return None

    class Classify:
        @hookimpl
        async def classify_session(self, session, messages):
            assert messages[0].content == "my server is hacked"
            return SessionClassification(label="incident", topic="ops", domain=["security"])

    class Late:
        @hookimpl(trylast=True)
        def classify_session(self, session, messages):
            raise AssertionError("never reached: the first result wins")

    agent = make_agent(["ok", "ok"], plugins=(Pass(), Classify(), Late()))
    r = agent.run("my server is hacked")
    assert agent.store.load_classification(r.session_id).domain == ["security"]
    assert events(agent, r.session_id, "session.classified")[0]["topic"] == "ops"
    agent.run("more", session_id=r.session_id)
    assert len(events(agent, r.session_id, "session.classified")) == 1  # not re-run without reclassify


def test_classify_session_failure_leaves_session_unclassified(make_agent):
    class Broken:
        @hookimpl
        def classify_session(self, session, messages):
            raise ValueError("bad json")

    agent = make_agent(["ok"], plugins=(Broken(),))
    r = agent.run("hi")
    assert r.reply == "ok" and agent.store.load_classification(r.session_id) is None


def test_on_event_observes_and_its_failure_is_isolated(make_agent):
    seen = []

    class Watch:
        @hookimpl
        def on_event(self, event):
            seen.append(event.type)

    class Broken:
        @hookimpl
        def on_event(self, event):
            raise RuntimeError("observer down")

    agent = make_agent(["ok"], plugins=(Watch(), Broken()))
    assert agent.run("hi").reply == "ok"
    assert "session.start" in seen and "turn.end" in seen
    assert "hook.error" not in seen  # a failing observer never emits more events


def test_register_tools_failure_is_isolated(make_agent):
    class Broken:
        @hookimpl
        def register_tools(self, register, agent):
            raise ImportError("optional dependency missing")

    agent = make_agent([ScriptedReply.calls(call("echo", text="x")), "ok"], plugins=(Tools(), Broken()), tools=["echo"])
    assert not agent.run("go").tool_calls[0]["is_error"]


def test_register_providers_and_provider_selection(make_agent, workspace):
    from clawkit.config import validate_agent
    from clawkit.loop import Agent
    from clawkit.plugins import get_plugin_manager
    from clawkit.testing import ScriptedProvider

    class Mine:
        @hookimpl
        def register_providers(self, register):
            register("mine", lambda model_config: ScriptedProvider([f"from {model_config.name}"]))

    # narrow: the kernel's provider registry with one probe provider, no installed ones
    pm = get_plugin_manager(extra=(Mine(),), load_entry_points=False)
    cfg = validate_agent({"name": "a", "model": {"name": "m1", "provider": "mine"}, "workspace": str(workspace)}, "<t>", {})
    assert Agent(cfg, pm=pm).run("hi").reply == "from m1"
    cfg2 = validate_agent({"name": "a", "model": {"name": "m1", "provider": "nope"}, "workspace": str(workspace)}, "<t>", {})
    with pytest.raises(ProviderError, match="no model provider named 'nope'"):
        Agent(cfg2, pm=pm).run("hi")


@pytest.mark.narrow("compares the exact system prompt two probe contributors build, without the installed ones")
def test_register_prompt_contributor_builds_system_prompt(make_agent):
    from clawkit.prompt import StaticContributor

    class Contrib:
        @hookimpl
        def register_prompt_contributor(self, register, agent):
            register(StaticContributor("rules", "Never guess.", heading="Rules", priority=10))
            register(StaticContributor("sec", "Think about threats.", tags=["domain:security"]))

    agent = make_agent(["ok"], plugins=(Contrib(),), instructions="Be kind.")
    agent.run("hi")
    # the agent's instructions never vanish: the kernel adds them when no plugin registers "instructions"
    assert agent.provider.requests[0].system == "Be kind.\n\n## Rules\nNever guess."

    class OnlyTagged:  # the plugin author's case: one tagged contributor that does not match
        @hookimpl
        def register_prompt_contributor(self, register, agent):
            register(StaticContributor("sec", "Think about threats.", tags=["domain:security"]))

    tagged = make_agent(["ok"], plugins=(OnlyTagged(),), instructions="Be kind.")
    tagged.run("hi")
    assert tagged.provider.requests[0].system == "Be kind."


def test_register_embedding_provider_is_declared():
    from clawkit.plugins import get_plugin_manager

    got = {}

    class Emb:
        @hookimpl
        def register_embedding_provider(self, register):
            register("fake-local", lambda cfg: None)

    # narrow: the embedding hook's own semantics with one probe plugin
    pm = get_plugin_manager(extra=(Emb(),), load_entry_points=False)
    pm.hook.register_embedding_provider(register=lambda n, f: got.setdefault(n, f))
    assert "fake-local" in got


def test_register_commands_adds_subcommands_and_failure_is_isolated(capsys):
    from clawkit.cli import build_parser
    from clawkit.plugins import get_plugin_manager

    class Cmd:
        @hookimpl
        def register_commands(self, cli):
            p = cli.command("greet", help="say hi")
            p.add_argument("who")
            p.set_defaults(handler=lambda args: print(f"hi {args.who}") or 0)

    class Broken:
        name = "brokencmd"

        @hookimpl
        def register_commands(self, cli):
            raise RuntimeError("cannot build parser")

    # narrow: how the parser treats one broken command plugin, without the installed commands
    pm = get_plugin_manager(extra=(Cmd(), Broken()), load_entry_points=False)
    parser = build_parser(pm)
    args = parser.parse_args(["greet", "ann"])
    assert args.handler(args) == 0
    captured = capsys.readouterr()
    assert "hi ann" in captured.out
    assert "plugin brokencmd failed to add its commands" in captured.err
    args = parser.parse_args(["sessions", "list"])  # the kernel's own commands still work
    assert args.handler


def test_async_on_event_and_register_hooks_are_awaited(make_agent):
    seen = []

    class AsyncWatch:
        @hookimpl
        async def on_event(self, event):
            await asyncio.sleep(0)
            seen.append(event.type)

        @hookimpl
        async def register_tools(self, register, agent):
            register(echo)

    agent = make_agent([ScriptedReply.calls(call("echo", text="x")), "ok"], plugins=(AsyncWatch(),), tools=["echo"])
    r = agent.run("go")
    assert not r.tool_calls[0]["is_error"]  # the tool registered by an async hook exists
    assert "turn.end" in seen or "session.start" in seen


def test_on_events_delivers_only_the_declared_types(make_agent):
    from clawkit import on_events

    seen: dict[str, list[str]] = {"all": [], "some": []}

    class All:
        @hookimpl
        def on_event(self, event):
            seen["all"].append(event.type)

    class Some:
        @hookimpl
        @on_events("turn.end", "llm.*")
        def on_event(self, event):
            seen["some"].append(event.type)

    agent = make_agent(["hello"], plugins=(All(), Some()))
    agent.run("hi")
    assert "session.start" in seen["all"] and "turn.end" in seen["all"]
    assert seen["some"] == [t for t in seen["all"] if t == "turn.end" or t.startswith("llm.")]
    assert "llm.call" in seen["some"]
