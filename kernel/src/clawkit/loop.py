"""The agent: built from its config (plugins, tools, providers, the session store), run for turns
(:mod:`clawkit.turnloop` runs them: message in → prompt → model (streamed) → gated tool calls → …
→ reply out), and closed."""

from __future__ import annotations

import asyncio
import atexit
import inspect
import logging
import time
import weakref
from pathlib import Path
from typing import Any, Awaitable, Callable

from .config import AgentConfig
from .context import TurnContext, emit_event
from .agent_model import Deliver, ModelSide
from .approvals import resolve_approver
from .errors import ConfigError
from .hooks import HookRunner
from .plugins import get_plugin_manager
from .providers import Provider, ProviderRegistry
from .sessions import Session, SessionStore, repair_interrupted
from .toolexec import ToolExecutor
from .turnloop import TurnResult, TurnSide  # noqa: F401  (TurnResult: importable from here too)
from .usage import add_usage as _add_usage  # noqa: F401  (kept importable here)
from .tools import ToolRegistry
from .types import Event, ToolCall

log = logging.getLogger("clawkit.loop")

Approver = Callable[[ToolCall, str, TurnContext], "Awaitable[bool] | bool"]
SESSION_CACHE = 64  # open sessions kept in memory; others are reloaded from SQLite
_OPEN: "weakref.WeakSet[Agent]" = weakref.WeakSet()


@atexit.register
def _close_open_agents() -> None:
    """An agent nobody closed is closed at interpreter exit, so plugins still join their
    threads before native runtimes are torn down (atexit runs before that)."""
    for agent in list(_OPEN):
        try:
            agent.close()
        except Exception:  # noqa: BLE001 - exiting anyway; one agent must not stop the others
            log.exception("closing agent %s at exit failed", agent.config.name)


