"""The in-memory binary prefilter agrees with sqlite-vec and stays in step with the index."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from clawkit_memory.binary import quantize
from clawkit_memory.chunking import Chunk
from clawkit_memory.config import SearchConfig
from clawkit_memory.index import MemoryIndex
from clawkit_memory.search import Searcher

DIMS = 64


class HashVectors:
    """Deterministic pseudo-random unit vectors per text (no model needed for these checks)."""

    model, dimensions, batch_size = "test/hash-64", DIMS, 64

    def embed(self, texts):
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def _fill(index, partition, path, n, start=0):
    chunks = [Chunk(f"note {partition} {i} about topic {i % 7}", i + 1, i + 1) for i in range(start, start + n)]
    index.replace_chunks(partition, "file", path, chunks, created=0.0)


def _sqlite_vec_top(index, qv, partition, n):
    return [r[0] for r in index.conn.execute(
        "SELECT rowid FROM memory_vec WHERE coarse MATCH vec_quantize_binary(?) AND k = ? AND partition = ?",
        (qv.tobytes(), n, partition))]


def _hamming(index, ids, qv):
    rows = dict(index.conn.execute(
        f"SELECT rowid, coarse FROM memory_vec WHERE rowid IN ({','.join('?' * len(ids))})", ids).fetchall())
    qb = np.packbits(qv > 0, bitorder="little")
    return sorted(int(np.unpackbits(np.frombuffer(rows[i], np.uint8) ^ qb).sum()) for i in ids)


@pytest.fixture
def index(tmp_path):
    idx = MemoryIndex(tmp_path / "m.db", HashVectors(), workspace=tmp_path)
    _fill(idx, "a", "a.md", 300)
    _fill(idx, "b", "b.md", 200)
    yield idx
    idx.close()


def test_quantize_matches_sqlite_vec(index):
    v = HashVectors().embed(["x", "y", "z"])
    for row in v:
        blob = index.conn.execute("SELECT vec_quantize_binary(?)", (row.tobytes(),)).fetchone()[0]
        assert quantize(row)[0].tobytes() == blob


def test_top_matches_sqlite_vec_distances_per_partition(index):
    qv = HashVectors().embed(["query"])[0]
    mine = index.binary.top(index.conn, qv, ["a"], 20)
    assert len(mine) == 20
    assert {p for (p,) in index.conn.execute(
        f"SELECT partition FROM memory_chunks WHERE id IN ({','.join('?' * 20)})", mine)} == {"a"}
    # the same Hamming distances as sqlite-vec's own KNN (ids may differ only among ties)
    assert _hamming(index, mine, qv) == _hamming(index, _sqlite_vec_top(index, qv, "a", 20), qv)
    assert len(index.binary.top(index.conn, qv, ["b"], 1000)) == 200
    assert index.binary.top(index.conn, qv, ["nobody"], 10) == []


def test_writes_keep_the_prefilter_in_step_without_reloading(index):
    qv = HashVectors().embed(["query"])[0]
    index.binary.top(index.conn, qv, ["a"], 5)
    assert index.binary.loads == 1
    _fill(index, "a", "a.md", 50, start=1000)  # replaces a.md's 300 chunks with 50 new ones
    _fill(index, "c", "c.md", 10)
    everything = index.binary.top(index.conn, qv, ["a", "b", "c"], 10_000)
    assert sorted(everything) == [r[0] for r in index.conn.execute("SELECT id FROM memory_chunks ORDER BY id")]
    index.forget("b", path="b.md")
    assert len(index.binary.top(index.conn, qv, ["a", "b", "c"], 10_000)) == 60
    assert index.binary.loads == 1  # deltas applied, never reloaded


def test_another_connection_writing_triggers_a_reload(index, tmp_path):
    qv = HashVectors().embed(["query"])[0]
    index.binary.top(index.conn, qv, ["a"], 5)
    other = MemoryIndex(tmp_path / "m.db", HashVectors(), workspace=tmp_path)
    _fill(other, "d", "d.md", 25)
    other.close()
    assert len(index.binary.top(index.conn, qv, ["d"], 100)) == 25
    assert index.binary.loads == 2


def test_a_rolled_back_write_leaves_no_trace(index):
    qv = HashVectors().embed(["query"])[0]
    before = index.binary.top(index.conn, qv, ["a", "b"], 10_000)
    with pytest.raises(RuntimeError):
        with index.transaction():
            index._delete_chunks("partition = ?", ("a",))
            raise RuntimeError("disk on fire")
    assert index.binary.top(index.conn, qv, ["a", "b"], 10_000) == before


def test_fast_path_search_uses_the_prefilter(index):
    fast = Searcher(index, SearchConfig(quantize_above=0, oversample=10))
    exact = Searcher(index, SearchConfig(quantize_above=10**9))
    agree = []
    for i in range(20):
        qv = HashVectors().embed([f"note a {i} about topic {i % 7}"])[0]
        a = exact.vector_ranked(qv, ["a"], "", [], 5)
        b = fast.vector_ranked(qv, ["a"], "", [], 5)
        assert a[0] == b[0]  # the chunk itself is found first
        agree.append(len(set(a) & set(b)) / 5)
    assert index.binary.loads == 1
    assert np.mean(agree) >= 0.6  # random 64-d vectors: a hard case for 1-bit codes
