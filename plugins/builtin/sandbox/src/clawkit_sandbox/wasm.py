"""WebAssembly tools: WASI preview 1 modules run with wasmtime (:mod:`clawkit_sandbox.runtime`).

``instance: call`` (the default) gives every call a fresh store and instance: a WASI
*command* reads its JSON arguments on stdin and writes the result on stdout (a *reactor*
gets one ``clawkit_handle`` call). ``instance: task`` keeps one reactor instance per task —
an agent run: created on the run's first call with the directories granted then, reused by
the run's later calls (its memory, its static state), destroyed when the run ends, however
it ends (``ctx.at_end``; ``agent_closing`` for a process that exits mid-run). Fuel, memory
and the deadline apply to every call; a call that trips one discards the instance.

Only the directories the tool declares *and* that lie in the workspace or in a policy grant
for the tool are preopened. The import ``clawkit.call_tool`` runs a host tool through the
kernel's executor — the ``before_tool_call`` gates (policy, shield), approval,
``after_tool_call`` and the audit ledger — and only tools the declaration lists in
``host_tools`` (and the agent allows).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import itertools
import json
import os
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from clawkit.governing import consented
from clawkit.tools import Tool, ToolError
from clawkit.types import Risk, ToolCall, ToolDef, ToolResult

from .config import SandboxConfig, WasmToolConfig
from .runtime import MODULES, Outcome, Reactor, _ticker, engine, run_module  # noqa: F401 - re-exported

EXAMPLE = WasmToolConfig(
    name="text_stats", module=str(MODULES / "text_stats.wasm"), risk="safe", dirs=["."], host_tools=["read_file"],
    description="Count bytes, lines and words of a text (and find its longest word). Runs as a sandboxed "
    "WebAssembly module. Give exactly one of: text (the text itself), path (a workspace file), or host_file "
    "(a file the host's read_file tool reads for the module).",
    parameters={"type": "object", "properties": {
        "text": {"type": "string", "description": "the text to analyse"},
        "path": {"type": "string", "description": "a file in the workspace, relative to it"},
        "host_file": {"type": "string", "description": "a file read through the host's read_file tool"}}},
)
EXAMPLE_TASK = EXAMPLE.model_copy(update={
    "name": "text_stats_task", "module": str(MODULES / "text_stats_task.wasm"), "instance": "task",
    "description": EXAMPLE.description + " One instance serves the whole run: calls and total_words count "
    "the calls of this run so far."})


#: the absolute (monotonic) deadline of the Wasm call whose host call is running in this task
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("clawkit_wasm_deadline", default=None)


class _Args(BaseModel):
    model_config = ConfigDict(extra="allow")


class WasmTool(Tool):
    """A :class:`clawkit.tools.Tool` whose arguments go to the module as JSON (schema: the declaration's)."""

    tasks: "TaskInstances | None" = None

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"arguments": dict(arguments)}


class TaskInstances:
    """The live reactor instances of one ``instance: task`` tool, one per run."""

    def __init__(self, decl: WasmToolConfig, module: str, memory_mb: int, timeout: float) -> None:
        self.decl, self.module, self.memory_mb, self.timeout = decl, module, memory_mb, timeout
        self.live: dict[str, Reactor] = {}

    def for_run(self, ctx: Any) -> Reactor:
        run_id, at_end = getattr(ctx, "run_id", None), getattr(ctx, "at_end", None)
        if run_id is None or at_end is None:
            raise ToolError(f"{self.decl.name} keeps an instance per task (instance: task) and needs an agent run")
        reactor = self.live.get(run_id)
        if reactor is None:
            # the mounts are fixed here: a grant made later in the run does not widen this instance
            reactor = self.live[run_id] = Reactor(self.module, memory_mb=self.memory_mb, preopens=_preopens(ctx, self.decl))
            at_end(lambda: self.release(ctx, run_id))
        return reactor

    def release(self, ctx: Any, run_id: str) -> None:
        """The run ended: destroy its instance (at once, or when its running call stops)."""
        reactor = self.live.pop(run_id, None)
        if reactor is None:
            return
        now = reactor.close()
        _emit(ctx, "destroyed" if now else "destroy_pending", self.decl.name, calls=reactor.calls,
              instances=reactor.created)

    def release_all(self) -> None:
        """Agent shutdown: destroy every live instance, waiting (bounded) for running calls."""
        for run_id in list(self.live):
            self.live.pop(run_id).close(wait=self.timeout + 1.0)


def _emit(ctx: Any, action: str, tool: str, **data: Any) -> None:
    emit = getattr(ctx, "emit", None)
    if emit is not None:  # a ``tool.*`` event: the policy writes it to the audit ledger
        emit("tool.wasm_instance", action=action, tool=tool, **data)


