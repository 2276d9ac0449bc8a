"""Summarize the older part of a conversation so the rest fits the window.

The split keeps the most recent messages verbatim (a token budget counted from
the end), never between an assistant's tool calls and their results. The older
part is summarized by a model in chunks that fit its window (a rolling summary);
identifiers found in the older part that the summary lost are appended
verbatim. When summarizing fails the older part is dropped and the history says so.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from clawkit import LlmRequest, Message

from clawkit.tokens import TokenCounter

log = logging.getLogger("clawkit.compaction")

SUMMARY_FLAG = "compaction_summary"
SUMMARY_SYSTEM = (
    "You compact conversations for an AI agent. Write a concise summary of the conversation you are given, "
    "merged with the previous summary if there is one, so the agent can continue the work without the original "
    "messages. Keep: the user's goals and constraints, decisions made, facts learned, tool results that matter, "
    "open tasks and next steps. Copy every identifier exactly as written: file paths, URLs, ids, hashes, "
    "names, numbers, commands. Do not invent anything. Write plain text, no preamble."
)
_IDENT = re.compile(
    r"https?://[^\s\"'<>()\]]+"  # URLs
    r"|(?:~|\.{1,2})?(?:/[\w.\-@+]+){2,}/?"  # absolute/relative paths with two or more parts
    r"|\b[\w\-]+/[\w.\-/]+\.\w{1,8}\b"  # relative paths with an extension
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"  # UUIDs
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"  # hashes
    r"|\b[A-Za-z]+[_\-][A-Za-z0-9]*\d[A-Za-z0-9_\-]*\b"  # ids like ses_3f2a1, PROJ-1234
    r"|\b[\w\-]+\.(?:py|js|ts|md|json|yaml|yml|toml|txt|log|csv|sql|sh|go|rs|java|c|h|cpp|html|css)\b",  # file names
    re.IGNORECASE,
)


class SummaryFailed(Exception):
    pass


def message_tokens(m: Message, counter: TokenCounter) -> int:
    n = 4 + counter.count(m.content)
    if m.tool_calls:
        n += counter.count(json.dumps([c.arguments for c in m.tool_calls], default=str)) + 8 * len(m.tool_calls)
    if m.blocks:  # attachments: their estimate (clawkit.attachments), never their base64
        from clawkit.attachments import block_tokens

        n += block_tokens(m)
    return n


def request_tokens(request: LlmRequest, counter: TokenCounter) -> int:
    tools = sum(counter.count(t.model_dump_json()) for t in request.tools)
    return counter.count(request.system) + tools + sum(message_tokens(m, counter) for m in request.messages)


def split_point(messages: list[Message], counts: list[int], keep_tokens: int) -> int:
    """Index of the first message kept verbatim (0: nothing to compact)."""
    n = len(messages)
    b, used = n, 0
    while b > 0 and used + counts[b - 1] <= keep_tokens:
        b -= 1
        used += counts[b]
    while b < n and messages[b].role == "tool":  # never start with results whose calls were summarized
        b += 1
    if b >= n:  # the last unit alone is over budget: keep it whole, from the call that started it
        b = n - 1
        while b > 0 and messages[b].role == "tool":
            b -= 1
    return max(0, b)


def render(messages: list[Message], max_chars: int) -> list[str]:
    """Each message as transcript text, long ones cut to head and tail."""
    out = []
    for m in messages:
        if m.metadata.get(SUMMARY_FLAG):
            out.append(f"[previous summary]\n{m.content}")
            continue
        text = m.content
        if len(text) > max_chars:
            keep = max_chars // 2
            text = f"{text[:keep]}\n[... {len(text) - 2 * keep:,} characters omitted ...]\n{text[-keep:]}"
        if m.role == "tool":
            name = m.tool_result.name if m.tool_result is not None else "tool"
            out.append(f"[tool result: {name}]\n{text}")
        elif m.tool_calls:
            calls = ", ".join(f"{c.name}({json.dumps(c.arguments, default=str)})" for c in m.tool_calls)
            out.append(f"[assistant]\n{text}\n[called: {calls}]".replace("\n\n[called", "\n[called"))
        else:
            if m.blocks:  # the summary knows what was attached (name, type), not the bytes
                from clawkit.attachments import attached, describe

                text += "".join(f"\n[attached: {describe(blk)}]" for blk in attached(m))
            out.append(f"[{m.role}]\n{text}")
    return out


def chunks(parts: list[str], max_chars: int) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for p in parts:
        p = p[:max_chars]
        if cur and size + len(p) > max_chars:
            out.append("\n\n".join(cur))
            cur, size = [], 0
        cur.append(p)
        size += len(p) + 2
    if cur:
        out.append("\n\n".join(cur))
    return out


def identifiers(messages: list[Message], limit: int = 150) -> list[str]:
    """Identifiers in ``messages``, most recent first, without duplicates."""
    seen: dict[str, None] = {}
    for m in reversed(messages):
        texts = [m.content] + [json.dumps(c.arguments, default=str) for c in m.tool_calls]
        for text in texts:
            for ident in _IDENT.findall(text[:200_000]):
                ident = ident.rstrip(".,;:")
                if len(ident) >= 4 and ident not in seen:
                    seen[ident] = None
                    if len(seen) >= limit:
                        return list(seen)
    return list(seen)


def missing_identifiers(summary: str, idents: list[str]) -> list[str]:
    return [i for i in idents if i not in summary]


@dataclass
class Summarizer:
    """Calls ``provider`` with ``model``; ``input_chars`` bounds one summarization request."""

    provider: Any
    model: str
    input_chars: int
    max_tokens: int
    message_chars: int = 6000

    async def __call__(self, old: list[Message]) -> str:
        summary = ""
        for chunk in chunks(render(old, self.message_chars), self.input_chars):
            prompt = (f"Previous summary:\n{summary}\n\n" if summary else "") + f"Conversation to summarize:\n{chunk}"
            request = LlmRequest(model=self.model, system=SUMMARY_SYSTEM, messages=[Message(role="user", content=prompt)],
                                 stream=False, settings={"max_tokens": self.max_tokens}, metadata={"purpose": "compaction"})
            response = await self.provider.complete(request)
            text = (response.content or "").strip()
            if not text:
                raise SummaryFailed("the summarizer returned an empty summary")
            summary = text
        return summary[: self.max_tokens * 6]
