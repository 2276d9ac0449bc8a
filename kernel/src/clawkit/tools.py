"""Tools: a plain function becomes a tool from its signature and docstring.

Arguments are validated by a pydantic model built from the signature; a class
whose public methods are tools is a toolbox. A parameter named ``ctx`` receives
the :class:`clawkit.context.TurnContext` and is hidden from the model.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .types import Risk, ToolCall, ToolDef, ToolResult

_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


class ToolError(Exception):
    """Raise inside a tool to return a clean error message to the model."""


def _split_doc(doc: str | None) -> tuple[str, dict[str, str]]:
    """Description (text before ``Args:``) and per-argument descriptions (Google style)."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    head, _, rest = doc.partition("\nArgs:")
    params: dict[str, str] = {}
    for line in rest.splitlines():
        if line.strip() and not line.startswith((" ", "\t")):
            break
        m = _ARG_LINE.match(line)
        if m:
            params[m.group(1)] = m.group(2).strip()
    return head.strip(), params


@dataclass
class Tool:
    """A registered tool: what the model sees and how to run it."""

    definition: ToolDef
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    wants_ctx: bool
    is_async: bool

    @property
    def name(self) -> str:
        return self.definition.name

    def offered(self, ctx: Any) -> bool:
        """Whether an allowed tool is offered to the model this turn (subclasses narrow it:
        a skill tool only while its skill is active). A tool not offered still runs if
        called (a call from an earlier turn)."""
        return True

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        model = self.args_model.model_validate(arguments)
        return {k: getattr(model, k) for k in self.args_model.model_fields}

    async def run(self, ctx: Any, call: ToolCall, *, in_thread: bool = False) -> ToolResult:
        """Validate and execute; every failure becomes an error result, never an exception."""
        if call.argument_error:
            return _error(call, f"arguments are not valid JSON: {call.argument_error}. Send a JSON object.")
        try:
            kwargs = self.validate(call.arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            return _error(call, f"invalid arguments for {call.name}: {problems}")
        if self.wants_ctx:
            kwargs["ctx"] = ctx
        try:
            if self.is_async:
                value = await self.fn(**kwargs)
            else:  # in a thread: a sync tool that never returns cannot stall the loop past the call's deadline
                value = await _in_daemon_thread(self.fn, kwargs)
        except ToolError as exc:
            return _error(call, str(exc))
        except Exception as exc:
            return _error(call, f"{call.name} failed: {type(exc).__name__}: {exc}")
        if isinstance(value, ToolResult):
            return value
        return ToolResult(call_id=call.id, name=call.name, content=_to_text(value))


async def _in_daemon_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)`` in a daemon thread (with this context's variables): unlike ``asyncio.to_thread``,
    a call that never returns is abandoned at its deadline and does not hold the interpreter at exit."""
    import contextvars

    loop = asyncio.get_running_loop()
    fut: asyncio.Future = loop.create_future()
    _DAEMONS.run((contextvars.copy_context(), fn, kwargs, loop, fut))
    return await fut


class _DaemonThreads:
    """Daemon threads kept for the next call (starting a thread per call cost ~0.1-0.5 ms of a turn).
    A call that never returns keeps its thread; the next call gets another. Idle threads end after
    :attr:`IDLE` seconds."""

    IDLE = 30.0

    def __init__(self) -> None:
        import queue
        import threading

        self._jobs: Any = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def run(self, job: tuple) -> None:
        with self._lock:  # the job is queued under the lock: an idle thread that times out sees it
            if self._idle:
                self._idle -= 1
                self._jobs.put(job)
                return
        import threading

        threading.Thread(target=self._work, args=(job,), name="clawkit-tool", daemon=True).start()

    def _ready(self) -> None:
        with self._lock:
            self._idle += 1

    def _work(self, job: tuple) -> None:
        import queue

        while True:
            # idle before the result is handed back: the awaiting turn's next sync call (often
            # microseconds later) finds this thread instead of starting another
            _settle_job(job, self._ready)
            job = None  # type: ignore[assignment]  # drop references before idling
            while True:
                try:
                    job = self._jobs.get(timeout=self.IDLE)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._jobs.empty():
                            self._idle -= 1
                            return


def _settle_job(job: tuple, ready: Callable[[], None]) -> None:
    context, fn, kwargs, loop, fut = job

    def settle(method: str, value: Any) -> None:
        if not fut.done():
            getattr(fut, method)(value)

    try:
        value = context.run(fn, **kwargs)
        method = "set_result"
    except BaseException as exc:  # handed to the awaiting task
        value, method = exc, "set_exception"
    ready()
    try:
        loop.call_soon_threadsafe(settle, method, value)
    except RuntimeError:  # the loop is gone: nobody is waiting
        pass


_DAEMONS = _DaemonThreads()


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=f"Error: {message}", is_error=True)


def _to_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def tool_from_function(
    fn: Callable[..., Any], *, name: str | None = None, risk: Risk | str | None = None, description: str | None = None
) -> Tool:
    """Build a :class:`Tool` from ``fn``'s signature, type hints and docstring."""
    sig = inspect.signature(fn)
    desc, arg_docs = _split_doc(fn.__doc__)
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    wants_ctx = False
    for pname, param in sig.parameters.items():
        if pname == "self":
            continue
        if pname == "ctx":
            wants_ctx = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
    tool_name = name or fn.__name__
    model = create_model(f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    level = Risk(risk or getattr(fn, "__clawkit_risk__", None) or Risk.SAFE)
    definition = ToolDef(name=tool_name, description=description or desc, parameters=schema, risk=level,
                         trusted_output=bool(getattr(fn, "__clawkit_trusted_output__", False)),
                         confined=bool(getattr(fn, "__clawkit_confined__", False)),
                         inherits_provenance=bool(getattr(fn, "__clawkit_inherits_provenance__", False)),
                         capability=getattr(fn, "__clawkit_capability__", None))
    return Tool(definition, fn, model, wants_ctx, inspect.iscoroutinefunction(fn))


def tool(fn: Callable[..., Any] | None = None, *, risk: Risk | str = Risk.SAFE, trusted_output: bool = False,
         confined: bool = False, inherits_provenance: bool = False, capability: str | None = None):
    """Decorator to mark a function's (or toolbox method's) risk level: ``@tool(risk="unsafe")``.

    ``trusted_output=True``: what the tool returns is its own making (a plan, a confirmation), never
    outside content, so its results do not mark the session untrusted (:mod:`clawkit.provenance`).
    ``confined=True``: every process it starts goes through :func:`clawkit.process.confine` (a
    sandbox can jail it; see :attr:`clawkit.types.ToolDef.confined`).
    ``inherits_provenance=True``: it hands its work to a session that starts with the caller's
    provenance (:func:`clawkit.provenance.inherit`; see :attr:`clawkit.types.ToolDef.inherits_provenance`).
    ``capability="net.http"``: what it does, in the names skill manifests grant and deny, so the gates
    that enforce manifests govern it (:mod:`clawkit.effects`)."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__clawkit_risk__ = Risk(risk)  # type: ignore[attr-defined]
        if trusted_output:
            f.__clawkit_trusted_output__ = True  # type: ignore[attr-defined]
        if confined:
            f.__clawkit_confined__ = True  # type: ignore[attr-defined]
        if inherits_provenance:
            f.__clawkit_inherits_provenance__ = True  # type: ignore[attr-defined]
        if capability:
            f.__clawkit_capability__ = str(capability)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


GLOB_CHARS = frozenset("*?[")


def is_pattern(entry: str) -> bool:
    """Whether an allowlist entry is a glob pattern (``mcp__remote__*``) rather than a name."""
    return any(ch in GLOB_CHARS for ch in entry)


class ToolRegistry:
    """Tools registered by plugins for one agent; the agent's ``tools:`` allowlist decides.

    ``allow`` entries are tool names, glob patterns (``fnmatch``: ``mcp__remote__*``)
    or the name of a *group* a plugin declared (``skills`` admits ``load_skill`` and
    every ``skill_*`` tool). Nothing outside the list is ever shown or run, including
    tools registered at run time (skill tools, MCP servers, sub-agents).
    """

    def __init__(self, allow: list[str] | None = None):
        self.allow = list(allow or [])
        self.declared: set[str] = set()  # allowed by the agent's own declaration elsewhere (``subagents:``)
        self.tools: dict[str, Tool] = {}
        self.groups: dict[str, tuple[str, ...]] = {}
        self._patterns: tuple[str, ...] | None = None
        self._matched: tuple[Any, dict[str, bool]] = (None, {})  # (the patterns, name -> matched)
        self._visible: list[Tool] | None = None

    def register(self, obj: Any, name: str | None = None, risk: Risk | str | None = None, plugin: str | None = None,
                 allow: bool = False):
        """Register a function, a :class:`Tool`, or a toolbox (an object/class of methods).

        ``allow=True``: the agent's config declares this tool in a section of its own
        (a ``subagents:`` entry becomes ``agent_<name>``), which allows it like a
        ``tools:`` entry would."""
        if isinstance(obj, Tool):
            tools = [obj]
        elif inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
            tools = [tool_from_function(obj, name=name, risk=risk)]
        else:
            box = obj() if inspect.isclass(obj) else obj
            tools = [
                tool_from_function(member, risk=risk)
                for mname, member in inspect.getmembers(box, inspect.ismethod)
                if not mname.startswith("_")
            ]
        for t in tools:
            if t.name in self.tools:
                raise ValueError(f"tool {t.name!r} is registered twice")
            t.definition.plugin = plugin
            self.tools[t.name] = t
            if allow:
                self.declared.add(t.name)
        self.changed()

    def add_group(self, name: str, patterns: list[str] | tuple[str, ...]) -> None:
        """Declare an allowlist group: ``tools: [name]`` admits every tool matching ``patterns``.

        Names matching a group's patterns are also accepted in ``tools:`` before they
        exist (tools a plugin registers at run time, such as skill tools).
        """
        self.groups[name] = tuple(patterns)
        self._patterns = None
        self.changed()

    def add(self, tool: Tool) -> None:
        """Add (or replace) a tool registered at run time; the allowlist still decides."""
        self.tools[tool.name] = tool
        self.changed()

    def remove(self, name: str) -> None:
        self.unregister(name)

    def changed(self) -> None:
        self._visible = None

    def unregister(self, name: str) -> bool:
        """Remove a tool registered at runtime (e.g. an MCP server's tool list changed between rounds)."""
        found = self.tools.pop(name, None) is not None
        self.declared.discard(name)
        self._visible = None
        return found

    def patterns(self) -> tuple[str, ...]:
        """The allowlist with group names expanded."""
        if self._patterns is None:
            out: list[str] = []
            for entry in self.allow:
                out.extend(self.groups.get(entry, (entry,)))
            self._patterns = tuple(out)
        return self._patterns

    def allowed(self, name: str) -> bool:
        if name in self.declared:
            return True
        patterns = self.patterns()
        if self._matched[0] is not patterns:  # the allowlist or a group changed: match again
            self._matched = (patterns, {})
        hit = self._matched[1].get(name)
        if hit is None:  # the patterns are matched once per name (asked many times per turn)
            hit = self._matched[1][name] = any(fnmatch.fnmatchcase(name, pat) for pat in patterns)
        return hit

    def unknown_entries(self) -> list[tuple[int, str]]:
        """``(index, entry)`` for each name in the allowlist no plugin provides.

        A name is known when a tool has it, a group has it, or a group's patterns
        cover it (a tool that appears at run time). Patterns are not checked: they
        may match tools that arrive later (``mcp__remote__*``).
        """
        dynamic = [p for pats in self.groups.values() for p in pats]
        out = []
        for i, entry in enumerate(self.allow):
            if is_pattern(entry) or entry in self.tools or entry in self.groups:
                continue
            if any(fnmatch.fnmatchcase(entry, p) for p in dynamic):
                continue
            out.append((i, entry))
        return out

    def known_names(self) -> list[str]:
        return sorted(set(self.tools) | set(self.groups))

    def visible(self) -> list[Tool]:
        """Only the tools the agent allows, sorted by name."""
        if self._visible is None:
            self._visible = sorted((t for t in self.tools.values() if self.allowed(t.name)), key=lambda t: t.name)
        return self._visible

    def offered(self, ctx: Any) -> list[Tool]:
        """The allowed tools offered in this turn (a tool may decline with ``offered(ctx)``)."""
        return [t for t in self.visible() if t.offered(ctx)]

    def get(self, name: str) -> Tool | None:
        """A tool the model may call; None for unknown or not-allowed names."""
        t = self.tools.get(name)
        return t if t is not None and self.allowed(name) else None
