"""Token counting for litellm's models, and tiktoken pointed at litellm's bundled encodings.

The counting itself is :mod:`clawkit.tokens` (shared by every plugin); this module
adds what is litellm's own: where its bundled tiktoken cache files live, and
configuring tiktoken (and litellm, which reads ``CUSTOM_TIKTOKEN_CACHE_DIR``) to use
them, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from clawkit.tokens import count_tokens, encoding_name_for, get_counter, truncate_to_tokens

BUNDLED_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base")
MAX_EXACT_CHARS = 2_000_000

__all__ = ["count_tokens", "encoding_for", "encoding_name_for", "truncate_to_tokens", "configure_offline_tiktoken"]


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


def encoding_for(model: str | None = None) -> Any:
    """A ``tiktoken.Encoding`` for ``model`` (loaded offline), or None when none is available."""
    return get_counter(model).encoding
