"""Framework overhead per agent turn: clawkit against its peers, one workload, one run.

Run (clawkit only, peers skipped with a note):
    .venv/bin/python tests/benchmarks/bench_turn.py
With the peers installed (see tests/benchmarks/README.md):
    /tmp/benchvenv/bin/python tests/benchmarks/bench_turn.py [--profile] [--no-per-plugin]

The workload, the same for every framework: one user message -> the model asks for one
tool call, add(a=2, b=3) -> the tool runs -> its result goes back to the model -> the
model answers "The sum is 5.". Every model is an in-process fake that is a function of
the request (tool call when the last message is the user's, the final text when it is
the tool's result), so nothing but framework code is timed. Every measured turn is
checked: the tool ran exactly once and the final answer is right — a broken run aborts
the benchmark instead of producing a figure.

clawkit variants:
* all plugins: every installed ``clawkit`` entry point, default config, plus the tool
  plugin; persistence ON (a real SQLite file, WAL) with a new session per turn (the
  reference figure), chat: the same session turn after turn (history grows; a new session
  every 50 turns, so history reaches 200 messages), and persistence OFF
  (``Agent(persist=False)``: in-memory SQLite), new session per turn.
* kernel only (``get_plugin_manager(load_entry_points=False)``), persistence on and off.
* per plugin (``--per-plugin``, default on): the kernel plus one plugin, persistence on;
  "added" is its difference to the kernel-only figure measured in the same run.

Peers: simonw/llm (a fake ``llm.Model`` with ``supports_tools``, ``model.chain``),
OpenAI Agents SDK (a fake ``Model`` subclass; tracing disabled — its exporter needs the
network), smolagents (``ToolCallingAgent``; the final answer is its ``final_answer``
tool call), LangGraph (``create_react_agent``; a fake chat model whose ``bind_tools``
returns itself; sync ``invoke`` and async ``ainvoke``), pydantic-ai (``FunctionModel``).
None of the peers persists anything.

Measurement: warm-up, then ``--rounds`` rounds; each round runs one batch of ``n`` turns
per variant (``n`` calibrated so a batch takes ~``--batch-seconds``), variants
interleaved so machine load hits them alike. Figures: median and p90 of the per-turn
wall times of all batches, in microseconds; ratios against clawkit in the same run.
``--profile`` adds a cProfile of clawkit's reference turn with its top costs (file:line);
``--profile-plugin NAME`` profiles "kernel + NAME" and lists that plugin's own costs;
``--hook-times`` adds, per plugin row, the median time per turn spent inside its hooks;
``--plugin-rows a+b`` adds a row with both plugins; ``--readme-chars N`` puts a project file
of N characters in every workspace.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import cProfile
import gc
import json
import logging
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

warnings.filterwarnings("ignore")

PROMPT = "What is 2 + 3?"
ANSWER = "The sum is 5."
SYSTEM = "You are a calculator. Use the add tool."
REPO = Path(__file__).resolve().parents[2]
CHAT_TURNS = 50  # a chat variant starts a new session after this many turns (history up to 200 messages)


class ToolRuns:
    """Counts executions of the add tool, across every framework."""

    count = 0


def add_impl(a: int, b: int) -> int:
    ToolRuns.count += 1
    return a + b


def answer_for(result: Any) -> str:
    return f"The sum is {str(result).strip()}."


class BrokenRun(AssertionError):
    """A framework did not perform the workload (no tool call, wrong answer, hook error)."""


def check(cond: bool, what: str) -> None:
    if not cond:
        raise BrokenRun(what)


# --- harness -------------------------------------------------------------------------------


class Variant:
    """One framework configuration: ``turn()`` does the workload once and returns the reply."""

    name = ""
    group = "peer"  # "clawkit", "plugin" or "peer"
    is_async = True
    note = ""

    def setup(self) -> None:  # build agents (not timed)
        pass

    def verify(self) -> None:  # one turn, inspected in depth (not timed)
        pass

    def start_batch(self) -> None:  # per batch (chat variants start a new session)
        pass

    def close(self) -> None:
        pass


CPU: dict[str, list[float]] = {}
SETTLE = [0.0]  # seconds of quiet after each measured batch (--settle)  # per variant: [process CPU seconds (all threads), turns]
README_CHARS = [0]  # --readme-chars
HOOK: dict[str, list[float]] = {}  # per plugin row (--hook-times): seconds inside its hooks, per turn


async def run_batch(v: Variant, n: int) -> list[float]:
    """``n`` turns; per-turn seconds. Raises BrokenRun if any turn did not do the workload."""
    v.start_batch()
    cpu0 = time.process_time()
    samples: list[float] = []
    before = ToolRuns.count
    perf = time.perf_counter
    bad: list[str] = []
    acc = getattr(v, "hook_acc", None)
    if acc is not None:  # --hook-times: the time spent inside the plugin's own hooks, per turn
        hooks = HOOK.setdefault(v.name, [])
        for _ in range(n):
            h0 = acc[0]
            t0 = perf()
            out = await v.turn()
            samples.append(perf() - t0)
            hooks.append(acc[0] - h0)
            if out != ANSWER:
                bad.append(repr(out))
    elif v.is_async:
        for _ in range(n):
            t0 = perf()
            out = await v.turn()
            samples.append(perf() - t0)
            if out != ANSWER:
                bad.append(repr(out))
    else:
        for _ in range(n):
            t0 = perf()
            out = v.turn()
            samples.append(perf() - t0)
            if out != ANSWER:
                bad.append(repr(out))
    if SETTLE[0]:
        # background work this batch started (memory indexing its episodes after a quiet moment, the
        # audit writer's sync) runs now: charged to this variant's CPU, kept out of the next batch
        await asyncio.sleep(SETTLE[0])
    acc = CPU.setdefault(v.name, [0.0, 0])
    acc[0] += time.process_time() - cpu0
    acc[1] += n
    check(not bad, f"{v.name}: {len(bad)} of {n} turns answered wrongly, e.g. {bad[:1]}")
    check(ToolRuns.count - before == n, f"{v.name}: the tool ran {ToolRuns.count - before} times in {n} turns")
    return samples


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


# --- clawkit -------------------------------------------------------------------------------


TEMP_DIRS: list[Path] = []


@atexit.register  # registered before any plugin is imported, so it runs after their exit handlers
def _remove_temp_dirs() -> None:
    for d in TEMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)


class HookErrors(logging.Handler):
    """Plugin failures the kernel isolated (``clawkit.hooks`` warnings): a broken run."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


