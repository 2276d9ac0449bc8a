"""The sequence rules' implementation: config, the call history table, check and record.

The entry point names this module: the kernel reads its ``@hookimpl`` functions from the source
and imports it on the first hook call, so ``clawkit --help`` loads no pydantic.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import time
import weakref
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit import hook_order, hookimpl
from clawkit.storage import POSTGRESQL, Column, Index, Table, declare, dialect
from clawkit.types import Decision, ToolCall, ToolResult

from . import directives as tool_directives
from .directives import DirectivesConfig
from .guidance import USED_KEY, Checkpoint, checkpoint_tools, tool_notes

NAME = "sequence"
TABLE = "sequence_calls"
PATH_ARGS = {"path", "file", "file_path", "filepath", "filename", "directory", "dir", "cwd", "target", "source", "dest", "destination"}
TABLES = (Table(TABLE, (
    Column("id", "integer", autoincrement=True), Column("session_id", nullable=False), Column("call_key", nullable=False),
    Column("tool", nullable=False), Column("arg", nullable=False), Column("value", nullable=False), Column("call_id"),
    Column("ts", "real", nullable=False),
), indexes=(Index(f"{TABLE}_lookup", ("session_id", "tool", "arg", "value", "call_key"), unique=True),)),)


class SequenceRule(BaseModel):
    """``tool`` may run only after every tool in ``requires`` (or any, with ``mode: any``) ran in this session."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(description="tool name (glob) the rule guards")
    requires: list[str] = Field(min_length=1, description="tools (globs) that must have run successfully first")
    match: str | list[str] | dict[str, str] | None = Field(
        None, description="argument(s) that must be equal in the prerequisite call; a mapping pairs this tool's argument with the prerequisite's"
    )
    mode: Literal["all", "any"] = Field("all", description="all prerequisites, or any one of them")
    message: str = Field("", description="what the model is told when blocked; {argument} placeholders are filled in")
    existing_only: bool = Field(False, description="skip the rule when the matched path does not exist yet (new files)")
    elevated_bypass: bool = Field(True, description="/elevated lets a blocked call through")
    enforce: bool = Field(True, description="false: advisory only — report a sequence.violation event, never block")

    @field_validator("match")
    @classmethod
    def _nonempty(cls, v: Any) -> Any:
        if v is not None and len(v) == 0:
            raise ValueError("match must name at least one argument (or be left out)")
        return v

    def pairs(self) -> list[tuple[str, str]]:
        """(this call's argument, the prerequisite call's argument) pairs."""
        if self.match is None:
            return []
        if isinstance(self.match, str):
            return [(self.match, self.match)]
        if isinstance(self.match, dict):
            return list(self.match.items())
        return [(a, a) for a in self.match]


class SequenceConfig(BaseModel):
    """The ``plugins.sequence`` section."""

    model_config = ConfigDict(extra="forbid")

    rules: list[SequenceRule] = Field(default_factory=list, description="prerequisite rules, checked in order")
    max_blocks: int = Field(2, ge=1, description="blocks of the same call in one turn before the model is told to stop")
    count_failed: bool = Field(False, description="whether a prerequisite call that returned an error counts")
    checkpoints: dict[str, Checkpoint] = Field(default_factory=dict, description="checkpoint tools (think_about_*): "
                                               "name -> {description, prompt}; offered to agents that list them")
    state_rules_in_prompt: bool = Field(True, description="state each rule next to the tool it governs in ## Tools")
    directives: DirectivesConfig = Field(default_factory=DirectivesConfig,
                                         description="tool-response __directives (requireBeforeNext, escalateToOwner)")


_DEFAULT = SequenceConfig()
_ready: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _config(ctx: Any) -> SequenceConfig:
    return ctx.plugin_config(NAME) or _DEFAULT


def _conn(store: Any):
    """The session store's connection, with this plugin's table created (once per store)."""
    if store not in _ready:
        declare(store.conn, *TABLES)
        _ready.add(store)
    return store.conn


def normalise(arg: str, value: Any, workspace: str) -> str:
    """Comparable form of an argument value: path-like arguments resolved against the workspace."""
    if isinstance(value, str):
        if arg.lower() in PATH_ARGS or arg.lower().endswith("_path"):
            p = os.path.expanduser(value)
            return os.path.realpath(p if os.path.isabs(p) else os.path.join(workspace, p))
        return value
    return json.dumps(value, sort_keys=True, default=str)


