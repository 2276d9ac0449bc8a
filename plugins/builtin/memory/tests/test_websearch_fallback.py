"""``auto``'s fallback wrapper: the remote provider first; a failure at the probe or later switches to
the local model once, and a later failure never stores vectors under the wrong space."""

from __future__ import annotations

import pytest

from clawkit_memory.config import EmbeddingConfig
from clawkit_memory.embeddings import EmbeddingError, resolve_provider
from clawkit_memory.remote import FallbackEmbeddings


class Remote:
    model, dimensions, batch_size = "remote/x", 3, 8

    def __init__(self, fail_after: int):
        self.calls, self.fail_after = 0, fail_after

    def embed(self, texts):
        self.calls += 1
        if self.calls > self.fail_after:
            raise EmbeddingError("HTTP 503")
        return [[1.0, 0.0, 0.0] for _ in texts]


class Local:
    model, dimensions, min_similarity = "local/y", 2, 0.15

    def embed(self, texts):
        return [[0.0, 1.0] for _ in texts]


def test_a_failure_after_the_probe_switches_once_and_fails_that_call(caplog):
    fb = FallbackEmbeddings(Remote(fail_after=2), Local, "openai")
    assert fb.model == "remote/x" and fb.embed(["a"]) == [[1.0, 0.0, 0.0]]  # probe + one call
    with pytest.raises(EmbeddingError, match="switched to the local model"):
        fb.embed(["b"])
    assert fb.model == "local/y" and fb.dimensions == 2 and fb.embed(["c"]) == [[0.0, 1.0]]
    assert "HTTP 503" in fb.describe() and fb.min_similarity == 0.15
    fb._fall_back("again")  # a second failure report changes nothing
    assert fb.fell_back == "HTTP 503"
    assert sum("provider failed" in r.message for r in caplog.records) == 1


def test_a_failing_probe_means_local_from_the_start():
    fb = FallbackEmbeddings(Remote(fail_after=0), Local, "gemini")
    assert fb.model == "local/y" and "using the local model local/y" in fb.describe()


def test_auto_resolution():
    assert type(resolve_provider(EmbeddingConfig(), {})).__name__ == "LocalEmbeddings"
    fb = resolve_provider(EmbeddingConfig(provider="auto", remote="gemini", model="text-embedding-004"), {})
    assert isinstance(fb, FallbackEmbeddings) and fb.remote.model == "gemini/text-embedding-004"
    assert fb.remote.dimensions == 768  # the model's known size: no probe needed
    with pytest.raises(EmbeddingError, match="embedding.remote: unknown provider 'nope'"):
        resolve_provider(EmbeddingConfig(provider="auto", remote="nope"), {})
