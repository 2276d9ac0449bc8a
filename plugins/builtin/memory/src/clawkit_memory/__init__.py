"""clawkit-memory: hybrid retrieval (FTS5 BM25 + sqlite-vec KNN) with offline embeddings.

Indexes the workspace's ``MEMORY.md``, ``memory/**/*.md`` and configured paths, plus
finished turns of past sessions; gives the model ``memory_search`` / ``memory_get`` /
``memory_save``; injects relevant snippets into the system prompt within a time budget;
adds ``clawkit memory …`` commands. See docs/plugins/memory.md.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from clawkit.hookspecs import hook_order, hookimpl, on_events
from clawkit.lazy import lazy_exports, lazy_module, loaded

from .activity import _ACTIVE, _LAST, _PENDING, STALE_TURN, quiet_for, take_pending  # noqa: F401

# The entry-point module stays a thin set of hookimpls: ``clawkit --help`` imports every
# plugin, and numpy / sqlite-vec / the embedding table load only when a hook body first runs.
_EXPORTS = {
    "MemoryConfig": "config", "AgentMemory": "service", "Hit": "search", "LocalEmbeddings": "local",
    "LocalMiniLM": "embeddings", "LocalStatic": "embeddings", "memory_for": "service", "close_all": "service",
}
__all__ = ["MemoryConfig", "AgentMemory", "Hit", "LocalEmbeddings", "LocalMiniLM", "LocalStatic", "memory_for",
           "close_all"]

_RECALL: Any = None


__getattr__ = lazy_exports(__name__, _EXPORTS)
# hooks that run every turn reach their modules through these (an import statement per call costs microseconds)
_config = lazy_module(__name__, "config")
_recall_mod = lazy_module(__name__, "recall")
_service = lazy_module(__name__, "service")
_merge = lazy_module(__name__, "merge")


def _recall() -> Any:
    """The one recall contributor, created on first use."""
    global _RECALL
    if _RECALL is None:
        from .recall import MemoryRecall

        _RECALL = MemoryRecall()
    return _RECALL


@hookimpl
def register_config(register):
    """The ``plugins.memory`` section."""
    from .config import MemoryConfig

    register("memory", MemoryConfig)


@hookimpl
def register_embedding_provider(register):
    """``local`` (all-MiniLM-L6-v2 shipped with this package, run in numpy), ``static`` (opt-in: a static
    token table, WordLlama's when ``wordllama`` is installed), ``minilm`` (opt-in: MiniLM on onnxruntime),
    ``openai`` and ``gemini`` (their REST APIs, keys from the environment); ``litellm`` comes from
    clawkit-litellm."""
    from .embeddings import LocalMiniLM, LocalStatic
    from .local import LocalEmbeddings
    from .remote import GeminiEmbeddings, OpenAIEmbeddings

    register("local", LocalEmbeddings)
    register("static", LocalStatic)
    register("minilm", LocalMiniLM)
    register("openai", OpenAIEmbeddings)
    register("gemini", GeminiEmbeddings)


@hookimpl
def register_tools(register, agent):
    """``memory_search``, ``memory_get``, ``memory_save`` (shown only when allowlisted)."""
    from .tools import TOOLS

    for fn in TOOLS:
        register(fn)


@hookimpl
def register_prompt_contributor(register, agent):
    """The recall contributor (it contributes only when a retrieval was started this turn)."""
    if _config().config_of(agent).recall.enabled:
        register(_recall())


_ENDING: dict[str, tuple[Any, Any]] = {}  # session id -> (memory, state db) of a turn in progress
_IDLE_ENDING: dict[str, tuple[Any, Any, Any]] = {}  # the same for turns that found memory idle
_MERGING: dict[str, tuple[Any, str]] = {}  # session id -> (the agent runtime, its model) for episode merging


def service_loaded(agent: Any) -> bool:
    """Whether this process already has a memory service for ``agent`` (without loading one)."""
    service = sys.modules.get(_SERVICE_MODULE)  # may be mid-import in another thread
    return id(agent) in getattr(service, "_by_agent", ())


_SERVICE_MODULE = __name__ + ".service"


_PLACES: dict[int, tuple[Any, Any, list[str]]] = {}  # id(agent config) -> (config, memory section, paths to probe)


def _idle(ctx: Any, state_db: Any) -> bool:
    """True when memory surely holds nothing and nothing waits to be indexed: no service yet in
    this process, no memory database, no memory files, no other session of this agent. Then the
    index (numpy, sqlite-vec) and the embedding runtime are not even loaded."""
    if service_loaded(ctx.agent):
        return False
    agent = ctx.agent
    known = _PLACES.get(id(agent))
    if known is None or known[0] is not agent:  # worked out once per agent config (this runs every message)
        from .config import MEMORY_ROOTS, config_of, db_path

        cfg = config_of(agent)
        workspace = Path(agent.workspace)
        if len(_PLACES) >= 256:
            _PLACES.clear()
        known = _PLACES[id(agent)] = (agent, cfg, [str(db_path(workspace, cfg)), *(str(workspace / r) for r in MEMORY_ROOTS)])
    cfg = known[1]
    if cfg.paths or any(os.path.exists(p) for p in known[2]):
        return False
    if state_db is None or not cfg.sessions:
        return True
    try:
        other = ctx.session.store.conn.execute("SELECT 1 FROM sessions WHERE agent = ? AND id != ? LIMIT 1",
                                               (ctx.agent.name, ctx.session.id)).fetchone()
    except Exception:  # a store without the kernel's table layout: take the full path
        return False
    return other is None


@hookimpl
@hook_order(50)
def message_received(ctx, message):
    """Start retrieval for the incoming message, and the file watcher on first use."""
    recall = _recall_mod()
    if len(_ACTIVE) >= 4096:
        quiet_for()  # drop lost turns
    sid = ctx.session.id
    _ACTIVE[sid] = _LAST[0] = time.monotonic()
    at_end = getattr(ctx, "at_end", None)
    if at_end is not None:  # a turn without turn.end (a directive or plugin answered it, it failed)
        at_end(partial(_turn_over, sid))
    state_db = recall.state_db_of(ctx)
    agent = ctx.agent
    if _idle(ctx, state_db):
        if state_db is not None and _PLACES[id(agent)][1].sessions:  # (episodes off: nothing to index, ever)
            if len(_IDLE_ENDING) >= 1024:  # bounded like _ENDING: a caller that never ends its turns
                _IDLE_ENDING.clear()
            _IDLE_ENDING[sid] = (agent, ctx.hooks, state_db)
        return
    mem = _service().memory_for(agent, ctx.hooks)
    mem.start_watching()
    cfg = mem.cfg
    if state_db is not None and cfg.sessions:
        mem.note_state_db(state_db)  # first time: catch up on earlier sessions (background)
        if len(_ENDING) >= 1024:
            _ENDING.clear()
        _ENDING[sid] = (mem, state_db)
        if cfg.compaction.enabled:
            runtime = getattr(ctx, "runtime", None)
            if runtime is not None:
                _MERGING[sid] = (runtime, agent.model.name)  # old episodes merged after the turn
    if cfg.recall.enabled and message.content.strip():
        recall.start_recall(ctx, mem, message.content)


def _turn_over(session_id: str) -> None:
    """The run ended (done, handled, failed or cancelled): what ``turn.end`` did not consume is
    forgotten, so a handled turn leaves no turn "in flight" and no agent behind in these tables."""
    if _ACTIVE.pop(session_id, None) is not None:
        _LAST[0] = time.monotonic()
    _ENDING.pop(session_id, None)
    _IDLE_ENDING.pop(session_id, None)
    _MERGING.pop(session_id, None)


@hookimpl
@on_events("turn.end")
def on_event(event):
    """When a turn ends, its session's new finished turns are indexed in the background, and old
    episodes are merged when enough have piled up (an awaitable then: the kernel runs it as a
    background task on the turn's loop, off the turn path; see :mod:`clawkit_memory.merge`)."""
    if event.type == "turn.end":
        if _ACTIVE.pop(event.session_id, None) is not None:
            _LAST[0] = time.monotonic()
        ending = _ENDING.pop(event.session_id, None)
        merging = _MERGING.pop(event.session_id, None)
        if ending is not None:
            ending[0].index_sessions_later(ending[1])
            if merging is not None:
                merge = _merge()
                if merge.may_be_due(ending[0]):  # (most turns: nothing to merge, and no task started to say so)
                    return merge.after_turn(ending[0], ending[1], *merging)
        idle = _IDLE_ENDING.pop(event.session_id, None)
        if idle is not None:
            _index_first_turn_later(*idle)


def _index_first_turn_later(agent: Any, hooks: Any, state_db: Any) -> None:
    """The first turn of an idle memory is indexed off the reply path: a daemon timer builds the
    service after the usual episode delay (a one-shot run has exited by then and leaves the
    turn to the next process, which catches up on earlier sessions first). Whoever builds the
    service first (the timer, a tool, ``memory_for``) queues the pending turn."""
    import threading

    _PENDING.setdefault(id(agent), (agent, set()))[1].add(state_db)

    def later() -> None:
        from .service import memory_for

        try:
            memory_for(agent, hooks)
        except Exception:  # shut down meanwhile: the next process catches up
            pass

    from .config import EPISODE_DELAY

    timer = threading.Timer(EPISODE_DELAY, later)
    timer.daemon = True
    _TIMERS.add(timer)
    timer.start()


_TIMERS: Any = set()


def _cancel_timers() -> None:
    for timer in list(_TIMERS):
        timer.cancel()  # a process exiting leaves the turn to the next one


import atexit  # noqa: E402

atexit.register(_cancel_timers)


@hookimpl
def agent_closing(agent):
    """Stop and join this agent's memory threads (watcher, worker) when no other open agent
    shares them, and close indexes nobody uses any more."""
    service = loaded(f"{__name__}.service")  # (waits for an import another thread is doing)
    if service is None:  # memory never started in this process: nothing to stop (and nothing heavy to import)
        return
    release = service.release
    for sid, (mem, _) in list(_ENDING.items()):
        if id(agent) in mem.users and len(mem.users) == 1:
            _ENDING.pop(sid, None)
    release(agent)


@hookimpl
def register_commands(cli: Any):
    """``clawkit memory index|search|stats|forget``."""
    from . import cli as _cli

    _cli.register(cli)


@hookimpl
def forget_sessions(store, session_ids, config):
    """Deleted sessions' episodes, and merged summaries that include them, go from the memory
    database (see :mod:`.forget`)."""
    from .forget import forget

    return forget(store, list(session_ids), config)