def glob_regex(pattern: str) -> str:
    """A GLOB pattern (``*``, ``?``, ``[...]``, case-sensitive) as an anchored POSIX regular expression."""
    out, i = ["^"], 0
    while i < len(pattern):
        c = pattern[i]
        close = pattern.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif close > 0:
            body = pattern[i + 1:close]
            out.append("[" + ("^" + body[1:] if body.startswith("^") else body) + "]")
            i = close
        else:
            out.append(c if c.isalnum() or c == "_" else "\\" + c)
        i += 1
    return "".join(out) + "$"


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _elevated(ctx: Any) -> bool:
    """Only the elevation the directives plugin vouched for this turn (``ctx.state``), not raw session metadata."""
    try:
        return float(ctx.state.get("elevated_until") or 0) > time.time()
    except (TypeError, ValueError, AttributeError):
        return False


class SequenceHistory:
    """Successful calls of prerequisite tools in one session store (queried, never cached)."""

    def __init__(self, store: Any):
        self.conn = _conn(store)
        queue, flush = getattr(store, "queue", None), getattr(store, "flush", None)
        # the store's queue when it has one: a record rides the turn's next commit instead of a write
        # of its own on the tool path; the first read here flushes it (a check never misses a record)
        self._queue, self._flush = (queue, flush) if callable(queue) and callable(flush) else (None, None)

    def record(self, session_id: str, call_id: str, tool: str, values: dict[str, str]) -> None:
        """Remember one call; the same tool with the same values is stored once (first call id kept)."""
        key = hashlib.sha256(json.dumps([tool, sorted(values.items())]).encode()).hexdigest()[:24]
        now = time.time()
        rows = [(session_id, key, tool, "", "", call_id, now)] + [(session_id, key, tool, a, v, call_id, now) for a, v in values.items()]
        placeholders = ",".join(["(?,?,?,?,?,?,?)"] * len(rows))
        # one statement: the rows of a call land together or not at all
        sql = f"INSERT OR IGNORE INTO {TABLE} (session_id, call_key, tool, arg, value, call_id, ts) VALUES {placeholders}"
        params = tuple(x for r in rows for x in r)
        if self._queue is not None:
            self._queue(sql, params)
        else:
            self.conn.execute(sql, params)

    def seen(self, session_id: str, tool: str, wanted: dict[str, str]) -> bool:
        """Has a call of ``tool`` (a name or glob) with all ``wanted`` argument values run in this session?"""
        if self._flush is not None:
            self._flush()  # records queued by earlier calls of this turn
            self._flush = None
        op = "="
        if any(c in tool for c in "*?["):
            op = "GLOB"
            if dialect(self.conn) == POSTGRESQL:  # no GLOB there: the same pattern as a POSIX regex
                op, tool = "~", glob_regex(tool)
        if not wanted:
            row = self.conn.execute(
                f"SELECT 1 FROM {TABLE} WHERE session_id = ? AND tool {op} ? AND arg = '' LIMIT 1", (session_id, tool)
            ).fetchone()
            return row is not None
        if len(wanted) == 1:
            (a, v), = wanted.items()
            row = self.conn.execute(
                f"SELECT 1 FROM {TABLE} WHERE session_id = ? AND tool {op} ? AND arg = ? AND value = ? LIMIT 1", (session_id, tool, a, v)
            ).fetchone()
            return row is not None
        cond = " OR ".join(["(arg = ? AND value = ?)"] * len(wanted))
        args: list[Any] = [session_id, tool]
        for a, v in wanted.items():
            args += [a, v]
        row = self.conn.execute(
            f"SELECT call_key FROM {TABLE} WHERE session_id = ? AND tool {op} ? AND ({cond}) "
            f"GROUP BY call_key HAVING COUNT(DISTINCT arg) = ? LIMIT 1",
            args + [len(wanted)],
        ).fetchone()
        return row is not None


def check(ctx: Any, call: ToolCall, config: SequenceConfig) -> Decision | None:
    """The gate: the first violated enforcing rule blocks the call."""
    state = ctx.state.setdefault("sequence", {"blocks": {}, "halted": None})
    if state["halted"]:
        ctx.emit("sequence.blocked", tool=call.name, call_id=call.id, halted=True, message=state["halted"])
        return Decision.block(state["halted"])
    rules = [(i, r) for i, r in enumerate(config.rules) if fnmatch.fnmatchcase(call.name, r.tool)]
    if not rules:
        return None
    workspace = os.fspath(ctx.agent.workspace)
    history = SequenceHistory(ctx.session.store)
    for i, rule in rules:
        pairs = [(mine, theirs) for mine, theirs in rule.pairs() if call.arguments.get(mine) is not None]
        wanted = {theirs: normalise(mine, call.arguments[mine], workspace) for mine, theirs in pairs}
        if rule.existing_only and pairs and not os.path.exists(wanted[pairs[0][1]]):
            continue
        missing = [req for req in rule.requires if not history.seen(ctx.session.id, req, wanted)]
        violated = len(missing) == len(rule.requires) if rule.mode == "any" else bool(missing)
        if not violated:
            continue
        message = _message(rule, call, missing)
        if not rule.enforce:
            ctx.emit("sequence.violation", tool=call.name, call_id=call.id, rule=i, missing=missing, message=message)
            continue
        if rule.elevated_bypass and _elevated(ctx):
            ctx.emit("sequence.bypassed", tool=call.name, call_id=call.id, rule=i, missing=missing, reason="elevated")
            continue
        key = json.dumps([i, call.name, sorted(wanted.items())])
        count = state["blocks"].get(key, 0) + 1
        state["blocks"][key] = count
        ctx.emit("sequence.blocked", tool=call.name, call_id=call.id, rule=i, missing=missing, count=count, message=message)
        if count >= config.max_blocks:
            halt = (
                f"Stop: {call.name} was blocked {count} times by a sequence rule ({message}). "
                "Do not call tools again in this turn; tell the user what is needed instead."
            )
            state["halted"] = halt
            ctx.state["stop_turn"] = halt  # for a kernel that honours it; the halt blocks every later call meanwhile
            ctx.emit("sequence.stopped", tool=call.name, call_id=call.id, rule=i, count=count)
            return Decision.block(halt)
        return Decision.block(message)
    return None


