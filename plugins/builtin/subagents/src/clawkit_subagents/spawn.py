"""One delegation: parent → child → parent, as data, with provenance.

The task travels to the child as natural language (its dispatch record passes the
parent's ``message_sending`` as a ``routed`` outbound, where the translation device
compresses it to ClawDense and a plugin may cancel it: a veto). The child runs a
complete turn in its own session, under one ``trace_id`` and linked to the spawning
step. With an ``output_schema`` its run is typed (clawkit.output: validated, retried), delivered
back through ``message_sending``, wrapped in ``<subagent_result agent="…">`` and
marked untrusted so the shield scans it. Provenance (source agent, time, SHA-256,
capability scope) rides on the result's metadata — stored with the tool message and,
through the audited ``subagent.end`` event, in the policy's ledger — never in a prompt.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from clawkit import provenance
from clawkit.types import ToolResult, Usage, new_id

from .children import child_for, confinement, lineage
from .config import SubagentSpec

DEFAULT_MAX_CHILDREN = 16  # plugins.subagents.max_children_per_run


class SpawnFailed(Exception):
    """A delegation that ended without a usable answer; the message goes to the parent's model."""


@dataclass
class Outcome:
    """What one delegation produced."""

    agent: str
    answer: str = ""
    error: str | None = None
    status: str = "done"
    usage: Usage = field(default_factory=Usage)
    provenance: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    run_id: str | None = None
    output: Any = None  # a typed child's validated answer (its JSON value)


def _add(total: Usage, u: Usage) -> None:
    total.prompt_tokens += u.prompt_tokens
    total.completion_tokens += u.completion_tokens
    total.total_tokens += u.total_tokens
    if u.cost is not None:
        total.cost = (total.cost or 0.0) + u.cost


def escape(text: str) -> str:
    """Keep a child from closing (or forging) the delimiters around its own answer."""
    return text.replace("</subagent_result", "&lt;/subagent_result").replace("<subagent_result", "&lt;subagent_result")


def wrap(agent: str, text: str) -> str:
    return f'<subagent_result agent="{agent}">\n{escape(text)}\n</subagent_result>'


def _semaphore(ctx: Any, limit: int) -> asyncio.Semaphore:
    sem = ctx.state.get("subagents.semaphore")
    if sem is None:
        sem = ctx.state["subagents.semaphore"] = asyncio.Semaphore(limit)
    return sem


