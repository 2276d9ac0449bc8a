"""Offline token counting with tiktoken, for this plugin and any other (truncator, compaction…).

tiktoken downloads its encodings on first use, which is impossible offline; litellm
ships the cache files for ``cl100k_base``, ``o200k_base`` and ``p50k_base``, so we
point tiktoken at them (``CUSTOM_TIKTOKEN_CACHE_DIR`` is the variable litellm
itself respects; it overwrites ``TIKTOKEN_CACHE_DIR`` on its first tokenizer use).
Neither litellm nor tiktoken is imported until a count is asked for.

Inputs are bounded: tiktoken's regex fails (or, in some builds, panics) on very
long runs of whitespace, so text is encoded in windows, and text beyond
``MAX_EXACT_CHARS`` is estimated from its prefix.
"""

from __future__ import annotations

import importlib.util
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

BUNDLED_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base")
WINDOW_CHARS = 50_000
MAX_EXACT_CHARS = 2_000_000
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")


def litellm_tokenizer_dir() -> Path | None:
    """The directory of tiktoken cache files bundled with litellm (found without importing it)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"
    return path if path.is_dir() else None


def configure_offline_tiktoken() -> None:
    """Point tiktoken (and litellm) at the bundled encodings, unless the user chose a cache dir."""
    if os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR"):
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.environ["CUSTOM_TIKTOKEN_CACHE_DIR"])
        return
    bundled = litellm_tokenizer_dir()
    if bundled is not None:
        os.environ["CUSTOM_TIKTOKEN_CACHE_DIR"] = str(bundled)
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))


def encoding_name_for(model: str | None) -> str:
    """The bundled tiktoken encoding that best approximates ``model``'s tokenizer.

    OpenAI's recent families use ``o200k_base``; everything else (older OpenAI,
    Anthropic, open models) is approximated with ``cl100k_base``.
    """
    name = (model or "").lower().rsplit("/", 1)[-1]
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    return "cl100k_base"


@lru_cache(maxsize=8)
def _encoding(name: str) -> Any:
    if name not in BUNDLED_ENCODINGS:
        raise ValueError(f"encoding {name!r} is not available offline; use one of {', '.join(BUNDLED_ENCODINGS)}")
    configure_offline_tiktoken()
    import tiktoken

    return tiktoken.get_encoding(name)


def encoding_for(model: str | None = None) -> Any:
    """A ``tiktoken.Encoding`` for ``model`` (loaded offline; cached)."""
    return _encoding(encoding_name_for(model))


_SPLIT_AT = re.compile(r"\s\S")


def _windows(text: str, size: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``size`` chars, preferring word starts."""
    out, start = [], 0
    while len(text) - start > size:
        end = start + size
        floor = start + size // 2
        cut = None
        for m in _SPLIT_AT.finditer(text, floor, end):
            cut = m.start() + 1
        end = cut or end
        out.append(text[start:end])
        start = end
    out.append(text[start:])
    return out


def _encode_len(enc: Any, text: str) -> int:
    total = 0
    for piece in _windows(text, WINDOW_CHARS):
        try:
            total += len(enc.encode(piece, disallowed_special=()))
        except BaseException as exc:  # pyo3 panics are BaseException; never let a count crash a turn
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            total += (len(piece) + 3) // 4
    return total


def count_tokens(text: str, model: str | None = None, *, max_exact_chars: int = MAX_EXACT_CHARS) -> int:
    """Tokens in ``text`` for ``model``.

    Exact (to the window seams) up to ``max_exact_chars`` characters; longer text
    is estimated by scaling the count of its first ``max_exact_chars`` characters.
    """
    if not text:
        return 0
    enc = encoding_for(model)
    if len(text) <= max_exact_chars:
        return _encode_len(enc, text)
    head = _encode_len(enc, text[:max_exact_chars])
    return round(head * len(text) / max_exact_chars)


def truncate_to_tokens(text: str, max_tokens: int, model: str | None = None) -> str:
    """The longest prefix of ``text`` that fits in ``max_tokens`` tokens.

    Only a bounded prefix is encoded (about eight characters per token is the most
    any encoding here packs), so this is cheap on huge inputs.
    """
    if max_tokens <= 0 or not text:
        return ""
    head = text[: max_tokens * 8]
    enc = encoding_for(model)
    pieces = _windows(head, WINDOW_CHARS)
    out, used = [], 0
    for piece in pieces:
        try:
            tokens = enc.encode(piece, disallowed_special=())
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            keep = max(0, (max_tokens - used) * 4)
            out.append(piece[:keep])
            return "".join(out)
        if used + len(tokens) <= max_tokens:
            out.append(piece)
            used += len(tokens)
            continue
        out.append(enc.decode(tokens[: max_tokens - used]).rstrip("\ufffd"))  # no half characters
        return "".join(out)
    return "".join(out)
