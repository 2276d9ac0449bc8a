"""The default ``local`` embedding provider: all-MiniLM-L6-v2, shipped with this package as int8
weights and run in numpy (:mod:`.bert`), tokenized by :mod:`.wordpiece`. No onnxruntime, no
``tokenizers``, nothing downloaded; recall@3 of MiniLM itself (docs/plugins/memory.md).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .config import EmbeddingConfig
from .errors import EmbeddingError

_MODELS: dict[str, tuple[Any, Any]] = {}  # weights file -> (tokenizer, model): one per process
_GUARD = threading.Lock()
TOKENS_PER_PASS = 512  # a forward pass's tokens: its activations stay near 5 MiB (a batch is no faster per text)


def _limit_blas(threads: int) -> None:
    """BLAS threads for the whole process, set once when the model first loads — not around each
    pass: a limit entered and left per call is process-wide state, so two threads embedding at once
    restored each other's (a pass then ran on OpenBLAS's pool: 5-30× the CPU on 2 shared cores), and
    a process forking (a tool's subprocess) while a pass waited on that pool deadlocked in OpenBLAS's
    fork handler (seen in CI: ``blas_thread_shutdown_`` against a memory thread's matmul). With one
    thread a pass never uses the pool. docs/plugins/memory.md says so."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


class LocalEmbeddings:
    """all-MiniLM-L6-v2 (384 dimensions): texts truncated at 256 tokens, mean pooling over the
    tokens, L2 normalisation — sentence-transformers' pipeline. ``model_path`` / ``vocab_path``
    point at another copy of the files (``scripts/quantize_minilm.py`` writes them); ``threads``
    the process's BLAS threads once the model loads (1: on 2 shared cores, 2 threads took 5-30× the
    CPU, and a fork while a pass used the pool could deadlock; :func:`_limit_blas`)."""

    model = "local/all-MiniLM-L6-v2-q8"
    dimensions = 384
    max_length = 256
    # recall's default floor, measured on the fixture corpus (memory_queries.json): the labelled section of
    # 90 % of 97 answered questions scores ≥ 0.307 (5 %: 0.257), the best chunk for 20 unrelated requests
    # 0.07-0.288; 0.35 (other providers') dropped ~17 % of the answers
    min_similarity = 0.30

    def __init__(self, config: EmbeddingConfig | None = None):
        from . import bert

        config = config or EmbeddingConfig()
        settings = config.settings()
        self.weights = str(settings.get("model_path") or bert.WEIGHTS)
        self.vocab = str(settings.get("vocab_path") or bert.VOCAB)
        self.threads = int(settings.get("threads", 1))
        # texts per call from the indexer (it writes the cache every 8 calls): ~0.1 s of CPU each, so a
        # long indexing run's progress bar moves every few seconds; passes are cut by TOKENS_PER_PASS anyway
        self.batch_size = 4
        self._pair: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        from . import bert
        from .wordpiece import WordPiece

        with _GUARD:
            if self.weights not in _MODELS:
                first = not _MODELS
                try:
                    _MODELS[self.weights] = (WordPiece(self.vocab), bert.MiniLM(bert.Path(self.weights)))
                except (OSError, KeyError, bert.ModelFileError) as e:
                    raise EmbeddingError(f"the local embedding model cannot be loaded: {e}") from None
                if first:
                    _limit_blas(self.threads)
            self._pair = _MODELS[self.weights]
        return self._pair

    @property
    def loaded(self) -> bool:
        """Whether the model is open in this process (embedding costs no load)."""
        return self._pair is not None or self.weights in _MODELS

    def load(self) -> None:
        """Open the model now (once per process: ~25 ms, the vocabulary and 1.2 MiB of small tensors)."""
        if self._pair is None:
            self._load()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` (float32, unit length), in order."""
        tokenizer, model = self._pair or self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        encoded = [tokenizer.encode(t, self.max_length) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # little padding within a pass
        batch: list[int] = []
        for i in order:  # ascending length: the text added last is the pass's longest
            if batch and (len(batch) + 1) * len(encoded[i]) > TOKENS_PER_PASS:
                out[batch] = model.embed([encoded[j] for j in batch])
                batch = []
            batch.append(i)
        if batch:
            out[batch] = model.embed([encoded[j] for j in batch])
        return out
