"""clawkit-policy: capabilities, approvals and the audit ledger.

* Deny by default; each listed tool acts within its default scope (the workspace,
  public hosts) unless a :class:`Grant` widens it (see :mod:`clawkit_policy.gate`).
* Risk drives approval: ``safe`` runs, ``guarded`` asks once per session for the
  exact call (a hash of name + canonical arguments, with an expiry), ``unsafe``
  asks every time; ``/elevated`` (session ``elevated_until``) auto-approves within
  scope.
* Every decision, approval, execution, and every ``tool.*``, ``shield.*``, ``subagent.*``,
  ``sequence.*``, ``approval.*``, ``directive.*`` and ``provenance.*`` event goes to the hash-chained
  :class:`AuditLedger`, secrets redacted. ``clawkit audit verify|list`` reads it.

Public API: :class:`AuditLedger`, :class:`Grant`, :class:`PolicyConfig`,
:func:`grant`, :func:`ledger_for`, the approvers (:func:`terminal_approver`,
:func:`callback_approver`, :func:`deny_approver`) and :func:`redact`.
"""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from clawkit import hook_order, hookimpl, on_events

from .redact import redact, redact_text

if TYPE_CHECKING:
    from .approvers import ApprovalTimeout, callback_approver, deny_approver, make_terminal_approver, terminal_approver
    from .config import Grant, PolicyConfig
    from .gate import Pending, Turn, config, decide, prepare, record, submit_record
    from .ledger import AuditLedger, Verification
    from .state import PolicyState
    from .writer import LedgerWriter

# ``clawkit --help`` imports every plugin: pydantic, asyncio (approvers) and the gate load
# on first use instead (see :func:`_load`). name -> submodule
_LAZY = {
    **dict.fromkeys(("ApprovalTimeout", "callback_approver", "deny_approver", "make_terminal_approver",
                     "terminal_approver"), ".approvers"),
    **dict.fromkeys(("Grant", "PolicyConfig"), ".config"),
    **dict.fromkeys(("Pending", "Turn", "config", "decide", "prepare", "record", "submit_record"), ".gate"),
    **dict.fromkeys(("AuditLedger", "Verification"), ".ledger"),
    "PolicyState": ".state",
    "LedgerWriter": ".writer",
}
_loaded = False


def _load() -> None:
    """Import the policy's modules into this module's globals (once). Names already set
    (``monkeypatch.setattr(clawkit_policy, ...)``) are kept; submodules the import system
    bound under the same name are replaced by the imported attribute."""
    global _loaded
    if _loaded:
        return
    from importlib import import_module
    from types import ModuleType

    g = globals()
    for name, module in _LAZY.items():
        current = g.get(name)
        if current is not None and not isinstance(current, ModuleType):
            continue
        g[name] = getattr(import_module(module, __name__), name)
    _loaded = True


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AuditLedger", "Verification", "Grant", "PolicyConfig", "PolicyState", "grant", "ledger_for", "redact",
    "redact_text", "terminal_approver", "make_terminal_approver", "callback_approver", "deny_approver",
    "ApprovalTimeout", "AUDITED_PREFIXES",
]

#: Event types the ledger records.
AUDITED_PREFIXES = ("tool.", "shield.", "sequence.", "approval.", "directive.", "subagent.", "provenance.",
                    "mcp.tool_change")
_LIMIT = 4096

_ledgers: "weakref.WeakKeyDictionary[Any, tuple[LedgerWriter, PolicyState]]" = weakref.WeakKeyDictionary()
_sessions: "OrderedDict[str, Turn]" = OrderedDict()
_pending: dict[tuple[str, str], Pending] = {}


def ledger_for(store: Any) -> AuditLedger:
    """The audit ledger of a :class:`clawkit.sessions.SessionStore` or of a sqlite3 connection.

    For a store, records the policy has queued are committed first.
    """
    _load()
    if hasattr(store, "conn"):
        writer = _ledgers.get(store)
        if writer is not None:
            writer[0].flush()
            writer[0].wait_durable()  # the anchor is current before anyone verifies
        return AuditLedger(store.conn)
    return AuditLedger(store)


def _none() -> None:
    return None


