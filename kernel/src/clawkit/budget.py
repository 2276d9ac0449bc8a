"""The context budget: one allocator for how a model's window is shared between prompt sources.

Every source that puts text into a request asks the same budget instead of keeping its own
threshold: prompt assembly (per-source shares of the system prompt), compaction (when to
summarise history), the truncator (how large one tool result may be), tool retrieval (how
much the tool definitions may take). Shares are fractions of the model's window in tokens;
character budgets assume ~4 characters a token (conservative for English and code).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

CHARS_PER_TOKEN = 4
SOURCES = ("system", "skills", "project_files", "plan", "memory", "contributors", "tools", "tool_results")


class Shares(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system: float = Field(0.10, gt=0, le=1, description="identity and the agent's instructions (trimmed last, never dropped)")
    skills: float = Field(0.15, gt=0, le=1, description="active skills' instructions (never trimmed; dropped only with their tools)")
    project_files: float = Field(0.10, gt=0, le=1, description="workspace files such as README.md / AGENTS.md")
    plan: float = Field(0.03, gt=0, le=1, description="the session's plan")
    memory: float = Field(0.08, gt=0, le=1, description="recalled memories")
    contributors: float = Field(0.10, gt=0, le=1, description="every other prompt section")
    tools: float = Field(0.15, gt=0, le=1, description="tool definitions (above it, tool retrieval sends the relevant ones)")
    tool_results: float = Field(0.30, gt=0, le=1, description="one tool result (above it, the result is cut head + tail)")


class ContextConfig(BaseModel):
    """``context:`` in the agent YAML: how the window is shared (fractions of it)."""

    model_config = ConfigDict(extra="forbid")

    reserve: float = Field(0.15, ge=0, lt=0.9, description="kept free for the reply")
    summarize_at: float = Field(0.70, gt=0, le=0.95, description="history is summarised when the request passes this share")
    shares: Shares = Field(default_factory=Shares)


class ContextBudget:
    """The budget for one agent's window, in tokens (and characters, for text sources)."""

    def __init__(self, window: int, config: ContextConfig | None = None):
        self.window = window
        self.config = config or ContextConfig()

    def tokens(self, source: str) -> int:
        """Most tokens ``source`` may take in one request."""
        share = getattr(self.config.shares, source, None)
        if share is None:
            share = self.config.shares.contributors
        return int(self.window * share)

    def chars(self, source: str) -> int:
        return self.tokens(source) * CHARS_PER_TOKEN

    @property
    def reserve_tokens(self) -> int:
        return int(self.window * self.config.reserve)

    @property
    def summarize_at_tokens(self) -> int:
        """Request size (tokens) past which history is summarised."""
        return int(self.window * self.config.summarize_at)

    def prompt_chars(self) -> dict[str, int]:
        """Character budgets of the prompt's text sources, for :func:`clawkit.prompt.assemble`."""
        return {s: self.chars(s) for s in SOURCES if s not in ("tools", "tool_results")}