HOOK_ERRORS = HookErrors()


def clawkit_plugins() -> list[tuple[str, str]]:
    """(entry-point name, distribution) of every installed clawkit plugin."""
    seen = {}
    for ep in metadata.entry_points(group="clawkit"):
        seen.setdefault(ep.name, ep.dist.name if ep.dist else "?")
    return sorted(seen.items())


class _Timed(list):
    timed = True


class ClawkitVariant(Variant):
    group = "clawkit"

    def __init__(self, name: str, *, plugins: str | list[str], persist: bool, chat: bool = False, group: str = "clawkit"):
        self.name = name
        self.group = group
        self.plugins = plugins  # "all", "none" or the entry-point names to load
        self.persist = persist
        self.chat = chat
        self.session_id: str | None = None
        self.in_session = 0
        self.note = ("SQLite file (WAL)" if persist else "in-memory SQLite") + (
            f", chats of {CHAT_TURNS} turns in one session" if chat else ", new session per turn")

    def setup(self) -> None:
        from clawkit import hookimpl
        from clawkit.config import collect_sections, validate_agent
        from clawkit.hooks import HookRunner
        from clawkit.loop import Agent
        from clawkit.plugins import get_plugin_manager
        from clawkit.types import LlmResponse, ToolCall, Usage

        class FakeModel:
            """A clawkit Provider: a function of the request, so it repeats forever."""

            async def complete(self, request, on_text=None):
                # the tool result this turn produced, if any: plugins may put a note after it (the
                # healing plugin's focus booster goes into the request's final user message)
                last = next((m for m in reversed(request.messages) if m.role == "tool"
                             or (m.role == "user" and PROMPT in str(m.content))), request.messages[-1])
                if last.role == "tool":
                    text = answer_for(last.content)
                    if on_text is not None:
                        await on_text(text)
                    return LlmResponse(content=text, usage=Usage(prompt_tokens=30, completion_tokens=5, total_tokens=35),
                                       finish_reason="stop", model="fake")
                return LlmResponse(content="", tool_calls=[ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})],
                                   usage=Usage(prompt_tokens=20, completion_tokens=5, total_tokens=25),
                                   finish_reason="tool_calls", model="fake")

        class BenchTools:
            name = "bench-tools"

            @hookimpl
            def register_tools(self, register, agent):
                def add(a: int, b: int) -> int:
                    """Add two integers.

                    Args:
                        a: the first number
                        b: the second number
                    """
                    return add_impl(a, b)

                register(add)

        self.tmp = Path(tempfile.mkdtemp(prefix="clawkit-bench-"))
        TEMP_DIRS.append(self.tmp)
        ws = self.tmp / "workspace"
        ws.mkdir()
        if README_CHARS[0]:  # --readme-chars: a project file the contributors quote (and the shield scans) every turn
            (ws / "README.md").write_text(("This project is a calculator; run make test before committing. " *
                                           (README_CHARS[0] // 60 + 1))[: README_CHARS[0]])
        if self.plugins == "none":
            pm = get_plugin_manager(extra=[BenchTools()], load_entry_points=False)
        else:
            names = [n for n, _ in clawkit_plugins()]
            off = [] if self.plugins == "all" else [n for n in names if n not in self.plugins]
            pm = get_plugin_manager(extra=[BenchTools()], disabled=off)
        data = {"name": "bench", "model": "fake/bench", "workspace": str(ws), "tools": ["add"], "instructions": SYSTEM,
                "state_db": str(self.tmp / "state.db")}
        cfg = validate_agent(data, "<bench>", {}, collect_sections(HookRunner(pm)))
        self.agent = Agent(cfg, pm=pm, provider=FakeModel(), persist=self.persist)
        self.loaded = sorted(n for n, _ in pm.list_name_plugin() if n != "bench-tools")
        if self.hook_times:
            self._time_hooks()

    hook_times = False

    def _time_hooks(self) -> None:
        """Wrap the loaded plugins' hook implementations with a clock (``self.hook_acc``)."""
        runner, acc, mine = self.agent.hooks, [0.0], set(self.loaded)
        real = runner.impls
        perf = time.perf_counter

        def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
            def call(**kw: Any) -> Any:  # the sync part: an awaitable's body runs when the kernel awaits it
                t0 = perf()
                try:
                    return fn(**kw)
                finally:
                    acc[0] += perf() - t0
            call.__dict__.update(getattr(fn, "__dict__", {}))  # hook_order, on_events marks
            return call

        def impls(name: str):
            cached = runner._cache.get(name)
            if cached is None or not getattr(cached, "timed", False):
                cached = _Timed((p, timed(f) if p in mine else f, a) for p, f, a in real(name))
                runner._cache[name] = cached
            return cached

        runner._cache.clear()
        runner.impls = impls  # type: ignore[method-assign]
        self.hook_acc = acc

    def start_batch(self) -> None:
        self.session_id, self.in_session = None, 0
        self.agent._sessions.clear()  # the kernel keeps every Session it opened; bound memory across batches

    async def turn(self) -> str:
        if self.chat and self.in_session >= CHAT_TURNS:
            self.session_id, self.in_session = None, 0
        r = await self.agent.turn(PROMPT, session_id=self.session_id)
        if self.chat:
            self.session_id = r.session_id
            self.in_session += 1
        return r.reply

    async def averify(self) -> None:
        errors_before = len(HOOK_ERRORS.records)
        before = ToolRuns.count
        r = await self.agent.turn(PROMPT)
        check(r.reply == ANSWER, f"{self.name}: reply {r.reply!r}")
        check(ToolRuns.count == before + 1, f"{self.name}: the tool did not run")
        check([c["name"] for c in r.tool_calls] == ["add"] and not r.tool_calls[0]["is_error"],
              f"{self.name}: tool calls {r.tool_calls}")
        roles = [(m.role, bool(m.tool_calls)) for m in self.agent.store.messages(r.session_id)]
        check(roles == [("user", False), ("assistant", True), ("tool", False), ("assistant", False)],
              f"{self.name}: stored messages {roles}")
        if self.persist:
            check(Path(self.agent.store.path).stat().st_size > 0, f"{self.name}: nothing on disk")
        new_errors = HOOK_ERRORS.records[errors_before:]
        check(not new_errors, f"{self.name}: plugin hooks failed: {new_errors[:3]}")

    def close(self) -> None:
        try:
            self.agent.store.close()
        except Exception:
            pass


# --- peers ---------------------------------------------------------------------------------


def dist_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class LlmVariant(Variant):
    name = "llm"
    dist = "llm"
    is_async = False
    note = "model.chain(tools=[add]).text(); sync; logs nothing (the CLI's logs.db is not used)"

    def setup(self) -> None:
        import llm
        from llm.models import ToolCall

        class FakeModel(llm.Model):
            model_id = "fake-bench"
            supports_tools = True
            can_stream = False

            def execute(self, prompt, stream, response, conversation):
                if prompt.tool_results:
                    yield answer_for(prompt.tool_results[0].output)
                else:
                    response.add_tool_call(ToolCall(name="add", arguments={"a": 2, "b": 3}, tool_call_id="call_1"))

        def add(a: int, b: int) -> int:
            """Add two integers."""
            return add_impl(a, b)

        self.model, self.add = FakeModel(), add

    def turn(self) -> str:
        return self.model.chain(PROMPT, tools=[self.add], system=SYSTEM).text()

    def verify(self) -> None:
        chain = self.model.chain(PROMPT, tools=[self.add], system=SYSTEM)
        check(chain.text() == ANSWER, "llm: wrong answer")
        first, second = chain._responses
        check([c.name for c in first.tool_calls()] == ["add"], "llm: no tool call")
        check([r.output for r in second.prompt.tool_results] == ["5"], "llm: tool result not sent back")


class OpenAIAgentsVariant(Variant):
    name = "openai-agents"
    dist = "openai-agents"
    note = "Runner.run; fake Model subclass; tracing disabled"

    def setup(self) -> None:
        from agents import Agent, Runner, function_tool, set_tracing_disabled
        from agents.items import ModelResponse
        from agents.models.interface import Model
        from agents.usage import Usage
        from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

        set_tracing_disabled(True)

        class FakeModel(Model):
            async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                                   tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **kw):
                last = input[-1] if isinstance(input, list) else {}
                if isinstance(last, dict) and last.get("type") == "function_call_output":
                    out = [ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed", content=[
                        ResponseOutputText(type="output_text", text=answer_for(last["output"]), annotations=[])])]
                else:
                    out = [ResponseFunctionToolCall(type="function_call", call_id="call_1", name="add",
                                                    arguments=json.dumps({"a": 2, "b": 3}))]
                return ModelResponse(output=out, usage=Usage(), response_id=None)

            def stream_response(self, *args, **kwargs):
                raise NotImplementedError

        @function_tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return add_impl(a, b)

        self.runner = Runner
        self.agent = Agent(name="bench", instructions=SYSTEM, model=FakeModel(), tools=[add])

    async def turn(self) -> str:
        return (await self.runner.run(self.agent, PROMPT)).final_output

    async def averify(self) -> None:
        r = await self.runner.run(self.agent, PROMPT)
        kinds = [type(i).__name__ for i in r.new_items]
        check(kinds == ["ToolCallItem", "ToolCallOutputItem", "MessageOutputItem"], f"openai-agents: items {kinds}")
        check(r.final_output == ANSWER and r.new_items[1].output in (5, "5"), "openai-agents: wrong result")