class TreeCount:
    """Children started in one user turn's tree of agents (every level), against the cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.started = 0


# child session id -> its tree's count (held by the root turn's state: gone when that turn is)
_TREES: "weakref.WeakValueDictionary[str, TreeCount]" = weakref.WeakValueDictionary()


def max_children(agent: Any) -> int:
    section = agent.plugin("subagents") if hasattr(agent, "plugin") else None
    return int(getattr(section, "max_children_per_run", None) or DEFAULT_MAX_CHILDREN)


def reserve(ctx: Any) -> str | None:
    """Count one child for this turn's tree before it starts (synchronously: children started in
    parallel cannot overshoot); an error text when the tree has started as many as its cap."""
    tree = ctx.state.get("subagents.tree") or _TREES.get(ctx.session.id)
    if tree is None:
        tree = TreeCount(max_children(ctx.agent))
    ctx.state["subagents.tree"] = tree
    cap = min(tree.cap, max_children(ctx.agent))
    if tree.started >= cap:
        return (f"this user turn has already started {tree.started} sub-agents, the most it may "
                f"(plugins.subagents.max_children_per_run: {cap}); finish the task with what you have")
    tree.started += 1
    return None


def release(ctx: Any) -> None:
    tree = ctx.state.get("subagents.tree")
    if tree is not None and tree.started > 0:
        tree.started -= 1


def taint_parent(ctx: Any, name: str, child_session: Any) -> None:
    """The child's answer is outside content for the parent: mark the parent's session (and
    carry the child's own alarm up: an injection detected in the child's run taints the parent)."""
    detail = f"answer of sub-agent {name!r} (session {getattr(child_session, 'id', '?')})"
    try:
        if provenance.is_untrusted(child_session):
            seen = provenance.describe(child_session)
            detail += f"; the child's session was untrusted ({seen})" if seen else "; the child's session was untrusted"
        alarm = bool(child_session.get("tainted"))
    except Exception:  # an unreadable child record: assume the worst
        detail, alarm = detail + "; the child's session could not be read", True
    if alarm:
        detail += "; an injection was detected in the child's run"
    provenance.mark_untrusted(ctx.session, f"agent_{name}", detail, kind="subagent")
    if alarm and not ctx.session.get("tainted"):
        ctx.session.set("tainted", True)
        ctx.emit("subagent.tainted", agent=name, child_session=getattr(child_session, "id", None))


def _dispatch_record(agent: str, step_id: str, task: str, skills: list[str] = ()) -> dict[str, Any]:
    """The dispatch as a CT/1 message in its mapping shape (``CT/1 TASK subagent agent=… task=… goal=…
    skills=…``): the translation device encodes it without parsing text (and decodes it at the child)."""
    params = {"agent": agent, "task": step_id, "goal": task}
    if skills:
        params["skills"] = ",".join(skills)
    return {"verb": "TASK", "action": "subagent", "params": params}


def _routed_skills(ctx: Any, step_id: str) -> list[str]:
    """The skills the router chose for this dispatched call (none for a call the model made):
    the child works with them bound — their sections, tools and manifests."""
    from .dispatch import ROUTED_KEY

    routed = (ctx.state.get(ROUTED_KEY) or {}).get(step_id) or {}
    return [str(n) for n in routed.get("skills") or []]


def _routed_attachments(ctx: Any, step_id: str) -> list[Any]:
    """A routed task is the user's message handed on: the images and files attached to it go with
    it (copies of the blocks, their bytes filled from the parent's store). A call the model made
    carries only its task text. The child checks them as its own run would (size, type, whether
    its model takes images); their provenance is the parent's, which the child inherits."""
    from .dispatch import ROUTED_KEY

    if step_id not in (ctx.state.get(ROUTED_KEY) or {}):
        return []
    message = next((m for m in reversed(ctx.session.history) if m.role == "user"), None)
    blocks = [b for b in (message.blocks if message is not None else []) if b.type in ("image", "file")]
    if any(b.data is None for b in blocks):
        from clawkit.attachments import blob_store, hydrate

        hydrate([message], blob_store(ctx.runtime))
    return [b.model_copy() for b in blocks if b.data is not None]


async def delegate(ctx: Any, name: str, spec: SubagentSpec, task: str, *, step_id: str | None = None) -> Outcome:
    """Run sub-agent ``name`` on ``task`` for the turn ``ctx``; never raises but for cancellation."""
    parent = ctx.runtime
    step_id = step_id or ctx.step_id or new_id("step")
    out = Outcome(name)
    task = task.strip()
    if not task:
        out.status, out.error = "invalid", "the task is empty; say what the sub-agent should do"
        return out
    if len(task) > spec.max_task_chars:
        out.status, out.error = "invalid", f"the task is {len(task)} characters; at most {spec.max_task_chars} are accepted"
        return out
    refused = reserve(ctx)
    if refused is not None:
        out.status, out.error = "limit", refused
        ctx.emit("subagent.end", agent=name, call_id=step_id, status=out.status, error=out.error)
        return out
    try:
        child = child_for(parent, name, spec)
    except Exception as exc:  # a bad child file is a clear error for the parent's model, not a crash
        release(ctx)
        out.status, out.error = "config", f"sub-agent {name!r} cannot start: {exc}"
        ctx.emit("subagent.end", agent=name, call_id=step_id, status=out.status, error=out.error)
        return out
    kin = lineage(child)
    skills = _routed_skills(ctx, step_id)
    attachments = _routed_attachments(ctx, step_id)
    sent = await parent.send(ctx, "routed", task, None, to=name, ct1=_dispatch_record(name, step_id, task, skills),
                             dispatch=True, agent=name)
    if sent.cancelled:
        release(ctx)
        out.status, out.error = "vetoed", f"a plugin vetoed handing this task to sub-agent {name!r}"
        ctx.emit("subagent.end", agent=name, call_id=step_id, status=out.status, error=out.error)
        return out
    record = sent.content
    session = child.session(None)
    session.set("subagent", {"agent": name, "parent_agent": parent.config.name, "parent_session": ctx.session.id,
                             "parent_run_id": ctx.run_id, "parent_step_id": step_id, "trace_id": ctx.trace_id,
                             "depth": kin.depth, "tools": kin.tools, "dispatch": record, "confinement": confinement(child),
                             "skills": skills,
                             "transport": sent.metadata.get("transport", "text")})  # committed with the child's first message
    out.session_id = session.id
    # a child of an untrusted parent starts untrusted (the task may carry what the parent read): its own
    # egress is asked for, so the hand-over itself need not be (ToolDef.inherits_provenance)
    provenance.inherit(session, ctx.session, f"parent:{parent.config.name}")
    _TREES[session.id] = ctx.state["subagents.tree"]  # the child's own children count against this tree
    ctx.emit("subagent.start", agent=name, call_id=step_id, child_session=session.id, depth=kin.depth, tools=kin.tools,
             task_sha256=hashlib.sha256(task.encode()).hexdigest(), dispatch=record,
             transport=sent.metadata.get("transport", "text"))
    started = time.time()
    try:
        async with _semaphore(ctx, lineage(parent).max_parallel):
            await asyncio.wait_for(_run(ctx, child, session.id, spec, task, step_id, out, attachments), spec.timeout)
    except asyncio.TimeoutError:
        out.status, out.error = "timeout", f"sub-agent {name!r} did not finish within {spec.timeout:g} s"
    except asyncio.CancelledError:
        ctx.emit("subagent.end", agent=name, call_id=step_id, child_session=session.id, status="cancelled")
        raise
    except SpawnFailed as exc:
        out.status, out.error = "invalid_output", str(exc)
    except Exception as exc:  # the child crashed: the parent's model hears about it, the parent goes on
        kind = getattr(exc, "kind", None)
        out.status, out.error = "error", f"sub-agent {name!r} failed: {type(exc).__name__}{f' ({kind})' if kind else ''}: {exc}"
    elapsed = round(time.time() - started, 3)
    taint_parent(ctx, name, session)  # whatever came back (an answer, an error quoting it) is the child's
    if out.error is None:
        delivered = await parent.send(ctx, "routed", out.answer, None, to=parent.config.name, agent=name, from_agent=name)
        if delivered.cancelled:
            out.status, out.error = "withheld", f"a plugin withheld sub-agent {name!r}'s answer"
        else:
            out.answer = delivered.content
            out.provenance = {
                "source_agent": name, "source_session": session.id, "source_run": out.run_id, "time": time.time(),
                "sha256": hashlib.sha256(out.answer.encode("utf-8", "replace")).hexdigest(),
                "scope": {"tools": kin.tools, "grants": kin.grants, "depth": kin.depth},
            }
    # no usage here: it rolls up through the tool result and is on the child's run record already (a Usage
    # dump in an audited event also costs the ledger's secret screen a structural walk: "…_tokens" keys)
    ctx.emit("subagent.end", agent=name, call_id=step_id, child_session=session.id, child_run=out.run_id,
             status=out.status, error=out.error, elapsed=elapsed, provenance=out.provenance or None)
    return out


async def _run(ctx: Any, child: Any, session_id: str, spec: SubagentSpec, task: str, step_id: str, out: Outcome,
               attachments: list[Any] = ()) -> None:
    """The child's turn. An ``output_schema`` (or the child's own YAML ``output:``) makes it a typed
    run (clawkit.output): the schema goes to the child's model the way it takes it best, the answer
    is validated and sent back with its errors ``output_retries`` times; the parent then gets the
    validated JSON."""
    from clawkit.output import OutputSpec, OutputValidationError

    links = {"trace_id": ctx.trace_id, "parent_run_id": ctx.run_id, "parent_step_id": step_id}
    typed = None
    if spec.output_schema is not None:
        typed = OutputSpec.of(spec.output_schema, retries=spec.output_retries)
    try:
        result = await child.turn(task, session_id=session_id, output_type=typed, attachments=list(attachments) or None,
                                  **links)
    except OutputValidationError as exc:
        out.run_id = exc.run_id or out.run_id
        raise SpawnFailed(f"sub-agent {out.agent!r} answered {exc.attempts} time(s) without satisfying its output "
                          f"schema: {'; '.join(exc.errors)}") from None
    out.run_id = result.run_id
    _add(out.usage, result.usage)
    out.answer = result.reply
    if result.typed:
        out.output = result.output


def as_tool_result(ctx: Any, out: Outcome) -> ToolResult:
    call = ctx.call
    meta: dict[str, Any] = {"subagent": out.agent, "usage": out.usage.model_dump(exclude_defaults=True),
                            "child_session": out.session_id, "status": out.status}
    if out.error is not None:
        return ToolResult(call_id=call.id, name=call.name, content=f"Error: {out.error}", is_error=True, metadata=meta)
    meta.update(untrusted=True, provenance=out.provenance)
    if out.output is not None:
        meta["output"] = out.output if isinstance(out.output, (dict, list, str, int, float, bool)) else json.loads(out.answer)
    return ToolResult(call_id=call.id, name=call.name, content=wrap(out.agent, out.answer), metadata=meta)
