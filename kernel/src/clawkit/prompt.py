"""The system prompt, composed from tagged prompt contributors.

Untagged contributors always apply; tagged ones when any of their tags matches the
session's classification; ``should_contribute`` filters last; sections are sorted
by ``(priority, id)`` and budgeted — each to its ``max_chars``, the whole to the
total budget by cutting the lowest-priority sections first. Identical inputs give
byte-identical output, which prompt caching depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel

from .types import SessionClassification

Dimension = Literal["topic", "complexity", "domain", "channel", "custom"]


class Tag(BaseModel):
    """``{dimension, value}``; ``value: "*"`` matches any value of that dimension."""

    dimension: Dimension
    value: str

    @classmethod
    def parse(cls, raw: "Tag | dict[str, str] | str") -> "Tag":
        """Accepts a Tag, a mapping, or ``"dimension:value"``."""
        if isinstance(raw, Tag):
            return raw
        if isinstance(raw, str):
            dim, _, value = raw.partition(":")
            return cls(dimension=dim.strip(), value=value.strip() or "*")  # type: ignore[arg-type]
        return cls.model_validate(raw)


@dataclass
class PromptSection:
    heading: str
    content: str
    max_chars: int | None = None

    def render(self) -> str:
        return f"## {self.heading}\n{self.content}" if self.heading else self.content


@dataclass
class ContributorContext:
    agent_id: str
    session_id: str | None
    classification: SessionClassification | None
    tools: list[str]
    channel: str
    workspace: Path
    model: str
    message: str | None = None
    agent: Any = None
    session: Any = None
    state: dict[str, Any] = field(default_factory=dict)


class PromptContributor:
    """Subclass and override ``contribute`` (and optionally ``should_contribute``)."""

    id: str = "contributor"
    tags: list[Tag] = []
    priority: int = 100
    max_chars: int | None = None

    def should_contribute(self, ctx: ContributorContext) -> bool:
        return True

    def contribute(self, ctx: ContributorContext) -> PromptSection | str | None:
        raise NotImplementedError


class StaticContributor(PromptContributor):
    """A fixed section: ``StaticContributor("style", "Be brief.", tags=["topic:coding"])``."""

    def __init__(self, id: str, content: str, *, heading: str = "", tags: Iterable[Any] = (), priority: int = 100, max_chars: int | None = None):
        self.id = id
        self.content = content
        self.heading = heading
        self.tags = [Tag.parse(t) for t in tags]
        self.priority = priority
        self.max_chars = max_chars

    def contribute(self, ctx: ContributorContext) -> PromptSection:
        return PromptSection(self.heading, self.content, self.max_chars)


def tag_matches(tag: Tag, ctx: ContributorContext) -> bool:
    c = ctx.classification
    if tag.dimension == "channel":
        return tag.value in ("*", ctx.channel)
    if c is None:
        return False
    if tag.dimension == "domain":
        return bool(c.domain) if tag.value == "*" else tag.value in c.domain
    if tag.dimension == "custom":
        return bool(c.flags) if tag.value == "*" else tag.value in c.flags
    actual = c.topic if tag.dimension == "topic" else c.complexity
    return tag.value == "*" or tag.value == actual


@dataclass
class Inclusion:
    id: str
    included: bool
    reason: str  # untagged | tag matched | no tag matched | filtered | cut by budget | trimmed | failed
    priority: int
    chars: int = 0
    detail: str = ""


@dataclass
class AssembledPrompt:
    text: str
    report: list[Inclusion]


def assemble(contributors: Iterable[PromptContributor], ctx: ContributorContext, total_chars: int | None = None, on_error=None) -> AssembledPrompt:
    """Select, order, render and budget the contributors' sections."""
    report: list[Inclusion] = []
    chosen: list[tuple[PromptContributor, str, str]] = []
    for c in sorted(contributors, key=lambda c: (c.priority, c.id)):
        tags = c.tags or []
        if tags:
            matched = [t for t in tags if tag_matches(t, ctx)]
            if not matched:
                report.append(Inclusion(c.id, False, "no tag matched", c.priority))
                continue
            reason = "tag matched"
            detail = ", ".join(f"{t.dimension}:{t.value}" for t in matched)
        else:
            reason, detail = "untagged", ""
        try:
            if not c.should_contribute(ctx):
                report.append(Inclusion(c.id, False, "filtered", c.priority))
                continue
            section = c.contribute(ctx)
        except Exception as exc:
            if on_error:
                on_error(c, exc)
            report.append(Inclusion(c.id, False, "failed", c.priority, detail=f"{type(exc).__name__}: {exc}"))
            continue
        if section is None:
            report.append(Inclusion(c.id, False, "filtered", c.priority))
            continue
        if isinstance(section, str):
            section = PromptSection("", section, c.max_chars)
        text = section.render()
        limit = section.max_chars or c.max_chars
        if limit is not None and len(text) > limit:
            text = text[: max(0, limit - 1)].rstrip() + "…"
            detail = (detail + "; " if detail else "") + f"trimmed to {limit} chars"
        if not text.strip():
            report.append(Inclusion(c.id, False, "filtered", c.priority, detail="empty"))
            continue
        chosen.append((c, text, detail))
        report.append(Inclusion(c.id, True, reason, c.priority, len(text), detail))
    if total_chars is not None:
        size = sum(len(t) for _, t, _ in chosen) + 2 * max(0, len(chosen) - 1)
        # cut from the lowest priority (last in order) until the prompt fits
        while chosen and size > total_chars:
            c, text, _ = chosen.pop()
            size -= len(text) + (2 if chosen else 0)
            for r in report:
                if r.id == c.id and r.included:
                    r.included, r.reason, r.detail = False, "cut by budget", f"{len(text)} chars over a {total_chars}-char budget"
    return AssembledPrompt("\n\n".join(t for _, t, _ in chosen), report)
