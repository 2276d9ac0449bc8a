"""Retrieval quality and index behaviour on real SQLite, sqlite-vec and the offline MiniLM."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from clawkit_memory.config import ChunkingConfig, SearchConfig
from clawkit_memory.embeddings import LocalStatic
from clawkit_memory.index import MemoryIndex
from clawkit_memory.search import FilterError, Searcher

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
QUERIES = json.loads((HERE / "memory_queries.json").read_text())


@pytest.fixture(scope="module")
def minilm():
    return LocalStatic()


@pytest.fixture(scope="module")
def corpus_index(tmp_path_factory):
    """The fixture corpus indexed with the default provider (MiniLM in numpy; ~10 s of CPU)."""
    from clawkit_memory.local import LocalEmbeddings

    ws = tmp_path_factory.mktemp("corpus_ws")
    shutil.copytree(CORPUS, ws / "memory")
    index = MemoryIndex(ws / ".clawkit" / "memory.db", LocalEmbeddings(), workspace=ws)
    index.sync("eval", ["memory"])
    yield index
    index.close()


def _rank(hits, file, heading):
    return next((i for i, h in enumerate(hits, 1) if h.path == f"memory/{file}" and h.heading.endswith(heading)), None)


# files whose sections look alike and are told apart by identifiers and names (ticket ids,
# alert names, people): the queries about them are where keywords matter most
LOOKALIKE = {"ticket-log.md", "alert-runbook.md", "team.md"}


def _metrics(ranks):
    return {
        "recall@5": sum(1 for r in ranks if r and r <= 5) / len(ranks),
        "recall@1": sum(1 for r in ranks if r == 1) / len(ranks),
        "mrr@10": sum(1 / r for r in ranks if r) / len(ranks),
    }


def test_labelled_queries_hybrid_beats_bm25_and_vectors(corpus_index):
    """≥ 50 paraphrased and keyword queries: recall@5, recall@1 and MRR@10 for each retriever,
    over all queries and over the look-alike sections."""
    assert len(QUERIES) >= 50
    searcher = Searcher(corpus_index, SearchConfig())
    table, keyed = {}, {}
    for mode in ("text", "vector", "hybrid"):
        ranks = [_rank(searcher.search(q, partitions=["eval"], k=10, mode=mode), f, h) for q, f, h in QUERIES]
        table[mode] = _metrics(ranks)
        keyed[mode] = _metrics([r for r, (_, f, _) in zip(ranks, QUERIES) if f in LOOKALIKE])
    n_keyed = sum(1 for _, f, _ in QUERIES if f in LOOKALIKE)
    print("\nmemory eval (%d queries, %d chunks):" % (len(QUERIES), corpus_index.stats()["partitions"]["eval"]["file"]["chunks"]))
    for mode, row in table.items():
        print(f"  {mode:7s} " + "  ".join(f"{k}={v:.3f}" for k, v in row.items()))
    print(f"  look-alike sections ({n_keyed} queries):")
    for mode, row in keyed.items():
        print(f"  {mode:7s} " + "  ".join(f"{k}={v:.3f}" for k, v in row.items()))
    bm25, vec, hyb = table["text"], table["vector"], table["hybrid"]
    # what is true on this (small, paraphrase-heavy) set with plain RRF: the local model alone is
    # near the ceiling (0.98) and hybrid trails it slightly at recall@5 (0.95) while clearly
    # beating BM25; on the repository's docs/ hybrid beats both (test_memory_docs_eval.py)
    assert hyb["recall@5"] > bm25["recall@5"] and hyb["mrr@10"] > bm25["mrr@10"]
    assert hyb["recall@5"] >= vec["recall@5"] - 0.05
    # where identifiers and names tell sections apart, hybrid ranks better than either alone
    kb, kv, kh = keyed["text"], keyed["vector"], keyed["hybrid"]
    assert n_keyed >= 20
    # (issue 29: with the static WordLlama table, BM25 alone ranks keyed sections slightly better than
    # hybrid — MRR 0.944 vs 0.917 — where MiniLM's hybrid beat it; hybrid still beats vectors alone)
    assert kh["mrr@10"] > kv["mrr@10"] and kh["mrr@10"] >= kb["mrr@10"] - 0.05
    assert kh["recall@1"] > kv["recall@1"] and kh["recall@5"] >= max(kb["recall@5"], kv["recall@5"])


def test_docs_folder_is_searchable_when_present(tmp_path, minilm):
    """The repository's docs/ indexes and answers a paraphrased question with a cited section."""
    docs = HERE.parents[3] / "docs"
    files = list(docs.rglob("*.md")) if docs.is_dir() else []
    if not files:
        pytest.skip("no docs/ in this checkout")
    index = MemoryIndex(tmp_path / "m.db", minilm, workspace=docs.parent)
    report = index.index_paths(["docs"], "docs")
    assert report.files == len(files) and report.chunks > 0
    hits = Searcher(index).search("how does the memory plugin find relevant notes", partitions=["docs"], k=5)
    assert hits and all("#L" in h.citation for h in hits)
    index.close()