def _message(rule: SequenceRule, call: ToolCall, missing: list[str]) -> str:
    if rule.message:
        values = _Defaults({k: v for k, v in call.arguments.items() if isinstance(v, (str, int, float))})
        values.setdefault("tool", call.name)
        values.setdefault("requires", ", ".join(missing))
        try:
            return rule.message.format_map(values)
        except (ValueError, IndexError, AttributeError):
            return rule.message
    same = f" with the same {', '.join(m for m, _ in rule.pairs())}" if rule.match else ""
    need = " or ".join(missing) if rule.mode == "any" else " and ".join(missing)
    return f"{call.name} needs {need}{same} to run first in this session; call it, then retry."


def record(ctx: Any, call: ToolCall, result: ToolResult, config: SequenceConfig) -> None:
    """Remember a successful call of any tool that some rule requires, with the arguments rules match on."""
    if result.is_error and not config.count_failed:
        return
    args: set[str] | None = None
    for rule in config.rules:
        if any(fnmatch.fnmatchcase(call.name, req) for req in rule.requires):
            args = (args or set()) | {theirs for _, theirs in rule.pairs()}
    if args is None:
        return
    workspace = os.fspath(ctx.agent.workspace)
    values = {a: normalise(a, call.arguments[a], workspace) for a in sorted(args) if call.arguments.get(a) is not None}
    SequenceHistory(ctx.session.store).record(ctx.session.id, call.id, call.name, values)


@hookimpl
def register_config(register):
    register(NAME, SequenceConfig)


@hookimpl
@hook_order(30)
def before_tool_call(ctx, call):
    """Block calls whose prerequisites have not run, or that a tool-response directive holds
    back (an error here blocks: the kernel fails closed)."""
    config = _config(ctx)
    if getattr(config, "enabled", True) is False:
        return None
    decision = tool_directives.before_tool_call(ctx, call) if config.directives.enabled else None
    if decision is not None and decision.action == "block":
        return decision
    ruled = check(ctx, call, config) if config.rules else None
    return ruled or decision


@hookimpl
@hook_order(40)
def after_tool_call(ctx, call, result):
    """Record prerequisite calls in the session database; a result's directives become session flags."""
    config = _config(ctx)
    if getattr(config, "enabled", True) is False:
        return None
    if config.rules:
        record(ctx, call, result, config)
    if config.checkpoints and not result.is_error:
        ctx.state.setdefault(USED_KEY, []).append(call.name)
    if config.directives.enabled and (result.metadata.get("directives") or ctx.session.get(tool_directives.META_KEY)):
        tool_directives.after_tool_call(ctx, call, result, config.directives)
    return None


@hookimpl
@hook_order(55)
def message_received(ctx, message):
    """Approach A: each rule stated next to the tool it governs (turn state ``tool_notes``)."""
    config = _config(ctx)
    if config.rules and config.state_rules_in_prompt and getattr(config, "enabled", True) is not False:
        tool_notes(ctx, config.rules)
    return None


@hookimpl
def register_tools(register, agent):
    """The configured checkpoint tools."""
    config = agent.plugin(NAME) if agent is not None else None
    if isinstance(config, dict):
        config = SequenceConfig.model_validate({k: v for k, v in config.items() if k != "enabled"})
    if isinstance(config, SequenceConfig) and config.checkpoints:
        checkpoint_tools(register, config.checkpoints)


@hookimpl
def forget_sessions(store, session_ids):
    """The sessions' recorded calls (what prerequisites were met) go with them."""
    from clawkit.forget import delete_keyed

    return {"calls": delete_keyed(store.conn, TABLE, "session_id", session_ids)}
