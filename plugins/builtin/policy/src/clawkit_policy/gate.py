"""The policy gate: one decision per tool call, recorded before anything runs.

Order of the rules (the first that applies decides):

1. a tool the agent does not list → block (deny by default);
2. a path under /dev, /proc, /sys, or an unreadable URL → block;
3. a resource beyond the tool's default scope and every grant → ask for a one-step
   grant (or block when ``step_grants`` is off) — ``/elevated`` does not skip this;
4. the session holds untrusted content (:mod:`clawkit.provenance`: a tool result, a web page, a
   workspace file outside ``trusted_paths``, an MCP description, a child's answer — or a scanner's
   ``tainted`` alarm) and the call can move data off the machine or change what runs next (a
   host, an ``egress_tools`` name, a command — unless a confined tool's sandbox has no network)
   → ask, every time, whatever its risk, grants, pre-approved patterns or ``/elevated``; the
   reason names the sources ("after reading `notes.txt` (untrusted file via read_file)");
4b. ``safe`` → allow;
5. a ``shell_exec`` command matching a granted command pattern → allow (pre-approved);
6. the session is elevated (the directives plugin's ``ctx.state["elevated_until"]`` in the future) → allow;
7. ``guarded`` → allow if this exact call (or, with ``guarded_approval: tool``, this
   tool) was approved in this session and the approval has not expired; else ask;
8. ``unsafe`` → ask, every time.
"""

from __future__ import annotations

import fnmatch
import glob as globmod
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from clawkit import provenance
from clawkit.types import Decision, Risk, ToolCall

from . import scope
from .config import Grant, PolicyConfig
from .ledger import Canonical, canonical
from .redact import redact, screened_clean
from .state import PolicyState
from .writer import LedgerWriter

_DEFAULT = PolicyConfig()


@dataclass
class Turn:
    """Per-turn policy context, cached in ``ctx.state["policy"]``."""

    cfg: PolicyConfig
    writer: LedgerWriter | None
    state: PolicyState
    workspace: str
    grants: list[Grant]
    agent: str = ""
    nested: bool = False  # a sub-agent's run (its parent's tool call commits its records)
    resumed: bool = False  # the session had an earlier turn in this process (a chat goes on)
    last_record: int = 0  # the number of the last record this turn queued (LedgerWriter.submit)
    run_grants: list[Grant] = field(default_factory=list)
    _ws: str | None = field(default=None, repr=False)  # the workspace's real path, once this turn needs it
    _by_tool: dict[str, list] = field(default_factory=dict)
    _risk: dict[str, Any] = field(default_factory=dict)
    _paths: dict[str, str] = field(default_factory=dict)
    _approvals: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)

    @property
    def ws_real(self) -> str:
        """The workspace's real path, resolved once per turn when the turn first needs it (a tool call):
        a turn without one makes no system call for it."""
        ws = self._ws
        if ws is None:
            ws = self._ws = workspace_real(self.workspace)
        return ws

    def real_path(self, raw: str) -> str:
        """``raw`` resolved against the workspace (symlinks, ``..``, ``~``) afresh at every call: a
        symlink swapped in later in the turn (by a shell command, another process) is seen."""
        return scope.real_path(raw, self.ws_real)

    def forget_paths(self) -> None:
        self._paths.clear()

    def approval(self, session_id: str, key: str, now: float) -> dict[str, Any] | None:
        """A still-valid stored approval of ``key``. What was found is remembered for the turn (an approval
        until it expires; its absence until :meth:`add_approval` — at worst the user is asked again)."""
        if (session_id, key) in self._approvals:
            found = self._approvals[(session_id, key)]
            if found is None or found["expires"] > now:
                return found
        found = self._approvals[(session_id, key)] = self.state.approval(session_id, key)
        return found

    def add_approval(self, session_id: str, key: str, tool: str, by: str, ttl: float) -> None:
        """Store an approval (and forget what this turn remembered about ``key``)."""
        self.state.add_approval(session_id, key, tool, by, ttl)
        self._approvals.pop((session_id, key), None)

    def all_grants(self) -> list[Grant]:
        return self.grants + self.run_grants

    def add_run_grant(self, grant: Grant) -> None:
        self.run_grants.append(grant)
        self._by_tool.clear()

    def grants_for(self, tool: str) -> list:
        found = self._by_tool.get(tool)
        if found is None:
            grants = self.all_grants()  # (no grant at all: no need for the workspace's real path)
            found = self._by_tool[tool] = scope.applicable(grants, tool, self.ws_real) if grants else []
        return found


