"""BM25 query building: the postings budget and the join-free ranking path."""

from __future__ import annotations

import numpy as np
import pytest

from clawkit_memory.chunking import Chunk
from clawkit_memory.config import SearchConfig
from clawkit_memory.index import MemoryIndex
from clawkit_memory.search import Searcher


class Zeros:
    model, dimensions, batch_size = "test/const-8", 8, 64

    def embed(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32)


@pytest.fixture
def index(tmp_path):
    idx = MemoryIndex(tmp_path / "m.db", Zeros(), workspace=tmp_path)
    # "deploy" in 40 chunks, "server" in 10, "kraken" in 1
    texts = [f"we deployed build {i}" + (" on the server" if i < 10 else "") for i in range(40)]
    texts.append("the kraken server was deployed")
    idx.replace_chunks("a", "file", "a.md", [Chunk(t, i + 1, i + 1) for i, t in enumerate(texts)], created=0.0)
    idx.replace_chunks("b", "file", "b.md", [Chunk("kraken notes from b", 1, 1)], created=0.0)
    yield idx
    idx.close()


def test_common_words_leave_the_query_when_over_budget(index):
    roomy = Searcher(index, SearchConfig(bm25_max_postings=1000))
    assert roomy._affordable(["deploying", "server", "kraken"]) == ["deploying", "server", "kraken"]
    # counts (stemmed by FTS5: "deploying" -> "deploi"): kraken 2, server 11, deploy 41
    tight = Searcher(index, SearchConfig(bm25_max_postings=20))
    assert tight._affordable(["deploying", "server", "kraken"]) == ["server", "kraken"]
    tiny = Searcher(index, SearchConfig(bm25_max_postings=1))
    assert tiny._affordable(["deploying", "server", "kraken"]) == ["kraken"]  # the rarest always stays
    assert tiny._affordable(["zzzunknown", "deploying"]) == ["zzzunknown"]  # unseen words cost nothing
    off = Searcher(index, SearchConfig(bm25_max_postings=0))
    assert off._affordable(["deploying", "server", "kraken"]) == ["deploying", "server", "kraken"]
    # the pruned query still ranks the chunk with the rare word first
    assert tight.text_ranked("deploying server kraken", ["a"], "", [], 5)[0] == \
        off.text_ranked("deploying server kraken", ["a"], "", [], 5)[0]


def test_partition_check_after_join_free_ranking(index):
    s = Searcher(index, SearchConfig())
    only_b = s.text_ranked("kraken", ["b"], "", [], 5)  # b is a small share: joined query
    assert len(only_b) == 1
    both = s.text_ranked("kraken", ["a", "b"], "", [], 5)  # everything: FTS5 alone
    assert set(only_b) < set(both) and len(both) == 2
    only_a = s.text_ranked("kraken", ["a"], "", [], 5)  # most of the index: FTS5 alone, then the check
    assert set(only_a) == set(both) - set(only_b)
    many_a = s.text_ranked("deployed", ["a"], "", [], 50)
    assert len(many_a) == 41


def test_contraction_fragments_are_not_query_words():
    from clawkit_memory.search import fts_words, query_terms

    # "can't" -> can, t; "someone's" -> someone, s: a one-letter prefix would satisfy min-should-match everywhere
    assert query_terms("what should I do if I can't handle an alert") == ["handle", "alert"]
    assert fts_words("someone's pull request") == ["someone", "pull", "request"]
    assert fts_words("I'd") == ["i", "d"]  # nothing else left: the words as typed


def test_a_word_in_most_chunks_is_not_scored_once_over_budget(index):
    """Per-turn cost must not grow with the store: a word in more than half of the chunks has no BM25
    weight, so over budget it is dropped even when it is the rarest (the vectors rank the query)."""
    tight = Searcher(index, SearchConfig(bm25_max_postings=20))
    assert tight._affordable(["deploying"]) == ["deploying"]  # alone, nothing to compare: kept
    assert tight._affordable(["deploying", "build"]) == []  # 41 and 40 of 42 chunks: nothing worth scoring
    assert tight.text_ranked("deploying build", ["a"], "", [], 5) == []
    assert tight._affordable(["deploying", "build", "kraken"]) == ["kraken"]
