"""Process execution: how a tool that starts a process lets a sandbox confine it.

A tool builds a :class:`ProcessSpec` (what it would run, unconfined) and awaits
:func:`confine`. That asks the ``confine_process`` hook: a sandbox plugin answers
with a :class:`ProcessLaunch` — the argv/env/cwd that run the same command inside
its jail — or raises to refuse. With no sandbox plugin installed the launch is the
spec itself and the tool runs as it always did. A sandbox that fails never lets
the process run unconfined: :func:`confine` raises :class:`ProcessRefused`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from .hooks import HookFailure, maybe_await
from .tools import ToolError


class ProcessRefused(ToolError):
    """The sandbox will not run this process (unavailable, misconfigured, or forbidden)."""


@dataclass
class ProcessSpec:
    """A process a tool is about to start, as it would run without a sandbox."""

    tool: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    timeout: float
    output_bytes: int = 64_000


@dataclass
class ProcessLaunch:
    """How to start a (possibly confined) process, and what the confinement was.

    ``sandbox`` describes it for the audit ledger and the model (``mode``, ``mounts``,
    ``network``, ``limits``); empty when unconfined. ``note(returncode, timed_out)``
    may explain a failure the jail caused (a limit hit, a path hidden); ``close()``
    releases what the launch holds (a cgroup, a proxy) once the process has ended.
    """

    argv: list[str]
    cwd: str
    env: dict[str, str]
    sandbox: dict[str, Any] = field(default_factory=dict)
    note: Callable[[int | None, bool], str | None] | None = None
    cleanup: Callable[[], Any] | None = None

    async def close(self) -> None:
        if self.cleanup is not None:
            fn, self.cleanup = self.cleanup, None
            await maybe_await(fn())

    def explain(self, returncode: int | None, timed_out: bool) -> str | None:
        return self.note(returncode, timed_out) if self.note is not None else None


def confinement(ctx: Any, tool: Any) -> dict[str, Any]:
    """What the installed sandbox says a process started by ``tool`` (a :class:`~clawkit.tools.Tool`)
    would be confined to: ``{"confined": bool, "network": bool, "why": str}``, asked through the
    ``process_confinement`` hook before the call runs. Unconfined with network unless the tool
    declares :attr:`~clawkit.types.ToolDef.confined` and a sandbox answers; any failure reads as
    unconfined (a gate must assume the worst)."""
    free = {"confined": False, "network": True, "why": "no sandbox confines it"}
    definition = getattr(tool, "definition", None)
    if definition is None or not getattr(definition, "confined", False):
        return {**free, "why": "the tool does not run its processes through a sandbox"}
    hooks = getattr(ctx, "hooks", None)
    if hooks is None or not hooks.has("process_confinement"):
        return free
    for plugin, fn, argnames in hooks.impls("process_confinement"):
        try:
            answer = fn(**{k: {"ctx": ctx, "tool": definition.name}[k] for k in argnames})
        except Exception as exc:
            hooks.report("process_confinement", plugin, exc)
            return {**free, "why": f"the {plugin} sandbox could not say ({type(exc).__name__})"}
        if isinstance(answer, dict):
            return {"confined": answer.get("confined") is True, "network": answer.get("network") is not False,
                    "why": str(answer.get("why") or plugin)}
    return free


def unconfined(spec: ProcessSpec) -> ProcessLaunch:
    return ProcessLaunch(argv=list(spec.argv), cwd=spec.cwd, env=dict(spec.env))


async def confine(ctx: Any, spec: ProcessSpec) -> ProcessLaunch:
    """The launch for ``spec``: confined by a ``confine_process`` implementation, or as is.

    Raises :class:`ProcessRefused` (a :class:`~clawkit.tools.ToolError`, so the model
    sees the reason) when the sandbox refuses or fails.
    """
    hooks = getattr(ctx, "hooks", None)
    if hooks is None or not hooks.has("confine_process"):
        return unconfined(spec)
    try:
        launch: Awaitable[ProcessLaunch] | ProcessLaunch | None = await hooks.call_first(
            "confine_process", fail_closed=True, ctx=ctx, spec=spec
        )
    except HookFailure as exc:
        reason = str(exc.error) if isinstance(exc.error, ToolError) else f"{type(exc.error).__name__}: {exc.error}"
        raise ProcessRefused(f"not run: the {exc.plugin} sandbox refused it: {reason}") from None
    if launch is None:
        return unconfined(spec)
    if not isinstance(launch, ProcessLaunch):
        raise ProcessRefused(f"not run: confine_process returned {type(launch).__name__}, not a ProcessLaunch")
    return launch