@dataclass
class Pending:
    """A call the gate let through (possibly pending approval), until it ends."""

    call: ToolCall
    risk: Risk
    decided: float
    asked: bool
    turn: Turn
    ids: dict[str, Any]
    step_grant: dict[str, list[str]] | None = None
    started: float | None = None
    call_hash: str | None = None
    #: the turn's ``ctx.state["granted"][tool]`` and what an approved step grant adds to it
    slot: dict[str, list[str]] | None = None
    slot_add: dict[str, list[str]] | None = None

    def widen(self) -> None:
        """The step grant was approved: the tool may reach its resources (for this call)."""
        if self.slot is not None and self.slot_add:
            for key, values in self.slot_add.items():
                self.slot[key].extend(v for v in values if v not in self.slot[key])

    def narrow(self) -> None:
        """The call is over: a one-step grant ends with it."""
        if self.slot is not None and self.slot_add:
            for key, values in self.slot_add.items():
                for v in values:
                    if v in self.slot[key]:
                        self.slot[key].remove(v)


_ws_real: dict[str, tuple[str, tuple[int, int]]] = {}


def workspace_real(workspace: str) -> str:
    """``os.path.realpath(workspace)``, remembered while the workspace and the remembered real path are
    still the same directory (device and inode): two ``stat`` calls a turn instead of a walk of every
    path component. A workspace (or a directory on its path) replaced or re-pointed is resolved again."""
    found = _ws_real.get(workspace)
    if found is not None:
        try:  # (a workspace that is its own real path: one stat)
            now = os.stat(workspace)
            then = now if found[0] == workspace else os.stat(found[0])
        except OSError:
            pass
        else:
            if (now.st_dev, now.st_ino) == found[1] == (then.st_dev, then.st_ino):
                return found[0]
    real = os.path.realpath(workspace)
    try:
        st = os.stat(real)
    except OSError:  # not there (yet): nothing to remember
        _ws_real.pop(workspace, None)
        return real
    if len(_ws_real) >= 256:
        _ws_real.clear()
    _ws_real[workspace] = (real, (st.st_dev, st.st_ino))
    return real


def config(ctx: Any) -> PolicyConfig:
    try:
        cfg = ctx.plugin_config("policy")
    except Exception:
        cfg = None
    return cfg if isinstance(cfg, PolicyConfig) else _DEFAULT


#: per config object (the last one seen, per kind): answers that depend on the config and a tool name only
_per_config: dict[str, tuple[Any, dict[Any, Any]]] = {}


def _config_memo(kind: str, cfg: Any) -> dict[Any, Any]:
    hit = _per_config.get(kind)
    if hit is None or hit[0] is not cfg or len(hit[1]) > 512:
        hit = _per_config[kind] = (cfg, {})
    return hit[1]


def risk_of(cfg: PolicyConfig, name: str, default: Risk) -> Risk:
    """The tool's risk, ``cfg.risk``'s first matching glob first (remembered per config, tool and patterns)."""
    memo = _config_memo("risk", cfg)
    key = (name, default, tuple(cfg.risk.items()))
    found = memo.get(key)
    if found is None:
        found = memo[key] = _risk_of(cfg.risk, name, default)
    return found


def _risk_of(risks: dict[str, Any], name: str, default: Risk) -> Risk:
    for pattern, level in risks.items():
        if fnmatch.fnmatchcase(name, pattern):
            return Risk(level)
    return Risk(default)


def _egress_named(cfg: PolicyConfig, name: str) -> bool:
    """``name`` matches a glob of ``egress_tools`` (remembered per config, tool and patterns)."""
    memo = _config_memo("egress", cfg)
    key = (name, tuple(cfg.egress_tools))
    found = memo.get(key)
    if found is None:
        found = memo[key] = any(fnmatch.fnmatchcase(name, p) for p in key[1])
    return found


def elevated_until(ctx: Any) -> float | None:
    """The elevation the directives plugin vouched for this turn (``ctx.state["elevated_until"]``), never
    the raw session metadata: without that plugin, or once ``allow_elevated`` is revoked, nothing is elevated."""
    try:
        until = float(ctx.state.get("elevated_until") or 0)
    except (TypeError, ValueError, AttributeError):
        return None
    return until if until > time.time() else None


def _untrusted(cfg: PolicyConfig, session: Any) -> bool:
    try:
        if cfg.untrusted_egress == "alarm-only":
            return bool(session.get("tainted"))
        return provenance.is_untrusted(session)
    except Exception:
        return True  # unreadable session state: assume the worst