class SmolagentsVariant(Variant):
    name = "smolagents"
    dist = "smolagents"
    is_async = False
    note = "ToolCallingAgent.run; sync; final answer via its final_answer tool"

    def setup(self) -> None:
        from smolagents import ToolCallingAgent, tool
        from smolagents.models import ChatMessage, ChatMessageToolCall, ChatMessageToolCallFunction, MessageRole, Model
        from smolagents.monitoring import LogLevel, TokenUsage

        def tool_call(cid: str, name: str, arguments: dict) -> Any:
            return ChatMessageToolCall(id=cid, type="function", function=ChatMessageToolCallFunction(name=name, arguments=arguments))

        class FakeModel(Model):
            def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
                last = messages[-1]
                if last.role == MessageRole.TOOL_RESPONSE:
                    text = last.content if isinstance(last.content, str) else last.content[0]["text"]
                    tc = tool_call("call_2", "final_answer", {"answer": answer_for(text.rsplit("\n", 1)[-1])})
                else:
                    tc = tool_call("call_1", "add", {"a": 2, "b": 3})
                return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[tc],
                                   token_usage=TokenUsage(input_tokens=20, output_tokens=5))

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers.

            Args:
                a: the first number
                b: the second number
            """
            return add_impl(a, b)

        self.agent = ToolCallingAgent(tools=[add], model=FakeModel(model_id="fake"), verbosity_level=LogLevel.OFF, max_steps=4)

    def turn(self) -> str:
        return self.agent.run(PROMPT)

    def verify(self) -> None:
        out = self.agent.run(PROMPT)
        steps = self.agent.memory.steps[1:]
        calls = [[c.name for c in s.tool_calls] for s in steps]
        check(out == ANSWER and calls == [["add"], ["final_answer"]] and str(steps[0].observations).strip() == "5",
              f"smolagents: {out!r} {calls}")


class LangGraphVariant(Variant):
    dist = "langgraph"

    def __init__(self, use_async: bool):
        self.is_async = use_async
        self.name = "langgraph-async" if use_async else "langgraph"
        self.note = "create_react_agent, " + ("ainvoke (async tool)" if use_async else "invoke (sync)")

    def setup(self) -> None:
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.tools import tool
        from langgraph.prebuilt import create_react_agent

        class FakeChatModel(BaseChatModel):
            @property
            def _llm_type(self) -> str:
                return "fake-bench"

            def bind_tools(self, tools, **kwargs):
                return self

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                last = messages[-1]
                if isinstance(last, ToolMessage):
                    msg = AIMessage(content=answer_for(last.content))
                else:
                    msg = AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "call_1", "type": "tool_call"}])
                return ChatResult(generations=[ChatGeneration(message=msg)])

            async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
                return self._generate(messages, stop)

        if self.is_async:
            @tool
            async def add(a: int, b: int) -> int:
                """Add two integers."""
                return add_impl(a, b)
        else:
            @tool
            def add(a: int, b: int) -> int:
                """Add two integers."""
                return add_impl(a, b)

        self.graph = create_react_agent(FakeChatModel(), [add], prompt=SYSTEM)
        self.ToolMessage = ToolMessage

    def _check(self, r: dict) -> None:
        kinds = [type(m).__name__ for m in r["messages"]]
        check(kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"], f"{self.name}: messages {kinds}")
        check(r["messages"][2].content == "5" and r["messages"][-1].content == ANSWER, f"{self.name}: wrong result")

    def turn(self):
        if self.is_async:
            return self._aturn()
        return self.graph.invoke({"messages": [("user", PROMPT)]})["messages"][-1].content

    async def _aturn(self) -> str:
        return (await self.graph.ainvoke({"messages": [("user", PROMPT)]}))["messages"][-1].content

    async def averify(self) -> None:
        if self.is_async:
            self._check(await self.graph.ainvoke({"messages": [("user", PROMPT)]}))
        else:
            self._check(self.graph.invoke({"messages": [("user", PROMPT)]}))


class PydanticAIVariant(Variant):
    name = "pydantic-ai"
    dist = "pydantic-ai-slim"
    note = "Agent.run with FunctionModel"

    def setup(self) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel

        def model_fn(messages, info):
            for part in messages[-1].parts:
                if isinstance(part, ToolReturnPart):
                    return ModelResponse(parts=[TextPart(answer_for(part.content))])
            return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="call_1")])

        self.agent = Agent(FunctionModel(model_fn), instructions=SYSTEM)

        @self.agent.tool_plain
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return add_impl(a, b)

        self.ToolReturnPart = ToolReturnPart

    async def turn(self) -> str:
        return (await self.agent.run(PROMPT)).output

    async def averify(self) -> None:
        r = await self.agent.run(PROMPT)
        returns = [p.content for m in r.all_messages() for p in getattr(m, "parts", []) if isinstance(p, self.ToolReturnPart)]
        check(r.output == ANSWER and returns == [5], f"pydantic-ai: {r.output!r} {returns}")


PEERS: list[Callable[[], Variant]] = [
    LlmVariant, OpenAIAgentsVariant, SmolagentsVariant, lambda: LangGraphVariant(False), lambda: LangGraphVariant(True),
    PydanticAIVariant,
]


# --- profile -------------------------------------------------------------------------------


def short(path: str) -> str:
    for base in (str(REPO) + os.sep, sys.prefix + os.sep, os.path.dirname(os.__file__) + os.sep):
        if path.startswith(base):
            return path[len(base):]
    return path


async def profile(v: ClawkitVariant, turns: int, top: int) -> None:
    for _ in range(20):
        await v.turn()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(turns):
        await v.turn()
    prof.disable()
    st = pstats.Stats(prof)
    rows = []
    for (file, line, fn), (cc, nc, tt, ct, callers) in st.stats.items():  # type: ignore[attr-defined]
        rows.append((f"{short(file)}:{line}({fn})", nc / turns, tt / turns * 1e6, ct / turns * 1e6))
    total = sum(r[2] for r in rows)
    print(f"\nprofile of {v.name!r} under cProfile: {total:.0f} us/turn (cProfile inflates small calls; work in other"
          " threads shows up as the main thread's lock waits)")
    print(f"\n  top {top} by own time (us/turn)      calls/turn    own     cum")
    for name, calls, tt, ct in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {name[:90]:90s} {calls:7.1f} {tt:8.1f} {ct:8.1f}")
    print("\n  who pays for the top built-ins (us/turn of own time, by caller):")
    builtins = [(k, v) for k, v in st.stats.items() if k[0] == "~"]  # type: ignore[attr-defined]
    for (file, line, fn), (cc, nc, tt, ct, callers) in sorted(builtins, key=lambda kv: -kv[1][2])[:4]:
        print(f"  {fn}")
        for (cf, cl, cfn), c in sorted(callers.items(), key=lambda kv: -kv[1][2])[:6]:
            print(f"      {short(cf)}:{cl}({cfn}) {c[1] / turns:5.1f} calls {c[2] / turns * 1e6:8.1f} us")
    print(f"\n  top {top} by cumulative time, clawkit code only (us/turn)")
    mine = [r for r in rows if ("kernel/" in r[0] or "plugins/" in r[0])]
    for name, calls, tt, ct in sorted(mine, key=lambda r: -r[3])[:top]:
        print(f"  {name[:90]:90s} {calls:7.1f} {tt:8.1f} {ct:8.1f}")
    if isinstance(v.plugins, list):  # kernel + named plugins: their own code, where the "added us" goes
        dirs = tuple(f"plugins/builtin/{n}/" for n in v.plugins)
        own = [r for r in rows if r[0].startswith(dirs)]
        print(f"\n  top {top} by cumulative time, {', '.join(v.plugins)} code only (us/turn; hook entry points first)")
        for name, calls, tt, ct in sorted(own, key=lambda r: -r[3])[:top]:
            print(f"  {name[:90]:90s} {calls:7.1f} {tt:8.1f} {ct:8.1f}")


async def growth(plugins: list[str], sizes: list[int]) -> None:
    """Per-turn median once ``sizes`` sessions (default 10, 100, 1000, 10000) are stored in the
    same database (and indexed by memory, when it is loaded)."""
    v = ClawkitVariant("growth", plugins="all" if plugins == ["all"] else plugins, persist=True)
    v.setup()
    print(f"\ngrowth: kernel + {', '.join(v.loaded) or 'nothing'}, new session per turn, one SQLite file")
    done = 0
    first = None
    for target in sizes:
        batch = min(50, max(10, target // 2))
        while done < target - batch:
            await v.turn()
            done += 1
        CPU.pop(v.name, None)
        s = await run_batch(v, batch)
        done += batch
        med = statistics.median(s) * 1e6
        cpu = CPU[v.name][0] / CPU[v.name][1] * 1e6
        first = first or (med, cpu)
        print(f"  after {done:6d} sessions: median {med:8.0f} us   p90 {pct(s, 0.9) * 1e6:8.0f} us   cpu {cpu:7.0f} us   "
              f"{med / first[0]:5.2f}x / cpu {cpu / first[1]:5.2f}x the first   load {os.getloadavg()[0]:.1f}")
    v.close()


# --- main ----------------------------------------------------------------------------------


async def measure(variants: list[Variant], rounds: int, batch_seconds: float, settle: float = 0.0) -> dict[str, list[float]]:
    sizes: dict[str, int] = {}
    SETTLE[0] = 0.0  # calibration times turns only
    for v in variants:  # warm-up and calibration
        await run_batch(v, 10)
        t0 = time.perf_counter()
        await run_batch(v, 10)
        per = (time.perf_counter() - t0) / 10
        sizes[v.name] = max(30, min(2000, int(batch_seconds / per)))
    gc.collect()
    gc.freeze()  # setup garbage out of the way: a full collection of this heap takes ~100 ms
    samples: dict[str, list[float]] = {v.name: [] for v in variants}
    CPU.clear()
    HOOK.clear()
    SETTLE[0] = settle
    await asyncio.sleep(settle)  # the calibration's background work, out of the first batch
    for _ in range(rounds):
        for v in variants:
            samples[v.name] += await run_batch(v, sizes[v.name])
    return samples


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:.0f}x"


async def main_async(args: argparse.Namespace) -> int:
    logging.getLogger("clawkit.hooks").addHandler(HOOK_ERRORS)
    logging.getLogger("clawkit.classifier").setLevel(logging.ERROR)  # "no classifier model": the default config
    plugins = clawkit_plugins()
    variants: list[Variant] = [
        ClawkitVariant("clawkit", plugins="all", persist=True),
        ClawkitVariant("clawkit chat", plugins="all", persist=True, chat=True),
        ClawkitVariant("clawkit persist-off", plugins="all", persist=False),
        ClawkitVariant("kernel only", plugins="none", persist=True),
        ClawkitVariant("kernel only chat", plugins="none", persist=True, chat=True),
        ClawkitVariant("kernel only persist-off", plugins="none", persist=False),
    ]
    if args.profile_plugin:  # kernel + that one plugin, profiled after the table (its row is added if missing)
        args.profile = f"+ {args.profile_plugin}"
        if args.profile_plugin not in (args.plugin_rows or []):
            args.plugin_rows = (args.plugin_rows or []) + [args.profile_plugin]
        check(args.profile_plugin in dict(plugins), f"--profile-plugin: no plugin named {args.profile_plugin!r}")
        args.per_plugin = True
    if args.per_plugin:
        variants += [ClawkitVariant(f"+ {n}", plugins=[n], persist=True, group="plugin") for n, _ in plugins
                     if args.plugin_rows is None or n in args.plugin_rows]
        names = dict(plugins)
        for row in args.plugin_rows or []:  # "a+b": kernel + those plugins together, in one row
            if "+" in row:
                group = row.split("+")
                check(all(g in names for g in group), f"--plugin-rows: unknown plugin in {row!r}")
                variants.append(ClawkitVariant(f"+ {row}", plugins=group, persist=True, group="plugin"))
    for v in variants:
        if isinstance(v, ClawkitVariant) and v.group == "plugin" and args.hook_times:
            v.hook_times = True
    skipped: list[str] = []
    versions: dict[str, str] = {"clawkit-kernel": dist_version("clawkit-kernel") or "?"}
    for make in PEERS:
        v = make()
        if args.only and v.name not in args.only:
            continue
        ver = dist_version(v.dist)  # type: ignore[attr-defined]
        if ver is None:
            skipped.append(f"{v.name} (distribution {v.dist} not installed)")  # type: ignore[attr-defined]
            continue
        versions[v.dist] = ver  # type: ignore[attr-defined]
        variants.append(v)
    ready: list[Variant] = []
    for v in variants:
        try:
            v.setup()
        except ImportError as exc:
            skipped.append(f"{v.name} (import failed: {exc})")
            continue
        if hasattr(v, "averify"):
            await v.averify()  # type: ignore[attr-defined]
        else:
            v.verify()
        ready.append(v)

    print(f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("clawkit plugins (all): " + ", ".join(n for n, _ in plugins))
    for s in skipped:
        print(f"skipped: {s} — see tests/benchmarks/README.md for the peer environment")
    print(f"workload: {PROMPT!r} -> add(a=2, b=3) -> 5 -> {ANSWER!r}; every measured turn checked\n")

    t0 = time.perf_counter()
    samples = await measure(ready, args.rounds, args.batch_seconds, args.settle)
    took = time.perf_counter() - t0
    check(not HOOK_ERRORS.records, f"plugin hooks failed during the benchmark: {HOOK_ERRORS.records[:3]}")

    med = {k: statistics.median(s) * 1e6 for k, s in samples.items()}
    p90 = {k: pct(s, 0.9) * 1e6 for k, s in samples.items()}
    mean = {k: statistics.fmean(s) * 1e6 for k, s in samples.items()}
    cpu = {k: c / n * 1e6 for k, (c, n) in CPU.items()}
    ref = med["clawkit"]
    llm = med.get("llm")
    kernel = med["kernel only"]
    print("median/p90: per-turn wall time; mean: wall per turn over all batches; cpu: process CPU per turn (all")
    print("threads) over the same batches — wall far above cpu means the turn waits (threads, locks, disk)\n")
    print(f"{'framework':26s} {'median us':>10s} {'p90 us':>9s} {'mean us':>9s} {'cpu us':>8s} {'turns':>6s} {'vs clawkit':>10s}  notes")
    for v in ready:
        if v.group == "plugin":
            continue
        print(f"{v.name:26s} {med[v.name]:10.0f} {p90[v.name]:9.0f} {mean[v.name]:9.0f} {cpu[v.name]:8.0f} "
              f"{len(samples[v.name]):6d} {fmt_ratio(med[v.name] / ref):>10s}  {v.note}")
    if llm:
        print("\nclawkit against llm (median per turn; < 1x = faster than llm):")
        for name in ("clawkit", "clawkit chat", "clawkit persist-off", "kernel only", "kernel only chat", "kernel only persist-off"):
            print(f"  {name:26s} {fmt_ratio(med[name] / llm):>8s}")
    plugin_rows = [v for v in ready if v.group == "plugin"]
    if plugin_rows:
        print(f"\nper plugin: kernel + one plugin, persistence on, new session per turn (kernel only: {kernel:.0f} us)")
        hooked = bool(HOOK)
        print(f"  {'plugin':24s} {'median us':>10s} {'p90 us':>9s} {'cpu us':>8s} {'added us':>9s} {'added cpu':>10s}"
              + (f" {'hooks us':>9s}" if hooked else ""))
        for v in sorted(plugin_rows, key=lambda v: -med[v.name]):
            hk = f" {statistics.median(HOOK[v.name]) * 1e6:9.1f}" if v.name in HOOK else ""
            print(f"  {v.name[2:]:24s} {med[v.name]:10.0f} {p90[v.name]:9.0f} {cpu[v.name]:8.0f} {med[v.name] - kernel:9.0f} "
                  f"{cpu[v.name] - cpu['kernel only']:10.0f}{hk}")
        if hooked:
            print("  hooks us: median per turn of the wall time inside the plugin's own hook implementations (their"
                  " synchronous part; SQL they queue runs in the kernel's commit) — steadier than 'added' on a busy machine")
    if llm:
        whole, alone = ref / llm, med["kernel only"] / llm
        print(f"\ngoals (issue 13): every builtin plugin, persistence on <= 1.0x llm: {whole:.2f}x "
              + ("met" if whole <= 1.0 else "NOT met") + f"; kernel alone <= 0.5x llm: {alone:.2f}x "
              + ("met" if alone <= 0.5 else "NOT met"))
    else:
        print("\ngoals (issue 13) need llm installed (see the README): ratios not printed")
    print(f"measured in {took:.1f} s ({args.rounds} rounds, interleaved); load average {os.getloadavg()[0]:.1f} at end")
    if args.growth:
        await growth(args.growth, args.growth_sizes)
    if args.profile:
        target = next((v for v in ready if v.name == args.profile), None)
        check(isinstance(target, ClawkitVariant), f"--profile: no clawkit variant named {args.profile!r}")
        await profile(target, args.profile_turns, args.top)  # type: ignore[arg-type]
    for v in ready:
        v.close()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--settle", type=float, default=0.6, metavar="SECONDS",
                   help="quiet after each measured batch, its CPU charged to that batch: background work a "
                        "variant started (memory indexes episodes 0.25 s after the last turn) neither escapes its "
                        "CPU column nor slows the next variant's batch (default 0.6; 0 to turn off)")
    p.add_argument("--batch-seconds", type=float, default=0.25, help="target seconds per batch (default 0.25)")
    p.add_argument("--no-per-plugin", dest="per_plugin", action="store_false", help="skip the kernel + one plugin rows")
    p.add_argument("--plugin-rows", type=lambda s: s.split(","), default=None, metavar="NAMES",
                   help="per-plugin rows only for these plugins (comma list), e.g. policy,memory")
    p.add_argument("--only", type=lambda s: s.split(","), default=None, help="peers to run (comma list), e.g. llm")
    p.add_argument("--profile", nargs="?", const="clawkit", default=None, metavar="VARIANT",
                   help="cProfile a clawkit variant's turn (default: 'clawkit'; e.g. 'kernel only') and print the top costs")
    p.add_argument("--growth", type=lambda s: s.split(","), default=None, metavar="PLUGINS",
                   help="per-turn cost of kernel + PLUGINS (comma list, or 'all') as sessions accumulate in the db")
    p.add_argument("--growth-sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 1000, 10000],
                   metavar="N,N,...", help="stored sessions at which --growth measures (default 10,100,1000,10000)")
    p.add_argument("--profile-plugin", default=None, metavar="NAME",
                   help="cProfile 'kernel + NAME' (as --profile '+ NAME') and list that plugin's own costs")
    p.add_argument("--hook-times", action="store_true",
                   help="per-plugin rows also report the time inside the plugin's own hooks per turn (median)")
    p.add_argument("--readme-chars", type=int, default=0, metavar="N",
                   help="put a README.md of N characters in every clawkit variant's workspace (a project file in the prompt)")
    p.add_argument("--profile-turns", type=int, default=200)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    README_CHARS[0] = args.readme_chars
    try:
        return asyncio.run(main_async(args))
    except BrokenRun as exc:
        print(f"BROKEN RUN: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