def test_unchanged_files_are_not_reembedded_and_edits_show_up(tmp_path, minilm):
    ws = tmp_path
    (ws / "memory").mkdir()
    (ws / "MEMORY.md").write_text("# Prefs\n\nThe user's favourite editor is Helix.\n")
    (ws / "memory" / "notes.md").write_text("# Notes\n\nThe staging database lives in Frankfurt.\n")
    index = MemoryIndex(ws / "m.db", minilm, workspace=ws)
    first = index.sync("a", ["MEMORY.md", "memory"])
    assert (first.files, first.embedded) == (2, 2)
    again = index.sync("a", ["MEMORY.md", "memory"])
    assert (again.files, again.embedded) == (0, 0)  # stat unchanged: not even read
    os.utime(ws / "memory" / "notes.md")  # touched, same content: read, hash equal, not re-embedded
    touched = index.sync("a", ["MEMORY.md", "memory"])
    assert (touched.unchanged, touched.embedded) == (1, 0)
    assert index.counters["embedded"] == 2

    searcher = Searcher(index)
    assert "Helix" in searcher.search("which text editor does the user like", partitions=["a"], k=1)[0].text
    (ws / "MEMORY.md").write_text("# Prefs\n\nThe user's favourite editor is now Zed, not Helix.\n\n"
                                  "## Travel\n\nThe user prefers aisle seats.\n")
    edited = index.sync("a", ["MEMORY.md", "memory"])
    assert edited.files == 1 and edited.embedded == 2  # only the changed file's new chunks
    assert "Zed" in searcher.search("which text editor does the user like", partitions=["a"], k=1)[0].text
    (ws / "memory" / "notes.md").unlink()
    assert index.sync("a", ["MEMORY.md", "memory"]).removed == 1
    assert all(h.path != "memory/notes.md" for h in searcher.search("staging database", partitions=["a"], k=5))
    index.close()


def test_embedding_cache_is_keyed_by_model_and_content(tmp_path, minilm):
    class Other:
        model, dimensions, batch_size = "test/other-model", LocalStatic.dimensions, 8

        def __init__(self):
            self.calls = 0

        def embed(self, texts):
            self.calls += len(texts)
            return minilm.embed(texts)

    (tmp_path / "MEMORY.md").write_text("# A\n\nalpha fact\n\n# B\n\nbeta fact\n")
    index = MemoryIndex(tmp_path / "m.db", minilm, workspace=tmp_path)
    index.sync("p", ["MEMORY.md"])
    index.close()
    other = Other()
    index2 = MemoryIndex(tmp_path / "m.db", other, workspace=tmp_path)
    # a model change rebuilds the vectors under the new model (its own cache entries)
    index2.sync("p", ["MEMORY.md"])
    index2._ensure_vectors()
    assert other.calls == 2
    rows = index2.conn.execute("SELECT model, COUNT(*) FROM memory_embeddings GROUP BY model").fetchall()
    assert dict(rows) == {minilm.model: 2, "test/other-model": 2}
    (tmp_path / "MEMORY.md").write_text("# B\n\nbeta fact\n\n# A\n\nalpha fact\n")  # same chunks, reordered
    report = index2.sync("p", ["MEMORY.md"])
    assert report.files == 1 and report.embedded == 0 and report.cached == 2
    index2.close()