def _alarm(session: Any) -> bool:
    try:
        return bool(session.get("tainted"))
    except Exception:
        return True


def _egress(cfg: PolicyConfig, ctx: Any, name: str, req: scope.Requested) -> str | None:
    """Why this call can move data off the machine or change what runs next (None: it cannot).

    A call naming a host, a tool matching ``egress_tools``, or any call naming a command — except a
    tool that runs its processes through the sandbox (``ToolDef.confined``) when the sandbox says they
    would be jailed with no network (``process_confinement``): a jailed, network-less command cannot
    send anything anywhere, which keeps coding in an untrusted session usable. Once a scanner has
    *detected* an injection (the ``tainted`` alarm) that exemption ends: a command steered by it could
    still change the workspace that later runs read. A tool that hands its work to a session starting
    with this one's provenance and alarm (``ToolDef.inherits_provenance``: a sub-agent, whose own egress
    is then asked for) is not egress by its name alone."""
    if req.hosts:
        return "names a host (" + ", ".join(h for h, _ in req.hosts[:3]) + ")"
    named = _egress_named(cfg, name)
    if not (named or req.commands):
        return None
    tool = ctx.tools.get(name) if ctx.tools is not None else None
    if tool is not None and getattr(tool.definition, "inherits_provenance", False) and not req.commands:
        return None  # a hand-over to a session that starts with this one's provenance: its own calls are asked
    if tool is not None and getattr(tool.definition, "confined", False) and not _alarm(ctx.session):
        from clawkit.process import confinement

        jail = confinement(ctx, tool)
        if jail["confined"] and not jail["network"]:
            return None
        return f"runs a command that can reach the network ({jail['why']})"
    if req.commands:
        return "runs a command outside any sandbox"
    return "can send data off the machine or start work elsewhere"


def _covered(turn: "Turn", real: str) -> bool:
    """``real`` is under ``trusted_paths`` (a directory: everything in it is, ``src`` for ``src/**``)."""
    pats = [scope.grant_path(p, turn.ws_real) for p in turn.cfg.trusted_paths]
    if any(scope.pattern_covers(p, real) for p in pats):
        return True
    return os.path.isdir(real) and any(scope.pattern_covers(p, real.rstrip("/") + "/") for p in pats)


def trusted_path(turn: "Turn", raw: str) -> bool:
    """Whether ``raw`` (resolved like every path the gate sees) is under the user's ``trusted_paths``."""
    return bool(turn.cfg.trusted_paths) and _covered(turn, turn.real_path(raw))


def with_path_defaults(call: ToolCall, tool: Any) -> dict[str, Any]:
    """The call's arguments plus the schema defaults of path arguments it left out (``glob``'s
    ``path: "."``): what the tool actually reads."""
    args = dict(call.arguments)
    props = (getattr(getattr(tool, "definition", None), "parameters", None) or {}).get("properties") or {}
    for key, prop in props.items():
        if key not in args and key.lower() in scope.PATH_ARGS and isinstance(prop, dict) \
                and isinstance(prop.get("default"), str) and prop["default"]:
            args[key] = prop["default"]
    return args


def trusted_read(turn: "Turn", call: ToolCall, tool: Any = None) -> bool:
    """A call whose output the user vouches for: it names only paths (no host, no command), every one of
    them under ``trusted_paths``; or it runs only command lines matching ``trusted_commands`` (no shell
    operators, no path outside the workspace), its paths (a ``cwd``) trusted too."""
    cfg = turn.cfg
    if not (cfg.trusted_paths or cfg.trusted_commands):
        return False
    req = scope.requested(with_path_defaults(call, tool), turn.ws_real, turn.real_path)
    if req.hosts or req.problems:
        return False
    if req.commands:
        for line in req.commands:
            if any(op in line for op in scope.SHELL_OPERATORS) or scope.outside_paths(line, turn.ws_real):
                return False
            if not any(fnmatch.fnmatchcase(line, p) for p in cfg.trusted_commands):
                return False
        return all(real == turn.ws_real or _covered(turn, real) for real in req.paths)
    if not req.paths or not cfg.trusted_paths:
        return False
    return all(_covered(turn, real) for real in req.paths)


