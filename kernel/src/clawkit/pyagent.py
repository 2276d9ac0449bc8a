"""Agents in plain Python: ``clawkit.Agent("openai/gpt-4o-mini", instructions=…, tools=[fn])``.

The keyword form of :class:`clawkit.loop.Agent` (docs/python-agents.md). Every keyword is a key
of an agent YAML file (``limits=``, ``workspace=``, ``context=``…) or the name of an installed
plugin's section (``policy=``, ``memory=`` — the same as ``plugins={"policy": …}``), validated by
the same pydantic model as the YAML, so an error names the keyword and the field. Python
functions in ``tools=`` become tools through the kernel's :func:`clawkit.tools.tool_from_function`
(signature and docstring → JSON schema; sync or async; ``@clawkit.tool(risk=…)``), registered
through the ordinary ``register_tools`` hook, so they pass the same gates (policy, shield,
approvals, audit) as every builtin tool. Strings in ``tools=`` are allowlist entries (builtin
tool names, globs, groups), as in YAML.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import os
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

from .errors import ConfigError
from .hookspecs import hookimpl, on_events

WHERE = "clawkit.Agent"


class PythonTools:
    """The plugin that registers an agent's Python functions (``tools=[fn, …]``) as allowed tools."""

    name = "python-tools"  # the plugin name the tools carry (ToolDef.plugin, the audit ledger)

    def __init__(self, tools: list[Any]):
        self.tools = tools

    @hookimpl
    def register_tools(self, register) -> None:
        for fn in self.tools:
            register(fn, allow=True)


def _model_string(model: Any) -> Any:
    """``openai:gpt-4o`` (pydantic-ai's spelling) is read as litellm's ``openai/gpt-4o``."""
    if isinstance(model, str) and "/" not in model and ":" in model:
        prefix, _, rest = model.partition(":")
        if prefix.isidentifier() and rest:
            return f"{prefix}/{rest}"
    return model


def _split_tools(tools: Any) -> tuple[list[str], list[Any]]:
    """Allowlist names and Python tools (functions, :class:`clawkit.tools.Tool` objects, toolboxes)."""
    from .tools import Tool

    if tools is None:
        return [], []
    if isinstance(tools, (str, bytes)) or callable(tools) and not isinstance(tools, type):
        tools = [tools]
    names: list[str] = []
    code: list[Any] = []
    for i, item in enumerate(tools):
        if isinstance(item, str):
            names.append(item)
        elif isinstance(item, Tool) or callable(item) or inspect.isclass(item):
            if getattr(item, "__name__", "") == "<lambda>":
                raise ConfigError(f"{WHERE}(tools=…): tools[{i}]: a lambda has no name for the model; use a def with a docstring")
            code.append(item)
        else:
            raise ConfigError(f"{WHERE}(tools=…): tools[{i}]: expected a function, a clawkit Tool or a tool name, "
                              f"got {type(item).__name__}")
    return names, code


def build_config(model: Any, settings: dict[str, Any], pm: Any = None) -> tuple[Any, list[Any]]:
    """The :class:`clawkit.config.AgentConfig` for the keyword form and the Python tools to register.

    ``pm`` is the plugin manager whose sections validate the keywords (default: every installed
    plugin). Raises :class:`ConfigError` naming the keyword."""
    from .config import collect_sections, validate_agent
    from .hooks import HookRunner
    from .plugins import get_plugin_manager

    settings = dict(settings)
    if model is not None and "model" in settings:
        raise ConfigError(f"{WHERE}(): the model is given twice (positionally and as model=)")
    model = settings.pop("model", model)
    if model is None:
        raise ConfigError(f"{WHERE}(): missing model, e.g. clawkit.Agent('openai/gpt-4o-mini', instructions=…)")
    names, code = _split_tools(settings.pop("tools", None))
    sections = collect_sections(HookRunner(pm or get_plugin_manager()))
    top = set(_top_keys(sections))
    plugin_names = {n for n, _, top_level in sections if not top_level}
    data: dict[str, Any] = {"name": settings.pop("name", "agent"), "model": _model_string(model), "tools": names}
    lines: dict[tuple, Any] = {("name",): f"{WHERE}(name=…)", ("model",): f"{WHERE}(model=…)",
                               ("tools",): f"{WHERE}(tools=…)"}
    plugins = dict(settings.pop("plugins", None) or {})
    for key, value in settings.items():
        if key in top:
            data[key] = value
            lines[(key,)] = f"{WHERE}({key}=…)"
        elif key in plugin_names:
            if key in plugins:
                raise ConfigError(f"{WHERE}({key}=…): the {key} section is given twice ({key}= and plugins={{'{key}': …}})")
            plugins[key] = value
            lines[("plugins", key)] = f"{WHERE}({key}=…)"
        else:
            known = sorted(top | plugin_names | {"model", "tools", "name", "plugins"})
            near = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {near[0]}=?)" if near else ""
            raise ConfigError(f"{WHERE}({key}=…): unknown keyword{hint}; an agent accepts the keys of an agent YAML "
                              f"file and the installed plugins' sections: {', '.join(known)}")
    for name in plugins:
        lines.setdefault(("plugins", name), f"{WHERE}(plugins={{'{name}': …}})")
    if plugins:
        data["plugins"] = plugins
    for key in ("workspace", "state_db"):
        if isinstance(data.get(key), Path):  # a Path is accepted as the YAML's string
            data[key] = str(data[key])
    cfg = validate_agent(data, WHERE, lines, sections, base_dir=Path(os.getcwd()))
    return cfg, code


