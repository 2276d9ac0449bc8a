"""Offline, bounded token counting with tiktoken — shared by every plugin that counts.

The kernel does not depend on tiktoken: plugins that count tokens (truncator,
compaction, litellm, the prompt command) depend on it, and without it (or without
an encoding file) counts are character estimates that say so.

tiktoken downloads its encodings on first use, which is impossible offline.
litellm ships the cache files for ``cl100k_base`` and ``o200k_base``; we find
litellm's package directory *without importing it* (the import costs ~2.5 s) and
point tiktoken's cache at it. ``CUSTOM_TIKTOKEN_CACHE_DIR`` (the variable litellm
respects) or an existing ``TIKTOKEN_CACHE_DIR`` that already holds the file win.
If no encoding file is found, nothing touches the network: :func:`get_counter`
returns a character estimator that says so (``exact`` is False).

Every input handed to tiktoken is bounded (windows of ``WINDOW_CHARS``) and
every tiktoken call is guarded against ``BaseException``: o200k panics (a pyo3
``PanicException``) on very long whitespace runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger("clawkit.tokens")

WINDOW_CHARS = 20_000
CHARS_PER_TOKEN = 4.0  # the estimate used when no tokenizer is available
MAX_CHARS_PER_TOKEN = 8  # no encoding here packs more on ordinary text: prefixes are sized with it
_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "p50k_base": "https://openaipublic.blob.core.windows.net/encodings/p50k_base.tiktoken",
}
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
_SPLIT_AT = re.compile(r"\s\S")


def encoding_name_for(model: str | None) -> str:
    """The bundled encoding closest to ``model``'s tokenizer (o200k for recent OpenAI, else cl100k)."""
    name = (model or "").lower().rsplit("/", 1)[-1]
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


def litellm_package_dir() -> Path | None:
    """Where the installed litellm package lives, found without importing it (its data files —
    tokenizer caches, the price table — are read from here), or None."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _litellm_tokenizer_dir() -> str | None:
    base = litellm_package_dir()
    path = base / "litellm_core_utils" / "tokenizers" if base is not None else None
    return str(path) if path is not None and path.is_dir() else None


def _cache_file(directory: str | None, encoding: str) -> str | None:
    if not directory:
        return None
    path = os.path.join(directory, hashlib.sha1(_URLS[encoding].encode()).hexdigest())
    return path if os.path.exists(path) else None


@lru_cache(maxsize=4)
def _load(encoding: str) -> Any:
    """The tiktoken Encoding, loaded from a local cache file, or raise LookupError."""
    if encoding not in _URLS:
        raise LookupError(f"encoding {encoding} is not bundled offline")
    for directory in (os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR"), _litellm_tokenizer_dir()):
        if _cache_file(directory, encoding):
            # same semantics as litellm: tiktoken reads TIKTOKEN_CACHE_DIR
            os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
            import tiktoken

            return tiktoken.get_encoding(encoding)
    raise LookupError(f"no offline cache file for {encoding} (install litellm or set CUSTOM_TIKTOKEN_CACHE_DIR)")


def windows(text: str, size: int | None = None) -> list[str]:
    """Cut ``text`` into pieces of at most ``size`` chars, preferring word starts."""
    size = size or WINDOW_CHARS
    out, start = [], 0
    while len(text) - start > size:
        end = start + size
        cut = None
        for m in _SPLIT_AT.finditer(text, start + size // 2, end):
            cut = m.start() + 1
        end = cut or end
        out.append(text[start:end])
        start = end
    out.append(text[start:])
    return out


def _fatal(exc: BaseException) -> bool:
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit))


@dataclass
class TokenCounter:
    """Counts tokens for one encoding; ``exact`` is False when counts are character estimates."""

    encoding_name: str
    encoding: Any = None
    reason: str = ""
    _memo: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)

    @property
    def exact(self) -> bool:
        return self.encoding is not None

    def encode(self, text: str) -> list[int] | None:
        """Token ids of ``text`` (window by window), or None when the tokenizer failed."""
        if self.encoding is None:
            return None
        out: list[int] = []
        for piece in windows(text):
            try:
                out.extend(self.encoding.encode(piece, disallowed_special=()))
            except BaseException as exc:  # pyo3 PanicException is a BaseException
                if _fatal(exc):
                    raise
                log.warning("tokenizer failed on a %d-char window: %r", len(piece), exc)
                return None
        return out

    def decode(self, tokens: list[int]) -> str:
        return self.encoding.decode(tokens).rstrip("\ufffd")  # no half characters at a cut

    def count(self, text: str, *, max_exact_chars: int = 400_000) -> int:
        """Tokens in ``text``: exact up to ``max_exact_chars``, then scaled from that prefix.

        Counts are memoised by (hash, length): a history is re-counted before every
        model call, and a str caches its own hash, so repeats cost a dict lookup.
        """
        if not text:
            return 0
        if self.encoding is None:
            return int(len(text) / CHARS_PER_TOKEN) + 1
        key = (hash(text), len(text))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        sample = text[:max_exact_chars]
        tokens = self.encode(sample)
        n = len(tokens) if tokens is not None else int(len(sample) / CHARS_PER_TOKEN) + 1
        n = n if len(text) <= max_exact_chars else round(n * len(text) / len(sample))
        if len(self._memo) > 50_000:
            self._memo.clear()
        self._memo[key] = n
        return n


@lru_cache(maxsize=4)
def get_counter_for_encoding(encoding: str) -> TokenCounter:
    try:
        return TokenCounter(encoding, _load(encoding))
    except BaseException as exc:
        if _fatal(exc):
            raise
        log.warning("tiktoken encoding %s unavailable, estimating tokens from characters: %s", encoding, exc)
        return TokenCounter(encoding, None, reason=str(exc))


def get_counter(model: str | None = None, encoding: str | None = None) -> TokenCounter:
    """A counter for ``model`` (or an explicit ``encoding``); never raises."""
    return get_counter_for_encoding(encoding or encoding_name_for(model))


def count_tokens(text: str, model: str | None = None, *, max_exact_chars: int = 400_000) -> int:
    """Tokens in ``text`` for ``model`` (exact up to ``max_exact_chars``, then scaled); never raises."""
    return get_counter(model).count(text, max_exact_chars=max_exact_chars)


def truncate_to_tokens(text: str, max_tokens: int, model: str | None = None) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` tokens.

    Only a bounded prefix is encoded (about ``MAX_CHARS_PER_TOKEN`` characters per
    token is the most any encoding here packs), so huge inputs cost what small ones do.
    """
    if max_tokens <= 0 or not text:
        return ""
    head = text[: max_tokens * MAX_CHARS_PER_TOKEN]
    counter = get_counter(model)
    tokens = counter.encode(head)
    if tokens is None:
        return head[: int(max_tokens * CHARS_PER_TOKEN)]
    return head if len(tokens) <= max_tokens else counter.decode(tokens[:max_tokens])


