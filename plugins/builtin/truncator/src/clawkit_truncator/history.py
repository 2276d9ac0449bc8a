"""Trim old tool results in a request's history when the window fills.

Only the request sent to the model changes (the session keeps every result):
first old results are soft-trimmed to a head and tail, oldest first; only if
that is not enough are the oldest cleared entirely. Messages from the last
``keep_turns`` user turns on are never touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from clawkit import Message

from .cut import char_plan, plan_cut
from clawkit.tokens import TokenCounter

TRIMMED_FLAG = "truncator_trimmed"


def message_tokens(m: Message, counter: TokenCounter) -> int:
    n = 4 + counter.count(m.content)
    if m.tool_calls:
        n += counter.count(json.dumps([c.arguments for c in m.tool_calls], default=str)) + 8 * len(m.tool_calls)
    return n


@dataclass
class TrimReport:
    before: int
    after: int
    soft: list[int] = field(default_factory=list)
    cleared: list[int] = field(default_factory=list)


def protected_from(messages: list[Message], keep_turns: int) -> int:
    """Index of the first message of the last ``keep_turns`` user turns."""
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and not messages[i].metadata.get("kernel_note"):
            seen += 1
            if seen >= keep_turns:
                return i
    return 0


def _replace(m: Message, content: str, how: str) -> Message:
    meta = {**m.metadata, TRIMMED_FLAG: how}
    result = m.tool_result.model_copy(update={"content": content}) if m.tool_result is not None else None
    return m.model_copy(update={"content": content, "tool_result": result, "metadata": meta})


def _output_hint(m: Message) -> str:
    oid = (m.tool_result.metadata.get("output_id") if m.tool_result is not None else None) or m.metadata.get("output_id")
    return f"; full output: read_tool_output(output_id={oid!r})" if oid else ""


def soft_trim(m: Message, tokens: int, counter: TokenCounter) -> Message | None:
    text = m.content
    plan = plan_cut(text, tokens, counter, keep_tail="always", tail_share=0.4, marker_tokens=40)
    if plan is None:
        plan = None if counter.exact else char_plan(text, tokens, 0.4)
    if plan is None:
        return None
    marker = f"\n[... old tool result trimmed by clawkit to save context: ~{plan.removed_tokens:,} tokens removed{_output_hint(m)} ...]\n"
    return _replace(m, text[: plan.head_end] + marker + text[plan.tail_start :], "soft")


def trim_history(messages: list[Message], window: int, counter: TokenCounter, *, fixed_tokens: int, trigger: float,
                 target: float, keep_turns: int, soft_tokens: int) -> tuple[list[Message], TrimReport] | None:
    """A trimmed copy of ``messages`` (or None when the history is under ``trigger`` of the window)."""
    counts = [message_tokens(m, counter) for m in messages]
    total = fixed_tokens + sum(counts)
    if total <= trigger * window:
        return None
    goal = target * window
    report = TrimReport(before=total, after=total)
    out = list(messages)
    old = [i for i in range(protected_from(messages, keep_turns)) if messages[i].role == "tool"]
    for i in old:
        if total <= goal:
            break
        if counts[i] <= soft_tokens + 60 or out[i].metadata.get(TRIMMED_FLAG):
            continue
        trimmed = soft_trim(out[i], soft_tokens, counter)
        if trimmed is None:
            continue
        new = message_tokens(trimmed, counter)
        total += new - counts[i]
        out[i], counts[i] = trimmed, new
        report.soft.append(i)
    for i in old:
        if total <= goal:
            break
        if out[i].metadata.get(TRIMMED_FLAG) == "cleared":
            continue
        cleared = _replace(out[i], f"[old tool result cleared by clawkit to save context (~{counts[i]:,} tokens){_output_hint(out[i])}]", "cleared")
        new = message_tokens(cleared, counter)
        total += new - counts[i]
        out[i], counts[i] = cleared, new
        report.cleared.append(i)
    report.after = total
    if not report.soft and not report.cleared:
        return None
    return out, report
