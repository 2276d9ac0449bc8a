"""Recall before the model is called: retrieval starts when the message arrives
(``message_received``) and runs in a worker thread alongside the rest of the turn's
preparation (classification, other hooks); the prompt contributor waits for it at most
``recall.budget_ms`` counted from the message's arrival, then injects the few snippets
similar enough to the message — or nothing. With empty memory nothing starts at all.

``ctx.state["memory.recall"]["timings"]`` tells where the time went: ``refresh_ms``
(memory-file freshness), ``embed_ms`` (the query embedding: the model's work),
``search_ms``; ``waited_ms`` is how long the prompt waited from the message's arrival.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkit.prompt import ContributorContext, PromptContributor, PromptSection

from .tools import session_partitions

if TYPE_CHECKING:
    from .service import AgentMemory

STATE_KEY = "memory.recall"


def state_db_of(ctx: Any) -> Path | None:
    """The session database file of the turn (None for an in-memory store, and for a PostgreSQL
    one: memory's index is a file per machine, so sessions in a shared server are not indexed as
    episodes there — files and notes are; see docs/scale-out.md)."""
    store = ctx.session.store
    path = getattr(store, "path", None)
    if path is None or getattr(store, "dialect", "sqlite") != "sqlite":
        return None
    path = path if isinstance(path, Path) else Path(path)
    return path if path.name != ":memory:" else None


def start_recall(ctx: Any, mem: "AgentMemory", text: str) -> None:
    """Kick off retrieval for ``text`` on the memory worker; the contributor collects it from
    ``ctx.state``. Nothing starts when there is surely nothing to recall (empty memory)."""
    extra = session_partitions(ctx)
    if not mem.maybe_has_memory(extra):
        return
    started = time.perf_counter()
    timings: dict[str, float] = {}
    future = mem.executor.submit(mem.recall, text, session_id=ctx.session.id, extra_partitions=extra, timings=timings)
    ctx.state[STATE_KEY] = {"future": future, "started": started, "budget_ms": mem.cfg.recall.budget_ms,
                            "max_chars": mem.cfg.recall.max_chars, "timings": timings}


class MemoryRecall(PromptContributor):
    """Injects ``## Relevant memory`` with cited snippets into the system prompt."""

    id = "memory.recall"
    priority = 60
    source = "memory"

    def should_contribute(self, ctx: ContributorContext) -> bool:
        return STATE_KEY in ctx.state

    async def prepare(self, ctx: ContributorContext) -> None:
        """Wait for the retrieval without blocking the event loop (the kernel awaits this)."""
        st = ctx.state.get(STATE_KEY)
        if st is None or "hits" in st:
            return
        remaining = st["budget_ms"] / 1000 - (time.perf_counter() - st["started"])
        try:
            st["hits"] = await asyncio.wait_for(asyncio.wrap_future(st["future"]), timeout=max(0.0, remaining))
            st["timed_out"] = False
        except asyncio.TimeoutError:
            st["hits"], st["timed_out"] = [], True
        except Exception as exc:  # retrieval failed: the turn goes on without memory
            st["hits"], st["timed_out"], st["error"] = [], False, f"{type(exc).__name__}: {exc}"
        st["waited_ms"] = (time.perf_counter() - st["started"]) * 1000

    def contribute(self, ctx: ContributorContext) -> PromptSection | None:
        st = ctx.state[STATE_KEY]
        if "hits" not in st:  # no prepare (e.g. `clawkit prompt`): wait here; decided once per turn
            remaining = st["budget_ms"] / 1000 - (time.perf_counter() - st["started"])
            try:
                st["hits"] = st["future"].result(timeout=max(0.0, remaining))
                st["timed_out"] = False
            except concurrent.futures.TimeoutError:
                st["hits"], st["timed_out"] = [], True
            except Exception as exc:  # retrieval failed: the turn goes on without memory
                st["hits"], st["timed_out"], st["error"] = [], False, f"{type(exc).__name__}: {exc}"
            st["waited_ms"] = (time.perf_counter() - st["started"]) * 1000
        hits = st["hits"]
        if not hits:
            return None
        per = max(200, st["max_chars"] // max(1, len(hits)) - 40)
        lines = []
        for h in hits:
            body = " ".join(h.text.split())
            body = body if len(body) <= per else body[: per - 1].rstrip() + "…"
            lines.append(f"- [{h.citation}] {body}")
        return PromptSection("Relevant memory", "From your memory (cite as [path#lines]; may be outdated):\n"
                             + "\n".join(lines), st["max_chars"])