#: weak references to the last store looked up and its writer and state (nothing kept alive by this)
_last_store: tuple[Any, Any, Any] = (_none, _none, _none)


def _stores(store: Any, extra: list[str]) -> tuple[LedgerWriter, PolicyState]:
    global _last_store
    last = _last_store
    if last[0]() is store:  # the usual case: the store of the turn before (a WeakKeyDictionary lookup makes a weakref)
        writer, state = last[1](), last[2]()
        if writer is not None and state is not None:
            return writer, state
    found = _ledgers.get(store)
    if found is None:
        path = str(store.path) if getattr(store, "path", None) else None
        writer = LedgerWriter(store.conn, path, prepare(extra))
        found = (writer, PolicyState(store.conn, writer.sync.db))
        _ledgers[store] = found
    _last_store = (weakref.ref(store), weakref.ref(found[0]), weakref.ref(found[1]))
    return found


def _turn(ctx: Any) -> Turn:
    _load()
    turn = ctx.state.get("policy")
    if isinstance(turn, Turn):
        return turn
    cfg = config(ctx)
    writer, state = _stores(ctx.session.store, cfg.secret_env)
    grants = list(cfg.grants) + state.grants(ctx.agent.name)
    turn = Turn(cfg, writer if cfg.audit else None, state, str(ctx.workspace), grants, agent=ctx.agent.name,
                nested=getattr(ctx, "parent_run_id", None) is not None, resumed=ctx.session.id in _sessions)
    ctx.state["policy"] = turn
    if turn.resumed and turn.writer is not None:
        # a session that goes on (a chat): its first tool call waits for the last turn's records to be
        # durable (see writer.durable); their fsync starts now, not at the end of the group-commit window
        turn.writer.sync_soon(ctx.session.id)
    _sessions[ctx.session.id] = turn
    _sessions.move_to_end(ctx.session.id)
    while len(_sessions) > _LIMIT:
        _sessions.popitem(last=False)
    return turn


def grant(ctx: Any, new: Grant, *, persistent: bool = False) -> None:
    """Raise a grant at run time: for the rest of this run, or stored for the agent (``persistent``)."""
    turn = _turn(ctx)
    turn.add_run_grant(new)
    if persistent:
        turn.state.add_grant(ctx.agent.name, new)
    record(turn, "grant", {"session_id": ctx.session.id, "trace_id": ctx.trace_id, "task_id": ctx.task_id,
                           "run_id": ctx.run_id}, granted=new.model_dump(exclude_defaults=True),
           decision="persistent" if persistent else "run")


@hookimpl
def register_config(register):
    _load()
    register("policy", PolicyConfig)


@hookimpl(tryfirst=True)
@hook_order(10)
def message_received(ctx, message):
    # open the ledger before other plugins (directives) emit events this turn
    turn = _turn(ctx)
    store = ctx.session.store
    if getattr(store, "redact", False) is None:
        # transcripts and exports never hold a secret: every stored message and event is redacted
        extra = tuple(turn.cfg.secret_env)
        store.redact = lambda text: redact_text(text, extra)
        store.redact_value = lambda value: redact(value, extra, strict=True)  # (TypeError: the store scans the text)


@hookimpl(tryfirst=True)
@hook_order(20)
def before_tool_call(ctx, call):
    # any exception here blocks the call: the kernel fails closed
    turn = _turn(ctx)  # imports the gate on first use (see _load)
    if turn.writer is not None and turn.cfg.audit:
        synced = turn.writer.durable(ctx.session.id)
        if synced is not None:  # no new call of this session while its earlier records are not on disk (see writer)
            return _decide_when_durable(synced, turn, ctx, call)
    return decide(turn, ctx, call, _pending)


async def _decide_when_durable(synced: Any, turn: Turn, ctx: Any, call: Any) -> Any:
    import asyncio

    await asyncio.wait_for(synced, 30.0)  # a disk that takes longer than this blocks the call
    return decide(turn, ctx, call, _pending)


