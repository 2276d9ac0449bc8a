"""Durable steps: the seam through which an execution engine checkpoints a turn's model
calls and tool executions (see the ``durable_steps`` hook).

Without an engine the kernel calls the model and the tools directly. With one, each
model call and each tool execution is handed to a :class:`StepRunner`, which may run it
or return the result it recorded the first time (a turn recovered after a crash replays
its finished steps instead of repeating them).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Awaitable, Callable, Protocol

from .types import LlmRequest, LlmResponse, ToolCall, ToolResult

idempotency_key: ContextVar[str | None] = ContextVar("clawkit_idempotency_key", default=None)
"""Set while a durable tool step runs: the same key on every attempt of that step, so a tool
with side effects can tell a retry of an interrupted step from a new call (``ctx.idempotency_key``)."""


class StepRunner(Protocol):
    """What the ``durable_steps`` hook returns; every method is called in the turn's own task."""

    async def model(self, ctx: Any, request: LlmRequest, call: Callable[[], Awaitable[LlmResponse]]) -> LlmResponse:
        """Run ``call`` (one model call, with its retries) as a step and return its response."""

    def reserve(self, ctx: Any, calls: list[ToolCall]) -> None:
        """One model response's tool calls, in the model's order, before any of them runs
        (they run concurrently: the engine numbers its steps here, deterministically)."""

    async def tool(self, ctx: Any, call: ToolCall, run: Callable[[], Awaitable[ToolResult]]) -> ToolResult:
        """Run ``run`` (the tool's execution, after the gates and any approval) as a step."""
