"""The system prompt, composed from tagged prompt contributors.

Untagged contributors always apply; tagged ones when any of their tags matches the
session's classification (OR across tags); ``should_contribute`` filters last;
sections are sorted by ``(priority, id)`` and budgeted — each to its ``max_chars``,
the whole to the total budget by cutting the lowest-priority sections first.
Every decision is reported (:class:`Inclusion`). Identical inputs give
byte-identical output, which prompt caching depends on.

Tag matching, per dimension (``"*"`` is a wildcard value):

* ``topic`` / ``complexity`` — equal to the classification's value;
* ``domain`` — the value is in the classification's domain list;
* ``custom`` — the value is in the classification's flags;
* ``channel`` — equal to the turn's channel (needs no classification).

Without a classification only untagged and ``channel``-tagged contributors apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import BaseModel

from .types import SessionClassification

Dimension = Literal["topic", "complexity", "domain", "channel", "custom"]
DIMENSIONS: tuple[str, ...] = ("topic", "complexity", "domain", "channel", "custom")
ELLIPSIS = "…"


class Tag(BaseModel):
    """``{dimension, value}``; ``value: "*"`` matches any value of that dimension."""

    dimension: Dimension
    value: str

    @classmethod
    def parse(cls, raw: "Tag | dict[str, str] | str") -> "Tag":
        """Accepts a Tag, ``{"dimension": d, "value": v}``, ``{d: v}`` or ``"d:v"``.

        Raises ``ValueError`` naming the valid dimensions for anything else.
        """
        if isinstance(raw, Tag):
            return raw
        original = raw
        if isinstance(raw, str):
            dim, sep, value = raw.partition(":")
            if not sep:
                raise ValueError(f"tag {raw!r}: write 'dimension:value' with a dimension among {', '.join(DIMENSIONS)}")
            raw = {"dimension": dim.strip(), "value": value.strip() or "*"}
        elif isinstance(raw, dict) and len(raw) == 1 and "dimension" not in raw:
            ((dim, value),) = raw.items()  # the short form {domain: security}
            raw = {"dimension": str(dim), "value": "*" if value is None else str(value)}
        if isinstance(raw, dict) and raw.get("dimension") not in DIMENSIONS:
            raise ValueError(f"tag {original!r}: unknown dimension {raw.get('dimension')!r} (use one of {', '.join(DIMENSIONS)})")
        return cls.model_validate(raw)

    def __str__(self) -> str:
        return f"{self.dimension}:{self.value}"


@dataclass(slots=True)
class PromptSection:
    """One section of the system prompt: ``## heading`` then ``content`` (no heading: content only)."""

    heading: str
    content: str
    max_chars: int | None = None
    # tools this section explains (when set, overrides the contributor's ``tools``)
    tools: tuple[str, ...] | None = None

    def render(self) -> str:
        return f"## {self.heading}\n{self.content}" if self.heading else self.content


@dataclass
class ContributorContext:
    """What a contributor may look at when deciding and writing its section.

    ``classification`` may be None (not classified yet). ``tools`` are the names
    of the tools the model will see in this request; ``tool_descriptions`` their
    descriptions; ``registry`` the agent's tool registry (``registry.allowed(name)``).
    A section about a tool should appear only when the tool is in ``tools``. ``message`` is the latest user
    message; ``state`` the turn's scratch dict (read-only by convention).
    """

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
    tool_descriptions: dict[str, str] = field(default_factory=dict)
    registry: Any = None  # the agent's ToolRegistry: ``registry.allowed(name)`` answers for any tool