def _preopens(ctx: Any, decl: WasmToolConfig) -> list[tuple[str, str, bool]]:
    workspace = os.path.realpath(str(ctx.workspace))
    state = getattr(ctx, "state", None) or {}
    granted = [p.rstrip("/") for p in ((state.get("granted") or {}).get(decl.name) or {}).get("paths", ())]
    out = []
    for spec in decl.dirs:
        parts = spec.split(":")
        host = parts[0]
        readonly = parts[-1] == "ro" and len(parts) > 1
        guest = parts[1] if len(parts) > 1 and parts[1] != "ro" else ("." if host == "." else host)
        real = os.path.realpath(os.path.join(workspace, os.path.expanduser(host)))
        inside = real == workspace or real.startswith(workspace + "/")
        if not (inside or any(real == g or real.startswith(g + "/") for g in granted)):
            continue  # declared but not granted: the module does not see it
        if os.path.isdir(real):
            out.append((real, guest, not readonly))
    return out


def _guard(ctx: Any, preopens: list[tuple[str, str, bool]]) -> Any:
    """A snapshot of the governing paths (:mod:`clawkit.governing`) a writable preopen reaches (WASI
    cannot mount single files read-only inside a preopened directory): restored after the call."""
    from clawkit.governing import for_context
    from clawkit.snapshot import Snapshot

    writable = [host for host, _, rw in preopens if rw]
    if not writable:
        return None

    def under(a: str, b: str) -> bool:
        return a == b or a.startswith(b.rstrip("/") + "/")

    reached = [g for g in for_context(ctx) if any(under(g.path, w) or under(w, g.path) for w in writable)]
    return Snapshot.take(reached) if reached else None


def _ticking(work: Any) -> Outcome:
    """Run ``work`` with the epoch ticker on — for as long as the *thread* runs: a cancelled caller
    stops waiting, but the module still stops at its deadline."""
    with _ticker:
        return work()


def _once(module: str, payload: bytes, *, memory_mb: int, fuel: int, timeout: float, preopens: list, host_call: Any) -> Outcome:
    """A fresh instance for one call: a command module runs ``_start``; a reactor one ``clawkit_handle``."""
    if not Reactor.is_reactor(module):
        return run_module(module, payload, memory_mb=memory_mb, fuel=fuel, timeout=timeout, preopens=preopens,
                          host_call=host_call)
    reactor = Reactor(module, memory_mb=memory_mb, preopens=preopens)
    try:
        return reactor.call(payload, fuel=fuel, timeout=timeout, host_call=host_call)
    finally:
        reactor.close()


