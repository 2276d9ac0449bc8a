"""A BM25 index over tool definitions: SQLite FTS5 in memory, built once per tool set."""

from __future__ import annotations

import re
import sqlite3
from functools import lru_cache
from typing import Iterable

_WORD = re.compile(r"[A-Za-z0-9]+")
# words that carry no information about which tool is meant
STOP = frozenset(
    "a an the and or of to in on for with by at from into is are be it this that these those my our your me us "
    "please can could would should will i we you they them some any all about as do does did so then now just "
    "what which who how when where there here get".split()
)


def words(text: str) -> list[str]:
    """Lower-case words of ``text``; identifiers split on ``_``, camelCase and digits."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text.replace("_", " "))
    return [w.lower() for w in _WORD.findall(spaced)]


def document(name: str, description: str, params: Iterable[str]) -> str:
    return " ".join(words(name) + words(description) + [w for p in params for w in words(p)])


class ToolIndex:
    """Tools by name, searchable with BM25 (name words weigh double)."""

    def __init__(self, tools: tuple[tuple[str, str, tuple[str, ...]], ...]):
        self.names = [t[0] for t in tools]
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        self.db.execute("CREATE VIRTUAL TABLE t USING fts5(name, body, tokenize='porter unicode61')")
        self.db.executemany(
            "INSERT INTO t(rowid, name, body) VALUES (?, ?, ?)",
            [(i, " ".join(words(n)), document(n, d, p)) for i, (n, d, p) in enumerate(tools)],
        )

    def _match(self, query: str) -> str | None:
        terms = [w for w in dict.fromkeys(words(query)) if w not in STOP]
        return " OR ".join(f'"{w}"' for w in terms) if terms else None

    def search(self, query: str, k: int) -> list[str]:
        match = self._match(query)
        if match is None or k <= 0:
            return []
        rows = self.db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t, 2.0, 1.0) LIMIT ?", (match, k)
        ).fetchall()
        return [self.names[r[0]] for r in rows]

    def scores(self, query: str) -> dict[int, float]:
        """BM25 score (higher is better) of every tool that matches, by its position in the tool set."""
        match = self._match(query)
        if match is None:
            return {}
        return dict(self.db.execute("SELECT rowid, -bm25(t, 2.0, 1.0) FROM t WHERE t MATCH ?", (match,)).fetchall())


@lru_cache(maxsize=16)
def index_for(tools: tuple[tuple[str, str, tuple[str, ...]], ...]) -> ToolIndex:
    """One index per distinct tool set (an agent's set changes only when tools are added or removed)."""
    return ToolIndex(tools)