class PromptContributor:
    """Subclass and override ``contribute`` (and optionally ``should_contribute``).

    ``tags`` may hold :class:`Tag` objects, ``"dimension:value"`` strings or
    mappings; ``priority``: lower comes first (default 100); ``max_chars`` caps the
    rendered section (heading included).
    """

    id: str = "contributor"
    tags: list[Tag] = []
    priority: int = 100
    max_chars: int | None = None
    # the context budget's source this section counts against (see clawkit.budget.SOURCES)
    source: str = "contributors"
    # tools this section explains: dropping the section drops them from the request too
    tools: tuple[str, ...] = ()
    # False: never trimmed, only dropped whole (skill instructions)
    compressible: bool = True
    # True: should_contribute and contribute depend on nothing but the agent's config (``ctx.agent``) and
    # this object — not on the session, the turn, the tools or the time. assemble then asks an untagged one
    # once per agent config and reuses what it rendered (StaticContributor; tagged ones are matched each time)
    stable: bool = False

    # Optional: ``async def prepare(self, ctx)`` — awaited (concurrently with the
    # other contributors' prepares) before assembly; do I/O there, not in contribute.

    def should_contribute(self, ctx: ContributorContext) -> bool:
        """The final filter, after tag matching. Default: always."""
        return True

    def contribute(self, ctx: ContributorContext) -> PromptSection | str | None:
        """The section (a bare string is a section without heading); None to skip."""
        raise NotImplementedError


class StaticContributor(PromptContributor):
    """A fixed section: ``StaticContributor("style", "Be brief.", tags=["topic:coding"])``."""

    stable = True  # rendered once per agent config: its section never changes

    def __init__(self, id: str, content: str, *, heading: str = "", tags: Iterable[Any] = (), priority: int = 100, max_chars: int | None = None):
        self.id = id
        self.content = content
        self.heading = heading
        self.tags = [Tag.parse(t) for t in tags]
        self.priority = priority
        self.max_chars = max_chars
        self._section = PromptSection(heading, content, max_chars)

    def contribute(self, ctx: ContributorContext) -> PromptSection:
        return self._section


def tag_matches(tag: Tag, ctx: ContributorContext) -> bool:
    """Whether one tag matches the context's classification (or channel)."""
    dim, value = tag.dimension, tag.value
    if dim == "channel":
        return value == "*" or value == ctx.channel
    c = ctx.classification
    if c is None:
        return False
    if dim == "topic":
        return value == "*" or value == c.topic
    if dim == "complexity":
        return value == "*" or value == c.complexity
    if dim == "domain":
        return bool(c.domain) if value == "*" else value in c.domain
    return bool(c.flags) if value == "*" else value in c.flags  # custom


@dataclass(slots=True)
class Inclusion:
    """Why one contributor is (or is not) in the prompt.

    ``reason``: ``untagged`` | ``tag matched`` | ``no tag matched`` | ``filtered`` |
    ``cut by budget`` | ``failed``. ``detail`` says which tags matched, whether the
    section was trimmed to its ``max_chars``, or the error. ``chars`` and ``text``
    are the rendered section (kept for cut sections too). Read-only: a ``stable``
    contributor's Inclusion is shared by the prompts built from the same agent config.
    """

    id: str
    included: bool
    reason: str
    priority: int
    chars: int = 0
    detail: str = ""
    text: str = ""
    source: str = "contributors"
    chars_before: int = 0  # the rendered size before a budget trimmed or cut it (0: untouched)
    tools: tuple[str, ...] = ()
    compressible: bool = True

    def as_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "included": self.included, "reason": self.reason, "priority": self.priority,
               "chars": self.chars, "detail": self.detail, "source": self.source}
        if self.chars_before:
            out["chars_before"] = self.chars_before
        return out


@dataclass
class AssembledPrompt:
    """The prompt text and one :class:`Inclusion` per contributor, in priority order."""

    text: str
    report: list[Inclusion]

    @property
    def cut(self) -> list[Inclusion]:
        """Sections dropped to fit the budget."""
        return [r for r in self.report if r.reason == "cut by budget"]

    @property
    def trimmed(self) -> list[Inclusion]:
        """Sections shortened to fit their source's budget."""
        return [r for r in self.report if r.included and r.chars_before]

    @property
    def dropped_tools(self) -> set[str]:
        """Tools whose explaining section was cut: they leave the request with it."""
        return {t for r in self.report if r.reason == "cut by budget" for t in r.tools}