def wasm_tool(decl: WasmToolConfig, cfg: SandboxConfig | None = None, base: str | None = None) -> WasmTool:
    """Build the tool for one declaration (plugins may register the result in ``register_tools``)."""
    cfg = cfg or SandboxConfig()
    module = decl.module if os.path.isabs(decl.module) or base is None else os.path.join(base, decl.module)
    memory_mb, fuel, timeout = decl.memory_mb or cfg.wasm_memory_mb, decl.fuel or cfg.wasm_fuel, decl.timeout or cfg.wasm_timeout
    counter = itertools.count(1)
    tasks = TaskInstances(decl, module, memory_mb, timeout) if decl.instance == "task" else None

    async def run(ctx: Any, arguments: dict[str, Any]) -> str:
        loop = asyncio.get_running_loop()
        parent = getattr(ctx, "step_id", None) or "wasm"
        runtime = getattr(ctx, "runtime", None)
        # the deadline of this call includes the host calls it makes: a host call that runs a Wasm
        # tool (this one, recursively) inherits what is left, never a fresh deadline of its own
        outer = _DEADLINE.get()
        now = time.monotonic()
        deadline = now + timeout if outer is None else min(outer, now + timeout)
        limit = timeout if outer is None else round(max(0.0, deadline - now), 3)
        if limit <= 0:
            raise ToolError(f"{decl.name} (WebAssembly) not run: the calling Wasm tool's deadline has passed")

        used: list[str] = []  # host tools called: their results reached the module, so its result carries them

        async def hosted(call: ToolCall) -> Any:
            _DEADLINE.set(deadline)  # this task's own context: the nested call sees the outer deadline
            return await runtime.executor.one(ctx, call, None, False, reader=f"wasm:{decl.name}")

        def host_call(name: str, args_text: str) -> str:
            if name not in decl.host_tools:
                return f"Error: {decl.name} may not call host tool {name!r} (host_tools: {decl.host_tools})"
            if runtime is None:
                return "Error: host tools need a running agent"
            try:
                args = json.loads(args_text)
            except ValueError as exc:
                return f"Error: arguments for {name} are not JSON: {exc}"
            left = deadline - time.monotonic()
            if left <= 0:
                return f"Error: {name} not run: {decl.name}'s deadline ({timeout:g} s) has passed"
            call = ToolCall(id=f"{parent}.host{next(counter)}", name=name, arguments=args if isinstance(args, dict) else {})
            ctx.emit("tool.host_call", call_id=call.id, tool=name, parent=parent, module=decl.name)
            # through the kernel's executor: the same gates, approval, after_tool_call and audit as a model's
            # call; the result is the tool's own (not wrapped for the model: the module computes on it)
            used.append(name)
            future = asyncio.run_coroutine_threadsafe(hosted(call), loop)
            try:
                return future.result(left).content
            except concurrent.futures.TimeoutError:
                future.cancel()
                return f"Error: {name} did not finish within {decl.name}'s deadline ({timeout:g} s); it was abandoned"

        payload = json.dumps(arguments).encode("utf-8")
        if tasks is not None:
            reactor = tasks.for_run(ctx)
            preopens = reactor.preopens
            work = functools.partial(reactor.call, payload, fuel=fuel, timeout=limit, host_call=host_call)
        else:
            preopens = _preopens(ctx, decl)
            work = functools.partial(_once, module, payload, memory_mb=memory_mb, fuel=fuel, timeout=limit,
                                     preopens=preopens, host_call=host_call)
        guard = _guard(ctx, preopens)
        try:
            outcome = await asyncio.to_thread(_ticking, work)
        finally:
            restored = guard.restore(keep=consented(ctx)) if guard is not None else []
        if restored:
            shown = "\n".join(f"  {line}" for line in restored)
            raise ToolError(f"{decl.name} (WebAssembly) changed what governs the agent's next run through a writable "
                            f"directory, which no tool of the agent may change; clawkit undid it:\n{shown}")
        if tasks is not None:
            if outcome.created:
                _emit(ctx, "created", decl.name, call_id=parent, memory_mb=memory_mb,
                      preopens=[{"path": h, "guest": g, "access": "rw" if w else "ro"} for h, g, w in reactor.preopens])
            if outcome.discarded:
                _emit(ctx, "discarded", decl.name, call_id=parent, reason=outcome.failure)
        if outcome.failure:
            kept = " The task's instance was discarded; its next call starts a fresh one." if outcome.discarded else ""
            raise ToolError(f"{decl.name} (WebAssembly) {outcome.failure}.{kept} Output so far: {outcome.stdout[:2000]!r}")
        if outcome.exit_code not in (0, None):
            raise ToolError(f"{decl.name} (WebAssembly) exited with code {outcome.exit_code}: {outcome.stdout[:2000]}")
        text = outcome.stdout.strip()
        try:
            result = json.loads(text)
        except ValueError:
            result = None
        if isinstance(result, dict) and set(result) == {"error"}:
            raise ToolError(f"{decl.name}: {result['error']}")
        if not used:
            return text
        # computed on what host tools returned (a workspace file, a page): untrusted data for the model,
        # wrapped by the shield like the host tool's own result would have been
        current = getattr(ctx, "call", None)
        return ToolResult(call_id=getattr(current, "id", None) or parent, name=decl.name, content=text,
                          metadata={"untrusted": True, "host_tools": sorted(set(used))})

    definition = ToolDef(name=decl.name, description=decl.description or f"WebAssembly tool {decl.name}",
                         parameters=decl.parameters, risk=Risk(decl.risk))
    tool = WasmTool(definition, run, _Args, True, True)
    tool.tasks = tasks
    return tool


def tools_for(agent: Any) -> list[WasmTool]:
    """The Wasm tools of an agent: its ``wasm_tools`` declarations and the shipped examples."""
    cfg = agent.plugin("sandbox") if hasattr(agent, "plugin") else None
    cfg = cfg if isinstance(cfg, SandboxConfig) else SandboxConfig()
    decls = list(cfg.wasm_tools) + ([EXAMPLE, EXAMPLE_TASK] if cfg.example_tools else [])
    base = str(getattr(agent, "workspace", ".") or ".")
    return [wasm_tool(d, cfg, base) for d in decls]


def release(runtime: Any) -> None:
    """``agent_closing``: destroy the live per-task instances of the agent's Wasm tools."""
    registry = getattr(runtime, "tools", None)
    for tool in list(getattr(registry, "tools", {}).values()):
        if isinstance(tool, WasmTool) and tool.tasks is not None:
            tool.tasks.release_all()
