"""clawkit-memory: hybrid retrieval (FTS5 BM25 + sqlite-vec KNN) with offline embeddings.

Indexes the workspace's ``MEMORY.md``, ``memory/**/*.md`` and configured paths, plus
finished turns of past sessions; gives the model ``memory_search`` / ``memory_get`` /
``memory_save``; injects relevant snippets into the system prompt within a time budget;
adds ``clawkit memory …`` commands. See docs/plugins/memory.md.
"""

from __future__ import annotations

from typing import Any

from clawkit.hookspecs import hookimpl

from . import cli as _cli
from .config import MemoryConfig
from .embeddings import LiteLLMEmbeddings, LocalMiniLM
from .recall import MemoryRecall, start_recall
from .search import Hit
from .service import AgentMemory, close_all, config_of, memory_for
from .tools import TOOLS

__all__ = ["MemoryConfig", "AgentMemory", "Hit", "LocalMiniLM", "LiteLLMEmbeddings", "memory_for", "close_all"]

_RECALL = MemoryRecall()


@hookimpl
def register_config(register):
    """The ``plugins.memory`` section."""
    register("memory", MemoryConfig)


@hookimpl
def register_embedding_provider(register):
    """``local`` (offline MiniLM on onnxruntime) and ``litellm`` (remote models)."""
    register("local", LocalMiniLM)
    register("litellm", LiteLLMEmbeddings)


@hookimpl
def register_tools(register, agent):
    """``memory_search``, ``memory_get``, ``memory_save`` (shown only when allowlisted)."""
    for fn in TOOLS:
        register(fn)


@hookimpl
def register_prompt_contributor(register, agent):
    """The recall contributor (it contributes only when a retrieval was started this turn)."""
    if config_of(agent).recall.enabled:
        register(_RECALL)


@hookimpl
def message_received(ctx, message):
    """Start retrieval for the incoming message, and the file watcher on first use."""
    mem = memory_for(ctx.agent, ctx.hooks)
    mem.start_watching()
    if mem.cfg.recall.enabled and message.content.strip():
        start_recall(ctx, mem, message.content)


@hookimpl
def register_commands(cli: Any):
    """``clawkit memory index|search|stats|forget``."""
    _cli.register(cli)
