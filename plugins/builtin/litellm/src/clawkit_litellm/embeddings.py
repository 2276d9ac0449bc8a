"""Remote embeddings through ``litellm.embedding``, offered to memory (or any plugin) via
``register_embedding_provider`` as ``litellm``.

``config`` is the caller's embedding settings object (duck-typed): ``model``,
``api_base``, ``api_key``, ``timeout``, ``dimensions`` and ``settings()`` for extra
keyword arguments. litellm is imported on the first call only.
"""

from __future__ import annotations

from typing import Any

# settings that belong to local providers, never forwarded to litellm
_LOCAL_ONLY = ("model_path", "tokenizer_path", "threads")


class EmbeddingError(RuntimeError):
    """The remote embedding call could not be made."""


class LiteLLMEmbeddings:
    """OpenAI, Gemini, any OpenAI-compatible endpoint: ``embed(texts) -> list[list[float]]``."""

    def __init__(self, config: Any):
        if not getattr(config, "model", None):
            raise EmbeddingError("plugins.memory.embedding.model: the litellm provider needs a model, "
                                 "e.g. openai/text-embedding-3-small")
        self.config = config
        self.model = config.model
        self._dims = getattr(config, "dimensions", None)

    @property
    def dimensions(self) -> int:
        if self._dims is None:
            self._dims = len(self.embed(["dimension probe"])[0])
        return self._dims

    def embed(self, texts: list[str]) -> list[list[float]]:
        from ._litellm import load_litellm

        litellm = load_litellm()
        cfg = self.config
        kwargs: dict[str, Any] = {"model": self.model, "input": list(texts), "timeout": getattr(cfg, "timeout", 30.0)}
        if getattr(cfg, "api_base", None):
            kwargs["api_base"] = cfg.api_base
        if getattr(cfg, "api_key", None):
            kwargs["api_key"] = cfg.api_key
        settings = cfg.settings() if callable(getattr(cfg, "settings", None)) else {}
        kwargs.update({k: v for k, v in settings.items() if k not in _LOCAL_ONLY})
        try:
            resp = litellm.embedding(**kwargs)
        except Exception as exc:
            raise EmbeddingError(f"embedding with {self.model} failed: {type(exc).__name__}: {exc}") from exc
        data = sorted(resp.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index)
        vecs = [list(d["embedding"] if isinstance(d, dict) else d.embedding) for d in data]
        if self._dims is None and vecs:
            self._dims = len(vecs[0])
        return vecs