def _tags(c: PromptContributor) -> list[Tag]:
    raw = c.tags or []
    if all(type(t) is Tag for t in raw):
        return raw
    parsed = [Tag.parse(t) for t in raw]
    try:
        c.tags = parsed  # parse once per contributor object
    except AttributeError:
        pass
    return parsed


def _trim(text: str, limit: int) -> str:
    if limit <= 0:
        return ""
    return text[: max(0, limit - 1)].rstrip() + ELLIPSIS


def assemble(
    contributors: Iterable[PromptContributor],
    ctx: ContributorContext,
    total_chars: int | None = None,
    on_error: Callable[[PromptContributor, BaseException], Any] | None = None,
    budgets: dict[str, int] | None = None,
) -> AssembledPrompt:
    """Select, order, render and budget the contributors' sections.

    ``budgets`` bounds each source's sections (characters per ``source``): over it, the
    source's lowest-priority sections are trimmed (if ``compressible`` and enough room is
    left) or cut, except ``system`` sections, which are only trimmed. ``total_chars`` then
    bounds the whole prompt (sections joined by a blank line), cutting the lowest-priority
    non-system sections first. A contributor that raises is reported as ``failed`` (and
    passed to ``on_error``), never fatal.
    """
    report = [_reuse(c, ctx, on_error) if getattr(c, "stable", False) else _render(c, ctx, on_error)
              for c in sorted(contributors, key=_ORDER)]
    chosen = [i for i in report if i.included]
    # each source's size and the total in one pass: only what is over its budget is fitted (a group
    # that fits is left as it is, which is all _fit would do with it)
    sizes: dict[str, int] = {}
    total = -2
    for i in chosen:
        sizes[i.source] = sizes.get(i.source, -2) + i.chars + 2  # (+2 per blank line between sections)
        total += i.chars + 2
    over = [s for s, limit in budgets.items() if sizes.get(s, 0) > limit] if budgets else []
    if over or (total_chars is not None and total > total_chars):
        report, chosen = _own(report, chosen)
        for source in over:
            limit = budgets[source]  # type: ignore[index]
            _fit(chosen, [i for i in chosen if i.source == source], limit, f"the {source} budget ({limit} chars)")
        if total_chars is not None and chosen:
            _fit(chosen, chosen, total_chars, f"the {total_chars}-char prompt budget", trim=False)
    return AssembledPrompt("\n\n".join([i.text for i in chosen]), report)


def _own(report: list[Inclusion], chosen: list[Inclusion]) -> tuple[list[Inclusion], list[Inclusion]]:
    """Copies of the included sections, for a budget to trim or cut (a stable contributor's
    Inclusion is shared with other prompts and never changed)."""
    copies = {id(i): replace(i) for i in chosen}
    return [copies.get(id(i), i) for i in report], [copies[id(i)] for i in chosen]


_ORDER = attrgetter("priority", "id")  # the sort key (priority, id), without a Python call per contributor


MIN_TRIM = 200  # a section trimmed below this is cut instead


def _fit(chosen: list[Inclusion], group: list[Inclusion], limit: int, what: str, *, trim: bool = True) -> None:
    """Make ``group`` (a part of ``chosen``) fit ``limit`` characters, lowest priority first."""
    size = sum(i.chars for i in group) + 2 * max(0, len(group) - 1)
    for inc in reversed(group):
        if size <= limit:
            return
        room = limit - (size - inc.chars)
        if inc.source == "system" or (trim and inc.compressible and room >= MIN_TRIM):
            before = inc.chars
            inc.text = _trim(inc.text, max(room, MIN_TRIM))
            inc.chars, inc.chars_before = len(inc.text), inc.chars_before or before
            size -= before - inc.chars
            note = f"trimmed from {before} to {inc.chars} chars to fit {what}"
            inc.detail = f"{inc.detail}; {note}" if inc.detail else note
            continue
        chosen.remove(inc)
        size -= inc.chars + 2
        inc.included, inc.reason, inc.chars_before = False, "cut by budget", inc.chars_before or inc.chars
        over = f"{inc.chars} chars did not fit {what}" + (f"; its tools {', '.join(inc.tools)} leave the request" if inc.tools else "")
        inc.detail = f"{inc.detail}; {over}" if inc.detail else over