@hookimpl(tryfirst=True)
@hook_order(10)
def after_tool_call(ctx, call, result):
    """Redact first; then record the execution and commit it. A result whose execution cannot be
    recorded is withheld (and the next gate call fails closed on the writer's error)."""
    turn = _turn(ctx)
    p = _pending.pop((ctx.session.id, call.id), None)
    if p is not None:
        p.narrow()  # a one-step grant ends with its call
    content = result.content or ""
    out = None
    if turn.cfg.redact_results:
        clean = redact_text(content, turn.cfg.secret_env)
        if clean is not content and clean != content:
            out = result.model_copy(update={"content": clean, "metadata": {**result.metadata, "redacted": True}})
    if (turn.cfg.trusted_paths or turn.cfg.trusted_commands) and not result.is_error:
        from .gate import trusted_read

        if trusted_read(turn, call, ctx.tools.get(call.name) if ctx.tools is not None else None):  # the user vouches for these files: the kernel does not mark the session
            base = out or result
            out = base.model_copy(update={"metadata": {**base.metadata, "provenance": {
                "trusted": True, "why": "plugins.policy.trusted_paths / trusted_commands"}}})
    try:
        _record_execution(turn, ctx, call, result, p, content)
        if turn.writer is not None and turn.cfg.audit:
            if turn.writer.path is not None and _loop_running():
                # committed with every record the loop's other sessions queue meanwhile: one transaction for a
                # burst of tool calls; the result is held (awaited) until its record is committed
                return _when_flushed(turn, ctx, call, result, out)
            turn.writer.flush()
            _check_written(turn)
    except Exception as exc:
        return _withheld(ctx, call, result, exc)
    return out


def _loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _check_written(turn: Turn) -> None:
    if turn.writer.error is not None:
        raise RuntimeError(f"the audit ledger cannot be written: {turn.writer.error}")


def _withheld(ctx: Any, call: Any, result: Any, exc: BaseException) -> Any:
    ctx.state["stop_turn"] = "Stopped: the audit ledger cannot be written, so no further tool calls can run."
    return result.model_copy(update={
        "content": f"Error: the result of {call.name} was withheld because the audit ledger cannot record it "
                   f"({type(exc).__name__}); further tool calls are blocked.",
        "is_error": True, "metadata": {**result.metadata, "withheld": True}})


async def _when_flushed(turn: Turn, ctx: Any, call: Any, result: Any, out: Any) -> Any:
    """``after_tool_call``'s answer once the execution record is committed (see ``LedgerWriter.flush_soon``);
    the result withheld when it cannot be."""
    try:
        await turn.writer.flush_soon()
        _check_written(turn)
    except Exception as exc:
        return _withheld(ctx, call, result, exc)
    return out


def _record_execution(turn: Turn, ctx: Any, call: Any, result: Any, p: Pending | None, content: str) -> None:
    now = time.time()
    ids = p.ids if p else {"session_id": ctx.session.id, "trace_id": ctx.trace_id, "task_id": ctx.task_id,
                           "run_id": ctx.run_id, "step_id": call.id, "tool": call.name}
    if p is None or p.risk.value != "safe":
        turn.forget_paths()  # a write or a command may have moved symlinks: resolve paths afresh
    if p is not None and p.call_hash:
        digest = p.call_hash
    else:
        from .scope import call_hash

        digest = call_hash(call.name, call.arguments)
    # the result's length and SHA-256 are computed when the record is written (``content``)
    record(
        turn, "execution", ids, call_hash=digest,
        decision="executed", started=(p.started or p.decided) if p else None, ended=now,
        status="error" if result.is_error else "ok", error=content[:500] if result.is_error else None,
        content=content,
    )


@hookimpl
def agent_closing(agent):
    """Commit queued audit records and join the writer thread (it restarts on demand if
    another agent in the process records more)."""
    from .writer import close_all

    close_all()


@hookimpl
@on_events("turn.end", "turn.stopped", "tool.*", "shield.*", "sequence.*", "approval.*", "directive.*", "subagent.*",
           "provenance.*", "mcp.tool_change*")  # literal: the kernel reads it from the source (AUDITED_PREFIXES)
