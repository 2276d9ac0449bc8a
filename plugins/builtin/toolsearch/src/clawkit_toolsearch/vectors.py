"""Semantic ranking of tools with an embedding provider registered through the kernel's hook."""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("clawkit.toolsearch")
_lock = threading.Lock()
_providers: dict[str, Any] = {}
_matrices: dict[tuple, Any] = {}


def provider(hooks: Any, name: str) -> Any | None:
    """The embedding provider ``name`` (``factory(None)``: its defaults), or None when none is registered."""
    with _lock:
        if name in _providers:
            return _providers[name]
        found: dict[str, Any] = {}
        hooks.call_sync("register_embedding_provider", register=lambda n, f: found.__setitem__(n, f))
        p = None
        if name in found:
            try:
                p = found[name](None)
            except Exception as exc:  # retrieval falls back to BM25 alone
                log.warning("embedding provider %r unavailable: %r", name, exc)
        _providers[name] = p
        return p


def text_of(name: str, description: str) -> str:
    return f"{name.replace('_', ' ')}: {description}"


def rank(emb: Any, key: tuple, query: str, k: int) -> list[str]:
    """Tool names by cosine similarity to ``query`` (the tool matrix is embedded once per tool set)."""
    import numpy as np

    m = _matrices.get((id(emb), key))
    if m is None:
        m = np.asarray(emb.embed([text_of(n, d) for n, d, _ in key]), dtype=np.float32)
        if len(_matrices) > 16:
            _matrices.clear()
        _matrices[(id(emb), key)] = m
    q = np.asarray(emb.embed([query]), dtype=np.float32)[0]
    order = np.argsort(-(m @ q))[:k]
    return [key[i][0] for i in order]


def fuse(*rankings: list[str], k: int, c: float = 3.0) -> list[str]:
    """Reciprocal-rank fusion of several rankings (``c`` damps the tail)."""
    score: dict[str, float] = {}
    for ranking in rankings:
        for r, name in enumerate(ranking):
            score[name] = score.get(name, 0.0) + 1.0 / (c + r)
    return sorted(score, key=lambda n: -score[n])[:k]
