"""Compaction off the turn's path: the summary is prepared in the background once a request
passes ``prepare_share`` of the threshold, and the request that crosses the threshold takes it
if it is ready; if not, that request is truncated (its older messages left out of this call
only, the session keeps them) and the summary goes on being prepared for the next call. No
model call ever waits for the summarizer.

One summary is kept per session: the older messages it covers (a fingerprint of their
content), their count and token total, and the task computing it on the turn's event loop. A
loop that ends (a one-shot run, ``Agent.run``) cancels an unfinished task; the next request
past the mark starts another.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from clawkit import Message
from clawkit.tokens import get_counter

from .compactor import SUMMARY_FLAG, identifiers, message_tokens, missing_identifiers, request_tokens, split_point

log = logging.getLogger("clawkit.compaction")


@dataclass
class Prepared:
    key: str  # fingerprint of the summarized messages
    count: int
    tokens: int
    idents: list[str]
    task: Any = None
    summary: str | None = None
    error: str | None = None
    loop: Any = field(default=None, repr=False)


_PREPARED: dict[str, Prepared] = {}


def fingerprint(messages: list[Message]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for m in messages:
        h.update(m.role.encode())
        h.update((m.content or "").encode("utf-8", "replace"))
        for c in m.tool_calls:
            h.update(c.id.encode())
        h.update(b"\0")
    return h.hexdigest()


def _old_part(request: Any, cfg: Any, window: int) -> tuple[list[Message], list[int]]:
    counter = get_counter(request.model)
    counts = [message_tokens(m, counter) for m in request.messages]
    b = split_point(request.messages, counts, int(window * cfg.keep_recent_share))
    return request.messages[:b], counts[:b]


def _usable(p: Prepared | None) -> bool:
    """Still useful: done (with a summary, or failed: the threshold then drops the messages), or
    running on a loop that is still running."""
    if p is None:
        return False
    if p.summary is not None or p.error is not None:
        return True
    if p.task is None or p.task.done():
        return False
    return p.loop is not None and p.loop.is_running() and not p.loop.is_closed()


def prepare(ctx: Any, request: Any, cfg: Any, window: int) -> None:
    """Start summarizing the older part of ``request`` in the background, unless a summary of a
    prefix of this history is ready or being made."""
    from .swap import _summarizer

    sid = ctx.session.id
    current = _PREPARED.get(sid)
    if _usable(current) and _covers(current, request.messages):
        return
    old, counts = _old_part(request, cfg, window)
    if not old or (len(old) == 1 and old[0].metadata.get(SUMMARY_FLAG)):
        return
    summarizer = _summarizer(ctx, cfg, window)
    if summarizer is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    p = Prepared(fingerprint(old), len(old), sum(counts), identifiers(old, cfg.keep_identifiers) if cfg.keep_identifiers else [],
                 loop=loop)

    async def run() -> None:
        try:
            p.summary = await summarizer(old)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed summary: the threshold truncates, a later mark tries again
            p.error = f"{type(exc).__name__}: {exc}"
            log.warning("session %s: background summary failed (%s)", sid, p.error)

    p.task = loop.create_task(run(), name=f"compaction-summary-{sid}")
    if len(_PREPARED) >= 1024:
        _PREPARED.clear()
    _PREPARED[sid] = p
    ctx.emit("compaction.preparing", summarizing=len(old), tokens=p.tokens)


def _covers(p: Prepared, messages: list[Message]) -> bool:
    return len(messages) > p.count and fingerprint(messages[: p.count]) == p.key


def apply(ctx: Any, request: Any, cfg: Any, window: int, before: int) -> None:
    """The request is over the threshold: the prepared summary replaces the older messages if it
    is ready (and persisted, as the waiting compaction did; a failed summary drops them, saying
    so); else they are left out of this request only. Never waits."""
    from .swap import _persist

    counter = get_counter(request.model)
    p = _PREPARED.get(ctx.session.id)
    if p is not None and (p.summary is not None or p.error is not None) and _covers(p, request.messages):
        recent = request.messages[p.count:]
        if p.summary is not None:
            method = "summary"
            lost = missing_identifiers(p.summary, p.idents)
            body = p.summary + ("\n\nIdentifiers from the summarized messages (verbatim): " + ", ".join(lost) if lost else "")
            content = (f"[Summary of {p.count} earlier messages (~{p.tokens:,} tokens), compacted by clawkit to fit the "
                       f"context window]\n{body}")
        else:  # the summarizer failed: the older messages are dropped, and the history says so (as before)
            method = "drop"
            ctx.emit("compaction.failed", error=p.error, dropped=p.count)
            ids = ("\nIdentifiers they mentioned (verbatim): " + ", ".join(p.idents)) if p.idents else ""
            content = (f"[{p.count} earlier messages (~{p.tokens:,} tokens) were dropped to fit the context window: "
                       f"summarizing them failed ({(p.error or '')[:300]}).]{ids}")
        msg = Message(role="user", content=content, metadata={SUMMARY_FLAG: True, "method": method,
                                                              "summarized_messages": p.count, "tokens_summarized": p.tokens})
        ctx.emit("compaction.before", trigger="threshold", tokens=before, window=window, messages=len(request.messages),
                 summarizing=p.count, keeping=len(recent))
        request.messages = [msg] + recent
        persisted = _persist(ctx, msg, recent) if cfg.persist else False
        _PREPARED.pop(ctx.session.id, None)
        ctx.emit("compaction.after", trigger="threshold", method=method, tokens_before=before,
                 tokens_after=request_tokens(request, counter), window=window, summarized_messages=p.count,
                 kept_messages=len(recent), summary_tokens=message_tokens(msg, counter), persisted=persisted,
                 error=p.error, background=True)
        return
    old, counts = _old_part(request, cfg, window)
    if not old:
        return
    recent = request.messages[len(old):]
    note = Message(role="user", content=(f"[{len(old)} earlier messages (~{sum(counts):,} tokens) are left out of this "
                                         "request to fit the context window; their summary is being prepared.]"),
                   metadata={SUMMARY_FLAG: True, "method": "truncate", "summarized_messages": 0})
    ctx.emit("compaction.before", trigger="threshold", tokens=before, window=window, messages=len(request.messages),
             summarizing=0, keeping=len(recent))
    request.messages = [note] + recent
    ctx.emit("compaction.after", trigger="threshold", method="truncate", tokens_before=before,
             tokens_after=request_tokens(request, counter), window=window, summarized_messages=0,
             kept_messages=len(recent), summary_tokens=message_tokens(note, counter), persisted=False,
             error=(p.error if p is not None else None), background=True)
