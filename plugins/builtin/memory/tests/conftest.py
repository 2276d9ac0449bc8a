"""Shared by the memory plugin's tests."""

from __future__ import annotations

import json
import sqlite3

import pytest

import clawkit_memory
from clawkit.provenance import mark_untrusted
from clawkit.types import Message


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


class Episodes:
    """Past sessions written straight into a session store, for the episode tests."""

    @staticmethod
    def session(store, question: str, answer: str, sid: str | None = None) -> str:
        """A finished turn (``question``, ``answer``) in a new session of agent ``a`` (or in ``sid``)."""
        sid = sid or store.create("a")
        store.append(sid, Message(role="user", content=question))
        store.append(sid, Message(role="assistant", content=answer))
        return sid

    @staticmethod
    def untrust(store, sid: str, detail: str) -> None:
        """Session ``sid`` now records untrusted content (a file ``detail`` read), as a turn would."""
        meta = store.load_metadata(sid)
        holder = {"untrusted": meta.get("untrusted")}

        class S:
            def get(self, key):
                return holder.get(key)

            def set(self, key, value):
                holder[key] = value

        mark_untrusted(S(), "read_file", detail, kind="file")
        Episodes.set_metadata(store, sid, json.dumps({**meta, "untrusted": holder["untrusted"]}))

    @staticmethod
    def set_metadata(store, sid: str, metadata: str) -> None:
        """Overwrite a session's stored metadata (raw JSON text) from another connection."""
        conn = sqlite3.connect(store.path)
        try:
            with conn:
                conn.execute("UPDATE sessions SET metadata = ? WHERE id = ?", (metadata, sid))
        finally:
            conn.close()


@pytest.fixture
def episodes() -> type[Episodes]:
    """Helpers that write past sessions (and their provenance) into a session store."""
    return Episodes