def on_event(event):
    if event.session_id is None:
        return
    if event.type in ("turn.end", "turn.stopped"):
        turn = _sessions.get(event.session_id)
        if turn is not None and turn.writer is not None and not turn.nested:
            # the turn's records are committed before its reply goes out (on disk soon after: see writer). A
            # sub-agent's reply goes to its parent's tool call, whose after_tool_call commits them (the writer
            # is the store's, shared by the tree): one commit and one fsync less per delegation. Records other
            # sessions queued meanwhile are left to the next flush (one transaction for more of them)
            turn.writer.flush_through(turn.last_record)
        return
    if not event.type.startswith(AUDITED_PREFIXES):
        return
    turn = _sessions.get(event.session_id)
    if turn is None:
        return
    data = dict(event.data)
    call_id = data.get("call_id")
    p = _pending.get((event.session_id, call_id)) if call_id else None
    # the pending call's ids as they are (never changed: each record is a new dict built from them)
    ids = p.ids if p else {"session_id": event.session_id, "trace_id": data.get("trace_id"),
                           "task_id": data.get("task_id"), "run_id": event.run_id, "step_id": call_id,
                           "tool": data.get("tool")}
    if event.type == "tool.approval" and p is not None:
        _approval(turn, p, data, ids, event.ts)
        return
    if event.type == "tool.blocked" and p is not None:
        _pending.pop((event.session_id, call_id), None)
    submit_record(turn, "event", {**ids, "decision": event.type, "reason": str(data.get("reason") or "") or None,
                                  "data": data, "ts": event.ts})


def _approval(turn: Turn, p: Pending, data: dict[str, Any], ids: dict[str, Any], ts: float) -> None:
    from .gate import approval_key
    from .scope import call_hash

    approved, by = bool(data.get("approved")), str(data.get("by") or "")
    digest = call_hash(p.call.name, p.call.arguments)
    shown = data.get("call_hash")
    approver = data.get("approver") if isinstance(data.get("approver"), dict) else {}
    extra: dict[str, Any] = {"approver": approver} if approver else {}
    if shown and shown != digest:  # an approver that showed a hash of its own: an auditor sees both
        extra["shown_call_hash"] = shown
    # who answered (terminal user, API key id and name, callback) is inside the chained record: verify covers it
    record(turn, "approval", ids, call_hash=digest, decision=event_name(approved),
           reason=data.get("reason"), approval_required=True, approval_result="approved" if approved else "denied",
           approval_by=by, data=extra or None, ts=ts)
    if not approved:
        _pending.pop((ids["session_id"], p.call.id), None)
        return
    p.started = time.time()
    p.widen()  # a step grant reaches the tool only now, after the approval
    cfg = turn.cfg
    if p.asked and p.risk.value == "guarded":
        turn.add_approval(ids["session_id"], approval_key(cfg, p.call), p.call.name, by, cfg.approval_ttl)
    if p.step_grant and cfg.step_grant_scope != "step":
        new = Grant(tools=[p.call.name], paths=p.step_grant["paths"], hosts=p.step_grant["hosts"],
                    reason=f"approved by {by}")
        turn.add_run_grant(new)
        if cfg.step_grant_scope == "persistent":
            turn.state.add_grant(turn.agent, new)
        record(turn, "grant", ids, granted=new.model_dump(exclude_defaults=True), decision=cfg.step_grant_scope)


def event_name(approved: bool) -> str:
    return "approved" if approved else "denied"


@hookimpl
def register_commands(cli):
    from .cli import register

    register(cli)


@hookimpl
def register_approvers(register):
    # replaces the kernel's plain "terminal" prompt: a timeout and redacted arguments
    from .approvers import terminal_approver

    register("terminal", terminal_approver)


@hookimpl
def forget_sessions(store, session_ids):
    """The sessions' approvals go with them. The audit ledger (``policy_audit``) is kept by design:
    it is hash-chained and tamper-evident, so deleting a row would break the chain (docs/forget.md
    says exactly what its rows retain)."""
    from clawkit.forget import delete_keyed

    for sid in session_ids:  # this process's record of the session's last turn (its approvals, grants)
        _sessions.pop(sid, None)
        for key in [k for k in _pending if k[0] == sid]:
            _pending.pop(key, None)
    from .redact import clear_memo

    clear_memo()  # the recent texts redaction found clean may be theirs
    return {"approvals": delete_keyed(store.conn, "policy_approvals", "session_id", session_ids)}