def _reuse(c: PromptContributor, ctx: ContributorContext, on_error: Callable[[PromptContributor, BaseException], Any] | None) -> Inclusion:
    """A ``stable`` contributor's :func:`_render`, once per agent config: its Inclusion is kept on it
    and returned again (shared: :func:`_own` copies it before a budget changes it). A tagged one is
    matched every time (the classification changes), and a failure is asked and reported again."""
    agent = ctx.agent
    if c.tags or agent is None:
        return _render(c, ctx, on_error)
    memo = getattr(c, "_rendered", None)  # (agent config, its Inclusion)
    if memo is not None and memo[0] is agent:
        return memo[1]
    inc = _render(c, ctx, on_error)
    if inc.reason != "failed":
        try:
            c._rendered = (agent, inc)
        except AttributeError:  # (a class with __slots__: rendered every time)
            pass
    return inc


def _left_out(c: PromptContributor, reason: str, detail: str, source: str, tools: tuple[str, ...], compressible: bool) -> Inclusion:
    """The Inclusion of a contributor that is not in the prompt (``reason``, ``detail``)."""
    return Inclusion(c.id, False, reason, c.priority, 0, detail, "", source, 0, tools, compressible)


def _render(c: PromptContributor, ctx: ContributorContext, on_error: Callable[[PromptContributor, BaseException], Any] | None) -> Inclusion:
    """One contributor's decision and section (``included`` False with the reason otherwise)."""
    try:  # (PromptContributor declares them; a contributor of another class may not)
        source, tools, compressible = c.source, c.tools, c.compressible
    except AttributeError:
        source, tools, compressible = (getattr(c, "source", "contributors"), getattr(c, "tools", ()),
                                       getattr(c, "compressible", True))
    if type(tools) is not tuple:
        tools = tuple(tools or ())
    if c.tags:
        try:
            tags = _tags(c)
        except ValueError as exc:
            if on_error:
                on_error(c, exc)
            return _left_out(c, "failed", f"bad tag: {exc}", source, tools, compressible)
        matched = [t for t in tags if tag_matches(t, ctx)]
        if not matched:
            return _left_out(c, "no tag matched", "", source, tools, compressible)
        reason = "tag matched"
        detail = ", ".join(f"{t.dimension}:{t.value}" for t in matched)
    else:
        reason, detail = "untagged", ""
    try:
        if not c.should_contribute(ctx):
            return _left_out(c, "filtered", detail, source, tools, compressible)
        section = c.contribute(ctx)
    except Exception as exc:
        if on_error:
            on_error(c, exc)
        return _left_out(c, "failed", f"{type(exc).__name__}: {exc}", source, tools, compressible)
    if section is None:
        return _left_out(c, "filtered", "no section", source, tools, compressible)
    if isinstance(section, str):
        text, limit = section, c.max_chars
    else:
        if section.tools is not None:
            tools = tuple(section.tools)
        text = section.render()
        limit = section.max_chars
        if c.max_chars is not None and (limit is None or c.max_chars < limit):
            limit = c.max_chars
    if limit is not None and len(text) > limit and compressible:
        text = _trim(text, limit)
        detail = f"{detail}; trimmed to {limit} chars" if detail else f"trimmed to {limit} chars"
    if not text.strip():
        return _left_out(c, "filtered", "empty section", source, tools, compressible)
    return Inclusion(c.id, True, reason, c.priority, len(text), detail, text, source, 0, tools, compressible)