def _top_keys(sections: list[tuple[str, Any, bool]]) -> list[str]:
    from .config import AgentConfig

    return [k for k in AgentConfig.model_fields if k not in ("model", "tools", "name", "plugins")] + \
        [n for n, _, top_level in sections if top_level]


# --- streaming -------------------------------------------------------------------------------


@dataclass
class StreamEvent:
    """One thing that happened while a turn streamed: ``kind`` is ``"text"`` (a chunk of the reply),
    ``"tool_call"``, ``"tool_result"``, ``"notice"`` or ``"done"`` (``result`` is the TurnResult)."""

    kind: str
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    result: Any = None


_STREAM: "ContextVar[asyncio.Queue | None]" = ContextVar("clawkit_stream_queue", default=None)


class ToolWatch:
    """Observer plugin of streamed turns: each tool call and result, whatever the displays show
    (they are quiet by default). Only turns run by :func:`stream_events` (its context) are watched."""

    @hookimpl(trylast=True)
    def message_sending(self, outbound) -> None:
        queue = _STREAM.get()
        if queue is None or outbound.kind not in ("tool_call_display", "tool_result_display"):
            return None
        call = outbound.metadata.get("call")
        data: dict[str, Any] = {"name": getattr(call, "name", ""), "arguments": getattr(call, "arguments", {}),
                                "call_id": getattr(call, "id", "")}
        if outbound.kind == "tool_result_display":
            res = outbound.metadata.get("result")
            data.update(is_error=bool(getattr(res, "is_error", False)), content=getattr(res, "content", outbound.content))
            queue.put_nowait(StreamEvent("tool_result", str(data["content"]), data))
        else:
            queue.put_nowait(StreamEvent("tool_call", data["name"], data))
        return None


    @hookimpl
    @on_events("tool.blocked", "tool.approval")
    def on_event(self, event) -> None:
        """A call refused before it ran (blocked, or its approval denied) is a ``tool_result`` too."""
        queue = _STREAM.get()
        if queue is None or event.type not in ("tool.blocked", "tool.approval") or event.data.get("approved"):
            return
        data = {"name": event.data.get("tool", ""), "call_id": event.data.get("call_id", ""), "is_error": True,
                "blocked": True, "reason": event.data.get("reason", "")}
        queue.put_nowait(StreamEvent("tool_result", str(data["reason"]), data))


def _watch(agent: Any) -> None:
    """Register the :class:`ToolWatch` on ``agent``'s plugin manager once (its hook lists are cached:
    they are read again)."""
    if getattr(agent, "_tool_watch", None) is None:
        agent._tool_watch = ToolWatch()
        agent.pm.register(agent._tool_watch, name=f"clawkit-stream-{id(agent)}")
        agent.hooks._cache.clear()


async def stream_events(agent: Any, text: str, *, session_id: str | None = None, **run_kwargs: Any) -> AsyncIterator[StreamEvent]:
    """Run one turn of ``agent`` and yield what happens as it happens; the last event is ``done``
    (``run_kwargs`` go to :meth:`clawkit.loop.Agent.turn` unchanged)."""
    queue: asyncio.Queue = asyncio.Queue()
    _watch(agent)

    def deliver(outbound: Any) -> None:
        if outbound.kind == "stream_chunk":
            if outbound.content:
                queue.put_nowait(StreamEvent("text", outbound.content))
        elif outbound.kind == "final_reply":
            if not outbound.metadata.get("streamed") and outbound.content:
                queue.put_nowait(StreamEvent("text", outbound.content))
        elif outbound.kind in ("notice", "routed"):
            queue.put_nowait(StreamEvent("notice", outbound.content, dict(outbound.metadata)))

    token = _STREAM.set(queue)
    try:  # the task copies this context: its hooks see the queue, nobody else's do
        task = asyncio.ensure_future(agent.turn(text, session_id=session_id, deliver=deliver, **run_kwargs))
    finally:
        _STREAM.reset(token)
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                yield getter.result()
                continue
            getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
            result = task.result()  # raises what the turn raised
            yield StreamEvent("done", result.reply, result=result)
            return
    finally:
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # noqa: BLE001 - the consumer stopped early: the turn is cancelled
                pass


async def stream_text(agent: Any, text: str, **kwargs: Any) -> AsyncIterator[str]:
    """Only the reply's text chunks of :func:`stream_events`."""
    async for event in stream_events(agent, text, **kwargs):
        if event.kind == "text":
            yield event.text