class Agent(TurnSide, ModelSide):
    """A configured agent with its plugins, tools, provider and session store.

    ``provider`` overrides the one named in the config (tests pass a scripted one);
    ``approver`` answers approval requests: a callable, or the name of one registered
    through ``register_approvers`` (``"terminal"``); None denies (non-interactive runs).
    ``db`` is the session database when no ``store`` is given: a SQLite path or a
    ``postgresql://`` URL (default: the config's ``state_db``, else the workspace's file).

    Without YAML (docs/python-agents.md): ``Agent("openai/gpt-4o-mini", instructions=…,
    tools=[fn, "read_file"], limits={…}, policy={…})`` — every other keyword is a key of an
    agent file or an installed plugin's section, validated like the file (:mod:`clawkit.pyagent`).
    """

    def __init__(
        self,
        config: AgentConfig | str | dict | None = None,
        *,
        pm=None,
        provider: Provider | None = None,
        store: SessionStore | None = None,
        approver: Approver | None = None,
        persist: bool = True,
        channel: str = "cli",
        extra_plugins: tuple = (),
        db: str | Path | None = None,
        **settings: Any,
    ):
        if not isinstance(config, AgentConfig):  # the keyword form: an agent in plain Python
            from .pyagent import PythonTools, build_config

            config, code = build_config(config, settings, pm)
            extra_plugins = (*extra_plugins, PythonTools(code)) if code else extra_plugins
            if code and pm is not None:
                pm.register(extra_plugins[-1], name=PythonTools.name)
        elif settings:
            raise TypeError(f"Agent(config, …): unexpected keywords {sorted(settings)} (an AgentConfig holds the settings)")
        self.config = config
        from .secrets import register_secret

        register_secret(config.model.api_key)  # the model key: never in a command's environment, redacted everywhere
        self.pm = pm or get_plugin_manager(disabled=config.disabled_plugins(), extra=extra_plugins)
        self._session: Session | None = None
        self.hooks = HookRunner(self.pm, emit=self._emit_global)
        self.approver = resolve_approver(self.hooks, approver)
        self.channel = channel
        self._owns_store = store is None  # a store passed in (a sub-agent's parent's) is its owner's to close
        if store is None:
            db = db or config.state_db or Path(config.workspace) / ".clawkit" / "state.db"
            store = SessionStore(db, persist=persist)
        self.store = store
        if config.sessions.transcript == "jsonl" and getattr(store, "transcript", False) is None:
            from .transcript import Transcript  # sessions.transcript: jsonl (see clawkit.transcript)

            where = Path(config.workspace) / (config.sessions.transcript_dir or Path(".clawkit") / "transcripts")
            store.transcript = Transcript(where, config.name)
        self.tools = ToolRegistry(config.tools)
        for plugin_name, fn, argnames in self.hooks.impls("register_tools"):
            try:
                res = fn(**{k: v for k, v in {"register": self._tool_register(plugin_name), "agent": config}.items() if k in argnames})
                if inspect.isawaitable(res):
                    self.hooks._settle("register_tools", plugin_name, res)
            except ConfigError:  # the user's configuration is wrong (a sub-agent's file): stop, as for the agent file
                if self._owns_store:
                    store.close()  # nothing of this agent stays open
                raise
            except Exception as exc:
                self.hooks.report("register_tools", plugin_name, exc)
        self._check_allowlist()
        self.providers = ProviderRegistry()
        self.hooks.call_sync("register_providers", register=self.providers.register)
        self._provider = provider
        self.executor = ToolExecutor(self)
        self._governing: tuple | None = None  # computed on first use (see governing)
        if self._owns_store:
            store._clawkit_owner = weakref.ref(self)  # type: ignore[attr-defined]
        self._sessions: dict[str, Session] = {}
        self._background: set[asyncio.Future] = set()
        self._closed = False
        self._prepared = False
        self._text_tools: set[str] = set()  # models whose server refused native tools: the text protocol (clawkit.tooltext)
        _OPEN.add(self)

    @property
    def governing(self) -> tuple:
        """What governs this agent's next run (:mod:`clawkit.governing`; docs/security.md): the tools
        refuse to write it, the sandbox mounts it read-only. A sub-agent on its parent's store has
        the parent's set too (a child cannot rewrite its lead's YAML). Computed on first use."""
        if self._governing is None:
            from .governing import collect

            found = collect(self.hooks, self.config)
            owner = getattr(self.store, "_clawkit_owner", None)
            parent = owner() if owner is not None and not self._owns_store else None
            if parent is not None and parent is not self:
                found = tuple(dict.fromkeys(found + parent.governing))
            self._governing = found
        return self._governing

    @governing.setter
    def governing(self, value: tuple) -> None:
        self._governing = tuple(value)

    def close(self) -> None:
        """Release everything: plugins stop and join their threads (``agent_closing``), the
        ``agent.close`` event is emitted and the session store is closed — unless it was passed
        in, when it stays open for its owner. Idempotent; each plugin bounds its own joins, and
        a slow one is reported."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        try:
            for plugin, fn, argnames in self.hooks.impls("agent_closing"):
                started = time.monotonic()
                try:
                    fn(**{k: {"agent": self.config, "runtime": self}[k] for k in argnames})
                except Exception as exc:
                    self.hooks.report("agent_closing", plugin, exc)
                took = time.monotonic() - started
                if took > 2.0:
                    log.warning("plugin %s took %.1fs to close", plugin, took)
            emit_event(self.hooks, None, Event(type="agent.close", data={"agent": self.config.name}))
        finally:
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tool_register(self, plugin: str):
        def register(obj: Any, name: str | None = None, risk: Any = None, allow: bool = False) -> None:
            self.tools.register(obj, name=name, risk=risk, plugin=plugin, allow=allow)

        register.group = self.tools.add_group  # type: ignore[attr-defined]
        return register

    def _check_allowlist(self) -> None:
        """An allowlist name no installed plugin provides is a config error (file, line, known tools)."""
        unknown = self.tools.unknown_entries()
        if not unknown:
            return
        import difflib

        names = list(self.tools.known_names())
        known = ", ".join(names) or "none (no plugin registers tools)"

        def hint(name: str) -> str:
            near = difflib.get_close_matches(str(name), names, n=1)
            return f" (did you mean {near[0]!r}?)" if near else ""

        lines = [f"{self.config.where('tools', i)}: tools[{i}]: unknown tool {name!r}{hint(name)}" for i, name in unknown]
        raise ConfigError("\n".join(lines) + f"\nknown tools: {known} (glob patterns such as 'mcp__*' are accepted too)")

    def _emit_global(self, type: str, **data: Any) -> None:
        emit_event(self.hooks, self._session, Event(type=type, session_id=self._session.id if self._session else None, data=data))

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            self._provider = self._observe(self.providers.create(self.config.model.provider, self.config.model))
        return self._provider

    def _observe(self, provider: Provider) -> Provider:
        """Providers that retry on their own report each retry as an ``llm.retry`` event."""
        if getattr(provider, "on_retry", False) is None:

            def on_retry(notice: Any) -> None:
                data = notice.as_event() if hasattr(notice, "as_event") else {"error": str(notice)}
                self._emit_global("llm.retry", **data, by="provider")

            provider.on_retry = on_retry  # type: ignore[attr-defined]
        return provider

    def provider_for(self, model_config: Any) -> Provider:
        """A provider for another model (classifier, summariser): same registry."""
        return self._observe(self.providers.create(getattr(model_config, "provider", "auto"), model_config))

    # sessions -----------------------------------------------------------------------------

    def session(self, session_id: str | None = None) -> Session:
        """Open (resume) ``session_id`` or start a new session."""
        if session_id and session_id in self._sessions:
            self._sessions[session_id] = self._sessions.pop(session_id)  # most recently used last
            return self._sessions[session_id]
        while len(self._sessions) >= SESSION_CACHE:
            self._sessions.pop(next(iter(self._sessions)))  # the least recently used
        if session_id is None or not self.store.exists(session_id):
            sid = self.store.create(self.config.name, session_id, defer=True)  # committed with the first message
            s = Session(self.store, sid, self.config, new=True)
            self._sessions[sid] = s
            self._session = s
            emit_event(self.hooks, s, Event(type="session.start", session_id=sid, data={"agent": self.config.name}))
            s.history = []
            return s
        s = Session(self.store, session_id, self.config)
        stored = self.store.messages(session_id)
        s.history = repair_interrupted(stored)
        if len(s.history) != len(stored):
            if s.history[: len(stored)] == stored:
                for m in s.history[len(stored):]:
                    self.store.append(session_id, m)
            else:
                self.store.replace_messages(session_id, s.history)
            emit_event(self.hooks, s, Event(type="session.repaired", session_id=session_id, data={"added": len(s.history) - len(stored)}))
        self._sessions[session_id] = s
        return s

    def delete_session(self, session_id: str) -> Any:
        """Delete one session (with its sub-agent sessions) everywhere it is kept: the store's rows,
        its transcript and unshared attachments, and every plugin's data (``forget_sessions``).
        Returns a :class:`clawkit.forget.ForgetReport`; raises ``UnknownSessions``/``BusySessions``
        (nothing deleted), or ``ForgetFailed`` when a plugin could not delete its part."""
        from .forget import ForgetFailed, forget

        report = forget(self.store, [session_id], hooks=self.hooks, config=self.config)
        if not report.ok:
            raise ForgetFailed(report)
        for sid in report.sessions:
            self._sessions.pop(sid, None)
            if self._session is not None and self._session.id == sid:
                self._session = None
        return report

    # one turn -----------------------------------------------------------------------------

    #: the answer type every run of this agent must match (a pydantic model, any type pydantic can
    #: validate, or a JSON Schema mapping) unless a call passes its own ``output_type``; see
    #: docs/typed-output.md. None: YAML ``output:`` if any, else free text
    output_type: Any = None

    def run(self, text: str, session_id: str | None = None, deliver: Deliver | None = None, *,
            output_type: Any = None, attachments: Any = None) -> TurnResult:
        """Synchronous wrapper around :meth:`turn`: one turn in its own event loop.

        Background work the turn started (a classification still running) is given
        up to ``drain_timeout`` seconds to finish before the loop closes, so a slow
        classifier still shapes the session's next turn.
        """

        async def one() -> TurnResult:
            result = await self.turn(text, session_id=session_id, deliver=deliver, output_type=output_type,
                                     attachments=attachments)
            await self.drain()
            return result

        return asyncio.run(one())

    async def run_async(self, text: str, session_id: str | None = None, **kwargs: Any) -> TurnResult:
        """:meth:`turn` under the name the Python front uses; keywords go to :meth:`turn` unchanged."""
        return await self.turn(text, session_id=session_id, **kwargs)

    def stream(self, text: str, session_id: str | None = None, **kwargs: Any):
        """One turn as an async iterator of the reply's text chunks (``async for chunk in …``);
        keywords go to :meth:`turn` unchanged. :meth:`stream_events` also yields tool calls."""
        from .pyagent import stream_text

        return stream_text(self, text, session_id=session_id, **kwargs)

    def stream_events(self, text: str, session_id: str | None = None, **kwargs: Any):
        """One turn as an async iterator of :class:`clawkit.pyagent.StreamEvent` (text chunks,
        tool calls and results, notices), ending with ``done`` carrying the :class:`TurnResult`."""
        from .pyagent import stream_events

        return stream_events(self, text, session_id=session_id, **kwargs)

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait (bounded) for background tasks the turns started."""
        pending = set(self._background) | set(self.hooks._tasks)
        if pending:
            await asyncio.wait(pending, timeout=timeout)
