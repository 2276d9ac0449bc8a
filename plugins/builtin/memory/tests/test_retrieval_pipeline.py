"""Issue 29 goal 1, fourth pass: the search pipeline around the static vectors.

* One hit per section first (``search.collapse``): the windows a long section was cut into no
  longer fill the top results — the recall contributor injects 3 snippets, and three windows of
  one section left no room for anything else.
* 20 candidates per retriever before fusion (was 50); with both, hybrid recall@3 of the default
  provider on the fixed docs/ benchmark went 0.615 -> 0.659 (``bench_retrieval.py``).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from clawkit_memory.config import MemoryConfig, SearchConfig
from clawkit_memory.embeddings import LocalStatic
from clawkit_memory.index import MemoryIndex
from clawkit_memory.search import Hit, Searcher, collapse_sections

ROOT = Path(__file__).resolve().parents[4]
BENCH = ROOT / "tests" / "benchmarks"

FACTS = [
    "The nightly backup snapshot of the orders database is kept for 35 days in the cold bucket.",
    "Backup snapshots older than 35 days are deleted by the retention job at 04:00 UTC.",
    "Every backup snapshot is encrypted with the backup key held by the platform team.",
    "A weekly backup snapshot is copied to the second region and kept for 13 weeks.",
    "Backup snapshot retention is checked by the audit script every Monday.",
    "The monthly backup snapshot is kept for a year for the finance team's audits.",
]


def notes() -> str:
    long_section = "\n".join(f"- {FACTS[i % len(FACTS)]} (entry {i})" for i in range(60))  # several windows
    return ("# Notes\n\n## Backups\n\n" + long_section + "\n\n## Deploys\n\n"
            "Deploys go out on Tuesdays; a backup snapshot is taken before each deploy and kept until the next.\n\n"
            "## Restore drill\n\nThe restore drill reads the latest backup snapshot into a scratch database monthly.\n")


def hit(path: str, heading: str, a: int, b: int, i: int) -> Hit:
    return Hit(path, a, b, heading, "", 0.0, 0.0, "file", "p", None, id=i)


def test_collapse_moves_a_sections_other_windows_after_every_sections_best():
    hits = [hit("n.md", "Notes > Backups", 1, 40, 1), hit("n.md", "Notes > Backups", 35, 80, 2),
            hit("n.md", "Notes > Deploys", 82, 84, 3), hit("m.md", "", 1, 30, 4), hit("m.md", "", 25, 60, 5),
            hit("m.md", "", 61, 90, 6), hit("session:s1", "", 7, 9, 7), hit("session:s1", "", 7, 9, 8),
            hit("session:s1", "", 12, 14, 9)]
    # same path + heading trail = one section; without headings (a plain file, an episode's turn)
    # only overlapping windows count as one; nothing is dropped
    assert [h.id for h in collapse_sections(hits)] == [1, 3, 4, 6, 7, 9, 2, 5, 8]


@pytest.fixture()
def notes_ws(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "notes.md").write_text(notes(), encoding="utf-8")
    return tmp_path


def test_search_top_three_are_three_sections(notes_ws):
    """In-process, the old settings against the new: the long section's windows took the whole top 3."""
    index = MemoryIndex(notes_ws / ".clawkit" / "memory.db", LocalStatic(), workspace=notes_ws)
    index.sync("a", ["memory"])
    q = "how long is a backup snapshot kept"
    old = Searcher(index, SearchConfig(candidates=50, collapse=False)).search(q, partitions=["a"], k=10)
    new = Searcher(index, MemoryConfig().search).search(q, partitions=["a"], k=10)
    index.close()
    assert len({h.heading for h in old[:3]}) == 1  # what it was: three windows of "Backups"
    assert [h.heading for h in new[:3]] != [h.heading for h in old[:3]]
    assert len({h.heading for h in new[:3]}) == 3 and new[0].heading.endswith("Backups")
    assert {h.id for h in new} == {h.id for h in old}  # the same results, reordered


def test_cli_search_answers_with_distinct_sections(notes_ws):
    """End to end: ``clawkit memory index`` then ``clawkit memory search --json`` in fresh
    processes (every builtin plugin loaded) cite three different sections in the top 3."""
    run = lambda *a: subprocess.run([sys.executable, "-m", "clawkit", "memory", "--workspace", str(notes_ws), *a],
                                    cwd=notes_ws, capture_output=True, text=True, timeout=300)
    done = run("index")
    assert done.returncode == 0, done.stderr
    done = run("search", "how long is a backup snapshot kept", "--json", "--k", "3")
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert len(hits) == 3 and len({h["heading"] for h in hits}) == 3, [h["citation"] for h in hits]
    assert hits[0]["heading"].endswith("Backups")


def test_docs_benchmark_hybrid_recall_at_3_on_the_fixed_corpus(tmp_path):
    """bench_retrieval.py's figure for the default provider on docs/ at 0ce5172 (the corpus of
    issue 29's before/after): 0.615 with the earlier settings, 0.659 now (deterministic)."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", "0ce5172", "docs"], capture_output=True)
    if tar.returncode != 0:
        pytest.skip("commit 0ce5172 is not in this clone (shallow?)")
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        t.extractall(tmp_path, filter="data")
    sys.path.insert(0, str(BENCH))
    try:
        import bench_retrieval as br
    finally:
        sys.path.remove(str(BENCH))
    queries = json.loads(br.LABELS.read_text(encoding="utf-8"))["queries"]
    out = br.evaluate(LocalStatic(), tmp_path, queries, {"new": {}, "old": br.OLD_PIPELINE})
    old, new = out["old"]["hybrid"]["recall@3"], out["new"]["hybrid"]["recall@3"]
    assert new >= 59 / 91, new  # 60 of 91 measured (the old settings: 56); one question of slack
    assert new >= old + 3 / 91, (old, new)
