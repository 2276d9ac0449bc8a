"""clawkit-memory: hybrid retrieval (FTS5 BM25 + sqlite-vec KNN) with offline embeddings.

Indexes the workspace's ``MEMORY.md``, ``memory/**/*.md`` and configured paths, plus
finished turns of past sessions; gives the model ``memory_search`` / ``memory_get`` /
``memory_save``; injects relevant snippets into the system prompt within a time budget;
adds ``clawkit memory …`` commands. See docs/plugins/memory.md.
"""

from __future__ import annotations

from typing import Any

from clawkit.hookspecs import hookimpl
from clawkit.lazy import lazy_exports

# The entry-point module stays a thin set of hookimpls: ``clawkit --help`` imports every
# plugin, and numpy / sqlite-vec / onnxruntime load only when a hook body first runs.
_EXPORTS = {
    "MemoryConfig": "config", "AgentMemory": "service", "Hit": "search", "LocalMiniLM": "embeddings",
    "LiteLLMEmbeddings": "embeddings", "memory_for": "service", "close_all": "service",
}
__all__ = ["MemoryConfig", "AgentMemory", "Hit", "LocalMiniLM", "LiteLLMEmbeddings", "memory_for", "close_all"]

_RECALL: Any = None


__getattr__ = lazy_exports(__name__, _EXPORTS)


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
    """``local`` (offline MiniLM on onnxruntime) and ``litellm`` (remote models)."""
    from .embeddings import LiteLLMEmbeddings, LocalMiniLM

    register("local", LocalMiniLM)
    register("litellm", LiteLLMEmbeddings)


@hookimpl
def register_tools(register, agent):
    """``memory_search``, ``memory_get``, ``memory_save`` (shown only when allowlisted)."""
    from .tools import TOOLS

    for fn in TOOLS:
        register(fn)


@hookimpl
def register_prompt_contributor(register, agent):
    """The recall contributor (it contributes only when a retrieval was started this turn)."""
    from .service import config_of

    if config_of(agent).recall.enabled:
        register(_recall())


_ENDING: dict[str, tuple[Any, Any]] = {}  # session id -> (memory, state db) of a turn in progress


@hookimpl
def message_received(ctx, message):
    """Start retrieval for the incoming message, and the file watcher on first use."""
    from .recall import start_recall, state_db_of
    from .service import memory_for

    mem = memory_for(ctx.agent, ctx.hooks)
    mem.start_watching()
    state_db = state_db_of(ctx)
    if state_db is not None and mem.cfg.sessions:
        mem.note_state_db(state_db)  # first time: catch up on earlier sessions (background)
        if len(_ENDING) >= 1024:
            _ENDING.clear()
        _ENDING[ctx.session.id] = (mem, state_db)
    if mem.cfg.recall.enabled and message.content.strip():
        start_recall(ctx, mem, message.content)


@hookimpl
def on_event(event):
    """When a turn ends, its session's new finished turns are indexed in the background."""
    if event.type == "turn.end":
        ending = _ENDING.pop(event.session_id, None)
        if ending is not None:
            ending[0].index_sessions_later(ending[1])


@hookimpl
def agent_closing(agent):
    """Stop and join this agent's memory threads (watcher, worker) when no other open agent
    shares them, and close indexes nobody uses any more."""
    from .service import release

    for sid, (mem, _) in list(_ENDING.items()):
        if id(agent) in mem.users and len(mem.users) == 1:
            _ENDING.pop(sid, None)
    release(agent)


@hookimpl
def register_commands(cli: Any):
    """``clawkit memory index|search|stats|forget``."""
    from . import cli as _cli

    _cli.register(cli)