def mark_prompt_content(turn: "Turn", ctx: Any) -> None:
    """Untrusted text other plugins put into this turn's prompt (``ctx.state["untrusted_content"]``:
    project files…) marks the session, unless it comes from a trusted path. Once per entry."""
    entries = ctx.state.get("untrusted_content")
    if not entries:
        return
    seen = ctx.state.setdefault("policy.prompt_marked", set())
    for entry in list(entries):
        if not isinstance(entry, dict):
            continue
        source = str(entry.get("source") or "prompt content")
        path = entry.get("path")
        if (source, path) in seen:
            continue
        seen.add((source, path))
        if isinstance(path, str) and path and trusted_path(turn, path):
            continue
        kind = "project-file" if source.startswith("project file") else str(entry.get("kind") or "prompt")
        detail = os.path.relpath(path, turn.workspace) if isinstance(path, str) and path else source
        if provenance.mark_once(ctx.session, source=source, detail=detail, kind=kind):
            ctx.emit("provenance.untrusted", source=source, kind=kind, detail=detail,
                     reason=provenance.describe(ctx.session))


def approval_key(cfg: PolicyConfig, call: ToolCall) -> str:
    if cfg.guarded_approval == "tool":
        return "tool:" + call.name
    return scope.call_hash(call.name, call.arguments)


def _exact(value: str) -> str:
    return globmod.escape(value)


_JSON_FIELDS = ("arguments", "data", "requested", "granted")
_TEXT_FIELDS = ("reason", "error")


def prepare(extra: list[str]):
    """Turn queued fields into a ledger record, when it is written (off the gate's path).

    The JSON columns are serialised once; a single screening pass over them and the text columns
    (:func:`~clawkit_policy.redact.may_hold_secrets`) decides whether the structural redaction
    has anything to do. ``content`` (a tool result) is reduced to its length and SHA-256 here.
    """

    def clean(fields: dict[str, Any]) -> dict[str, Any]:
        content = fields.pop("content", None)
        if content is not None:
            fields["data"] = {**(fields.get("data") or {}), "result_chars": len(content),
                              "result_sha256": hashlib.sha256(content.encode("utf-8", "replace")).hexdigest()}
        texts: dict[str, str] = {}
        for key in _JSON_FIELDS:
            value = fields.get(key)
            if value is not None:
                cls = value.__class__
                texts[key] = value if cls is Canonical else "{}" if cls is dict and not value else canonical(value)
        plain = [v if isinstance(v, str) else canonical(v) for v in map(fields.get, _TEXT_FIELDS) if v is not None]
        # each text screened on its own (redact works value by value), a text screened clean recently not again
        if not screened_clean((*texts.values(), *plain), extra):
            for key in _JSON_FIELDS + _TEXT_FIELDS:
                value = fields.get(key)
                if value is not None:  # (a column given as canonical text is redacted value by value too)
                    fields[key] = redact(json.loads(value) if value.__class__ is Canonical else value, extra)
            return fields
        for key, text in texts.items():
            fields[key] = Canonical(text)
        return fields

    return clean


#: what a call that names no path, host or command asks of the scope: nothing (read only)
_NOTHING = scope.Evaluation()
_NOTHING_ASKED: dict[Risk, Canonical] = {}


def _asked_nothing(risk: Risk) -> Canonical:
    """The ``requested`` column of a call that names no resource: one canonical text per risk level."""
    found = _NOTHING_ASKED.get(risk)
    if found is None:
        found = _NOTHING_ASKED[risk] = Canonical(canonical({**scope.Requested().as_dict(), "risk": risk.value}))
    return found


def record(turn: Turn, kind: str, ids: dict[str, Any], **fields: Any) -> None:
    submit_record(turn, kind, {**ids, **fields})


def submit_record(turn: Turn, kind: str, fields: dict[str, Any]) -> None:
    """Queue an audit record of ``fields`` (ids included; the dict is the writer's from now on)."""
    if turn.writer is not None and turn.cfg.audit:
        turn.last_record = turn.writer.submit(kind, fields)


