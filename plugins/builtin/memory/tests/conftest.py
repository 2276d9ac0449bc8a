"""Shared by the memory plugin's tests."""

from __future__ import annotations

import pytest

import clawkit_memory


class Spy:
    """Keeps each turn's ``ctx.state["memory.recall"]`` as the model call sees it."""

    def __init__(self):
        self.states: list[dict | None] = []

    @clawkit_memory.hookimpl
    def before_llm_call(self, ctx, request):
        self.states.append(dict(ctx.state["memory.recall"]) if "memory.recall" in ctx.state else None)


@pytest.fixture
def spy() -> Spy:
    """A plugin to register on an agent: what recall left for each model call."""
    return Spy()