def test_filters_partitions_mmr_decay_and_forget(tmp_path, minilm):
    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text("# Deploys\n\nWe deploy on Tuesdays. #release\n\n# Food\n\nPizza on Fridays.\n")
    (tmp_path / "memory" / "2020-01-01.md").write_text("# Old\n\nWe used to deploy on Mondays.\n")
    index = MemoryIndex(tmp_path / "m.db", minilm, workspace=tmp_path)
    index.sync("a", ["MEMORY.md", "memory"])
    old = time.time() - 400 * 86400
    index.conn.execute("UPDATE memory_chunks SET created = ? WHERE path = 'memory/2020-01-01.md'", (old,))
    (tmp_path / "b.md").write_text("# Secret plan\n\nAgent B deploys on Sundays.\n")
    index.index_paths(["b.md"], "b")
    s = Searcher(index)
    q = "when do we deploy"
    assert {h.partition for h in s.search(q, partitions=["a"], k=10)} == {"a"}
    assert "b" in {h.partition for h in s.search(q, partitions=["a", "b"], k=10)}
    assert all(h.path == "MEMORY.md" for h in s.search(q, partitions=["a"], k=5, filters={"path": "MEMORY*"}))
    tagged = s.search(q, partitions=["a"], k=5, filters={"tags": ["release"]})
    assert [h.heading for h in tagged] == ["Deploys"]
    assert s.search(q, partitions=["a"], k=5, filters={"since": time.time() - 30 * 86400, "path": "memory/*"}) == []
    with pytest.raises(FilterError, match="filters.colour"):
        s.search(q, partitions=["a"], filters={"colour": "red"})
    decayed = s.search(q, partitions=["a"], k=3, decay=True)
    plain = s.search(q, partitions=["a"], k=3)
    old_plain = next(h.score for h in plain if h.path.startswith("memory/"))
    old_decayed = next(h.score for h in decayed if h.path.startswith("memory/"))
    assert old_decayed < old_plain / 100  # 400 days at a 30-day half-life
    assert len(s.search(q, partitions=["a"], k=3, mmr=True)) == 3
    assert index.forget("a", older_than=365 * 86400) == 1
    assert all(not h.path.startswith("memory/") for h in s.search(q, partitions=["a"], k=5))
    assert index.sync("a", ["MEMORY.md", "memory"]).files == 0  # forgotten stays forgotten while unchanged
    assert index.forget("a", path="MEMORY.md") == 2
    assert s.search(q, partitions=["a"], k=5) == []
    index.close()


def test_binary_prefilter_matches_exact_search(tmp_path, minilm):
    index = MemoryIndex(tmp_path / "m.db", minilm, workspace=tmp_path, chunking=ChunkingConfig(tokens=60, overlap=10))
    shutil.copytree(CORPUS, tmp_path / "memory")
    index.sync("p", ["memory"])
    exact = Searcher(index, SearchConfig(quantize_above=10**9))
    fast = Searcher(index, SearchConfig(quantize_above=0, oversample=4))  # 20 candidates of ~100
    agree = []
    for q, _, _ in QUERIES[:30]:
        qv = index.query_vector(q)
        a = exact.vector_ranked(qv, ["p"], "", [], 5)
        b = fast.vector_ranked(qv, ["p"], "", [], 5)
        agree.append(len(set(a) & set(b)) / 5)
    n = index.conn.execute("SELECT COUNT(*) FROM memory_chunks").fetchone()[0]
    assert n >= 100
    print(f"\nbinary prefilter (20 of {n} candidates) top-5 agreement with exact KNN: {np.mean(agree):.3f}")
    assert np.mean(agree) >= 0.85  # MiniLM's 384 bits: >= 0.9; the static table's 256 bits: 0.86 (issue 29)
    index.close()


def test_queries_expected_for_recall_are_embedded_in_one_pass_with_the_same_vectors(tmp_path, minilm):
    """Concurrent recalls: the first query embedded takes the others queued for recall along (one forward
    pass for many, instead of one each); each gets the vector it would have got alone."""
    index = MemoryIndex(tmp_path / "m.db", minilm, workspace=tmp_path)
    queries = [f"how did we fix the login bug, take {i}" for i in range(5)] + ["what is the deploy target"]
    alone = {q: np.asarray(minilm.embed([q]), dtype=np.float32)[0] for q in queries}
    calls = []
    embed = minilm.embed
    try:
        minilm.embed = lambda texts: (calls.append(list(texts)), embed(texts))[1]
        for q in queries:
            index.expect_query(q)
        index.unexpect_query(queries[3])  # its turn went on without it: no pass embeds it
        first = index.query_vector(queries[0])
        assert calls == [[q for i, q in enumerate(queries) if i != 3]]
        for q in queries[1:3] + queries[4:]:  # answered from the pass above
            np.testing.assert_allclose(index.query_vector(q), alone[q], atol=1e-5)
        np.testing.assert_allclose(first, alone[queries[0]], atol=1e-5)
        assert len(calls) == 1
        np.testing.assert_allclose(index.query_vector(queries[3]), alone[queries[3]], atol=1e-5)
        assert calls[1] == [queries[3]]
    finally:
        minilm.embed = embed
        index.close()


def test_the_default_model_embeds_a_batch_of_queries_as_it_embeds_each_alone():
    """Padding inside a pass changes nothing: the attention mask keeps a short query's vector its own."""
    from clawkit_memory.local import LocalEmbeddings

    model = LocalEmbeddings()
    queries = ["fix the login bug in auth.py", "deploy", "what did we decide about the database migration last week?"]
    together = model.embed(queries)
    for q, v in zip(queries, together):
        np.testing.assert_allclose(v, model.embed([q])[0], atol=1e-4)