def decide(turn: Turn, ctx: Any, call: ToolCall, pending: dict[tuple[str, str], Pending]) -> Decision | None:
    """Evaluate ``call``; record the decision; return what ``before_tool_call`` returns."""
    cfg = turn.cfg
    now = time.time()
    ids = {"session_id": ctx.session.id, "trace_id": ctx.trace_id, "task_id": ctx.task_id, "run_id": ctx.run_id,
           "step_id": call.id, "tool": call.name}
    digest = scope.call_hash(call.name, call.arguments)
    arguments = dict(call.arguments)  # as decided (a later hook may rewrite the call's)

    slot_add: dict[str, list[str]] = {}

    def done(action: str, reason: str, risk: Risk | None = None, asked: bool = False, **extra: Any) -> Decision | None:
        submit_record(turn, "decision", {**ids, "arguments": arguments, "call_hash": digest, "decision": action,
                                          "reason": reason, "approval_required": asked, **extra})
        if action == "block":
            return Decision(action="block", reason=reason)
        granted = extra.get("granted")
        pending[(ctx.session.id, call.id)] = Pending(call, risk or Risk.SAFE, now, asked, turn, ids,
                                                     step_grant=granted.get("step") if granted else None,
                                                     started=None if asked else now, call_hash=digest,
                                                     slot=slot, slot_add=slot_add or None)
        return Decision(action="require_approval", reason=reason) if asked else None

    risk = turn._risk.get(call.name)
    if risk is None:  # the tool set and allowlist are fixed for the turn: look up once
        tool = ctx.tools.get(call.name) if ctx.tools is not None else None
        risk = turn._risk[call.name] = False if tool is None else risk_of(cfg, call.name, tool.definition.risk)
    if risk is False:
        return done("block", f"{call.name} is not in this agent's tool list (deny by default)")
    # the workspace's real path costs a stat (a system call gives the GIL away): resolved only for a call that
    # names a path or a command, or a tool some grant names (paths resolve through turn.real_path)
    req = scope.requested(call.arguments, turn.workspace, turn.real_path)
    grants = turn.grants_for(call.name)
    asks = req.paths or req.hosts or req.commands
    ev = scope.evaluate(req, grants, turn.ws_real if req.paths or req.commands else turn.workspace) if asks else _NOTHING
    slot = ctx.state.setdefault("granted", {}).setdefault(call.name, {"paths": [], "hosts": [], "commands": []})
    for _, g, paths in grants:
        for key, values in (("paths", paths), ("hosts", g.hosts), ("commands", g.commands)):
            slot[key].extend(v for v in values if v not in slot[key])
        if g.access == "ro":  # a sandbox mounts these read-only
            slot.setdefault("readonly", []).extend(v for v in paths if v not in slot["readonly"])
    used = {i: g for i, g, _ in grants if i in ev.used_grants}
    info = {"requested": {**req.as_dict(), "risk": risk.value} if asks or req.problems else _asked_nothing(risk),
            "granted": {"grants": [used[i].model_dump(exclude_defaults=True) for i in ev.used_grants]} if used else {}}
    if ev.forbidden or req.problems:
        return done("block", "refused: " + "; ".join(ev.forbidden + req.problems), risk, **info)
    if ev.missing:
        need = "; ".join(ev.missing)
        if not cfg.step_grants:
            return done("block", f"needs a capability grant: {need}", risk, **info)
        # widened only once approved (see Pending.widen), and only for this call
        for key, values in ev.step_grant.items():
            slot_add[key] = [_exact(v) for v in values if _exact(v) not in slot[key]]
        info["granted"] = {**info["granted"], "step": ev.step_grant}
        return done("require_approval", f"needs a capability beyond its scope: {need}; approving grants it for this step",
                    risk, asked=True, **info)
    mark_prompt_content(turn, ctx)
    if _untrusted(cfg, ctx.session):
        why = _egress(cfg, ctx, call.name, req)
        if why is not None:
            said = provenance.describe(ctx.session) or "after untrusted content entered the session"
            return done("require_approval", f"{said}: {call.name} ({risk.value}) {why}, so it needs approval while the session holds "
                        "untrusted content (elevation and command grants do not apply)", risk, asked=True, **info)
    if risk == Risk.SAFE:
        return done("allow", "safe tool within its scope", risk, **info)
    if ev.preapproved:
        return done("allow", "command pre-approved by a grant", risk, **info)
    until = elevated_until(ctx)
    if until is not None:
        return done("allow", f"elevated until {time.strftime('%H:%M:%S', time.localtime(until))}", risk, **info)
    if risk == Risk.GUARDED:
        prior = turn.approval(ctx.session.id, digest if cfg.guarded_approval == "call" else "tool:" + call.name, now)
        if prior is not None:
            return done("allow", f"approved earlier in this session by {prior['by']}", risk, **info)
        what = "this exact call" if cfg.guarded_approval == "call" else f"{call.name}"
        return done("require_approval", f"{call.name} is guarded: approval needed once per session for {what}",
                    risk, asked=True, **info)
    return done("require_approval", f"{call.name} is unsafe: approval needed every time", risk, asked=True, **info)
