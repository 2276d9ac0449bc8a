"""Recall before the model is called: retrieval starts when the message arrives
(``message_received``) and runs in a worker thread alongside the rest of the turn's
preparation (the provider's set-up, classification, other hooks); the prompt contributor
waits for it at most ``recall.budget_ms`` counted from when the embedding model is ready —
a fresh process loads it alongside the rest of the turn, waited for at most
``recall.load_wait_ms`` from the message's arrival — then injects the few distinct snippets
similar enough to the message, or nothing. With empty memory nothing starts at all.

``ctx.state["memory.recall"]["timings"]`` tells where the time went: ``refresh_ms``
(memory-file freshness), ``load_ms`` (the model's one-time load), ``embed_ms`` (the query
embedding: the model's work),
``search_ms``; ``waited_ms`` is how long the prompt waited from the message's arrival.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkit.prompt import ContributorContext, PromptContributor, PromptSection

from .tools import mark_untrusted_hits, session_partitions, untrusted_block, untrusted_hit

if TYPE_CHECKING:
    from .service import AgentMemory

STATE_KEY = "memory.recall"


def state_db_of(ctx: Any) -> Path | None:
    """The session database file of the turn (None for an in-memory store, and for a PostgreSQL
    one: memory's index is a file per machine, so sessions in a shared server are not indexed as
    episodes there — files and notes are; see docs/scale-out.md)."""
    store = ctx.session.store
    hit = _DB_OF.get(id(store))
    if hit is not None and hit[0] is store:  # (every message: worked out once per store)
        return hit[1]
    path = getattr(store, "path", None)
    if path is None or getattr(store, "dialect", "sqlite") != "sqlite":
        path = None
    else:
        path = path if isinstance(path, Path) else Path(path)
        path = path if path.name != ":memory:" else None
    if len(_DB_OF) >= 64:
        _DB_OF.clear()
    _DB_OF[id(store)] = (store, path)
    return path


_DB_OF: dict[int, tuple[Any, Path | None]] = {}  # id(session store) -> (the store, its database file)


def start_recall(ctx: Any, mem: "AgentMemory", text: str) -> None:
    """Kick off retrieval for ``text`` on the memory worker; the contributor collects it from
    ``ctx.state``. Nothing starts when there is surely nothing to recall (empty memory)."""
    extra = session_partitions(ctx)
    started = time.perf_counter()
    sid = ctx.session.id
    rc = mem.cfg.recall
    known = mem.cached_recall(text, sid, extra)
    if known is not None:  # the same query, nothing new since: answered here, no thread hand-off
        ctx.state[STATE_KEY] = {"hits": known, "memory": mem, "timed_out": False, "started": started, "max_chars": rc.max_chars,
                                "waited_ms": (time.perf_counter() - started) * 1000, "timings": {
                                    "refresh_ms": 0.0, "embed_ms": 0.0, "search_ms": 0.0, "cached": 1.0}}
        return
    if not mem.maybe_has_memory(extra):
        return
    timings: dict[str, float] = {}
    ready: concurrent.futures.Future = concurrent.futures.Future()  # resolved when only the search remains
    st: dict[str, Any] = {}

    def job() -> Any:
        if "hits" in st:  # the prompt was built without it (many turns at once: the queue was long): skip
            mem.index.unexpect_query(text)
            timings["skipped"] = 1.0
            ready.set_result(time.perf_counter())
            return []
        return mem.recall(text, session_id=sid, extra_partitions=extra, timings=timings, ready=ready)

    mem.index.expect_query(text)  # embedded along with the first query the worker embeds (one pass for many)
    future = mem.executor.submit(job)
    st["memory"] = mem
    st.update({"future": future, "ready": ready, "started": started, "budget_ms": rc.budget_ms,
               "load_wait_ms": rc.load_wait_ms, "max_chars": rc.max_chars, "timings": timings})
    ctx.state[STATE_KEY] = st


def _deadline(st: dict[str, Any]) -> float:
    """When to stop waiting (perf_counter): ``budget_ms`` after the model was ready (a fresh
    process's load runs alongside the rest of the turn, for at most ``load_wait_ms`` from the
    message's arrival), else ``budget_ms`` after arrival."""
    ready = st["ready"]
    base = ready.result() if ready.done() else st["started"]
    return base + st["budget_ms"] / 1000


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _until(cf: concurrent.futures.Future, timeout: float) -> None:
    """Wait until the worker's future ``cf`` is done or ``timeout`` seconds pass, whichever comes
    first (never raises for ``cf``'s outcome). ``asyncio.wait([asyncio.wrap_future(cf)], timeout=…)``
    without its machinery: one loop future and one timer, no chained copy of ``cf``'s state and no
    sets of futures — a recall is waited for twice a turn (the model's load, the search)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()

    def done(_: concurrent.futures.Future) -> None:  # in the worker's thread (or here, when already done)
        if not waiter.done():  # (a turn that stopped waiting is not woken for nothing)
            try:
                loop.call_soon_threadsafe(_wake, waiter)
            except RuntimeError:  # the loop closed meanwhile: nobody waits
                pass

    cf.add_done_callback(done)
    timer = loop.call_later(timeout, _wake, waiter)
    try:
        await waiter
    finally:
        timer.cancel()


def _settle(st: dict[str, Any], hits: Any, timed_out: bool, error: str | None = None) -> None:
    st["hits"], st["timed_out"] = hits, timed_out
    if error is not None:
        st["error"] = error
    st["waited_ms"] = (time.perf_counter() - st["started"]) * 1000


class MemoryRecall(PromptContributor):
    """Injects ``## Relevant memory`` with cited snippets into the system prompt."""

    id = "memory.recall"
    priority = 60
    source = "memory"

    def should_contribute(self, ctx: ContributorContext) -> bool:
        return STATE_KEY in ctx.state

    def prepare(self, ctx: ContributorContext) -> Any:
        """Wait for the retrieval without blocking the event loop (the kernel awaits what this returns):
        None at once when no retrieval is under way (nothing stored, or already settled) — no coroutine,
        so the kernel schedules nothing for it."""
        st = ctx.state.get(STATE_KEY)
        if st is None or "hits" in st:
            return None
        return self._wait(st)

    async def _wait(self, st: dict[str, Any]) -> None:
        load_left = st["started"] + st["load_wait_ms"] / 1000 - time.perf_counter()
        if not st["ready"].done() and load_left > 0:
            await _until(st["ready"], load_left)
        future = st["future"]
        left = _deadline(st) - time.perf_counter()
        if not future.done() and left > 0:
            await _until(future, left)
        if not future.done():  # a result that is ready is taken however late the prompt is built
            _settle(st, [], True)
        elif future.exception() is not None:  # retrieval failed: the turn goes on without memory
            exc = future.exception()
            _settle(st, [], False, f"{type(exc).__name__}: {exc}")
        else:
            _settle(st, future.result(), False)

    def contribute(self, ctx: ContributorContext) -> PromptSection | None:
        st = ctx.state[STATE_KEY]
        if "hits" not in st:  # no prepare (e.g. a caller assembling synchronously): wait here, once per turn
            load_left = st["started"] + st["load_wait_ms"] / 1000 - time.perf_counter()
            if load_left > 0:
                concurrent.futures.wait([st["ready"]], timeout=load_left)
            try:
                _settle(st, st["future"].result(timeout=max(0.0, _deadline(st) - time.perf_counter())), False)
            except concurrent.futures.TimeoutError:
                _settle(st, [], True)
            except Exception as exc:  # retrieval failed: the turn goes on without memory
                _settle(st, [], False, f"{type(exc).__name__}: {exc}")
        hits = st["hits"]
        if not hits:
            return None
        mem = st.get("memory")
        flagged = [h for h in hits if untrusted_hit(mem, h)] if mem is not None else []
        # with sub-agents' notes: room for the data block's markers, so a cut never drops the end marker
        room = 300 if flagged else 0
        per = max(200, (st["max_chars"] - room) // max(1, len(hits)) - 40)
        mine, theirs = [], []
        bad = {id(h) for h in flagged}
        for h in hits:
            body = " ".join(h.text.split())
            body = body if len(body) <= per else body[: per - 1].rstrip() + "…"
            (theirs if id(h) in bad else mine).append(f"- [{h.citation}] {body}")
        text = "From your memory (cite as [path#lines]; may be outdated):\n" + "\n".join(mine) if mine else ""
        if theirs:  # sub-agents' notes: data inside delimiters, and the session now carries untrusted content
            mark_untrusted_hits(ctx, mem, flagged, "recalled")
            label = ("From your sub-agents' notes:\n" if all(mem.untrusted(h.partition) for h in flagged) else
                     "From your sub-agents' notes and past conversations (or summaries of them) that held untrusted "
                     "content:\n")
            text = (text + "\n\n" if text else "") + label + untrusted_block(mem, "\n".join(theirs))
        return PromptSection("Relevant memory", text, st["max_chars"])