_schema_sizes: dict[int, tuple[Any, int, Any, int, int]] = {}  # id(schema) -> (schema, len, its properties, size)


def _schema_chars(schema: Any) -> int:
    """``len(str(schema))``, remembered per schema dict: tool schemas are built once and offered
    on every model call (``str`` of one costs microseconds; a request offers dozens). A dict
    that gained or lost keys, or whose ``properties`` were replaced, is measured again."""
    if not isinstance(schema, dict):
        return len(str(schema))
    props = schema.get("properties")
    hit = _schema_sizes.get(id(schema))
    if hit is not None and hit[0] is schema and hit[1] == len(schema) and hit[2] is props \
            and (not isinstance(props, dict) or hit[4] == len(props)):
        return hit[3]
    size = len(str(schema))
    if len(_schema_sizes) > 4096:
        _schema_sizes.clear()
    _schema_sizes[id(schema)] = (schema, len(schema), props, size, len(props) if isinstance(props, dict) else -1)
    return size


def max_request_tokens(request: Any) -> int:
    """An upper bound of a request's tokens (system, tool schemas, messages with their
    per-message and per-call overheads), computed without a tokenizer.

    A token covers at least one UTF-8 byte and a character takes at most four bytes (six
    in JSON's ``\\uXXXX`` escapes of tool arguments), so most turns can tell they are far
    below a window limit without loading or running tiktoken."""
    chars = len(request.system)
    for t in request.tools:
        chars += len(t.name) + len(t.description) + _schema_chars(t.parameters) + 100
    overhead = 0
    for m in request.messages:
        chars += len(m.content)
        overhead += 4
        if m.blocks:  # attachments: their estimate, never their base64
            from .content_parts import block_tokens

            overhead += block_tokens(m)
        for c in m.tool_calls:
            chars += 2 * len(str(c.arguments)) + 4
            overhead += 8
    return 4 * chars + overhead


ESTIMATE_MAX_CHARS = 400_000  # per piece of text: past it, the count is scaled from this prefix


def estimate_usage(request: Any, response: Any, model: str | None = None) -> Any:
    """The :class:`clawkit.types.Usage` of one model call counted locally, for a provider that
    reported none: the request's system text, messages, tool calls and tool schemas as prompt
    tokens (with the per-message overheads OpenAI documents), the answer's text and tool calls as
    completion tokens; ``estimated`` is set. Each piece is counted exactly up to
    ``ESTIMATE_MAX_CHARS`` and scaled past it (counts are memoised, so a history re-sent on every
    call is counted once); without an offline encoding it is a character estimate. Never raises."""
    import json

    from .types import Usage

    counter = get_counter(model or getattr(request, "model", None))

    def n(text: str) -> int:
        return counter.count(text, max_exact_chars=ESTIMATE_MAX_CHARS) if text else 0

    def calls(tool_calls: Any) -> int:
        total = 0
        for c in tool_calls or ():
            args = c.raw_arguments or json.dumps(c.arguments, ensure_ascii=False, default=str)
            total += 8 + n(c.name) + n(args)
        return total

    prompt = 3 + (n(request.system) + 4 if request.system else 0)
    for m in request.messages:
        prompt += 4 + n(m.content) + calls(m.tool_calls)
        if m.blocks:
            from .content_parts import block_tokens

            prompt += block_tokens(m)
    for t in request.tools:
        prompt += 8 + n(t.name) + n(t.description) + n(json.dumps(t.parameters, ensure_ascii=False, default=str))
    completion = n(response.content) + calls(response.tool_calls)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, estimated=True)
