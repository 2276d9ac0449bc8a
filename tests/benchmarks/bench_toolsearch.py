"""Tool retrieval with 300 tools: definition tokens per request before/after, recall@k of BM25,
vectors, reciprocal-rank fusion and the score fusion toolsearch uses (``vectors.hybrid``) on 135 labelled
requests (MRR@10 too), and the time one selection takes. ``--minilm`` for the opt-in MiniLM provider
(needs onnxruntime and the model files: ``CLAWKIT_MINILM_MODEL`` / ``CLAWKIT_MINILM_TOKENIZER`` or its defaults).

    .venv/bin/python tests/benchmarks/bench_toolsearch.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins/builtin/toolsearch/tests/data"))

from catalog import TOOLS  # noqa: E402
from labelled import REQUESTS  # noqa: E402

from clawkit.types import ToolDef  # noqa: E402
from clawkit_toolsearch import vectors  # noqa: E402
from clawkit_toolsearch.index import ToolIndex  # noqa: E402
from clawkit_toolsearch.select import def_tokens  # noqa: E402


def main() -> int:
    print(f"load average: {os.getloadavg()[0]:.2f}")
    defs = [ToolDef(name=n, description=d, parameters={"type": "object", "properties": {a: {"type": "string"} for a in args}})
            for n, d, args in TOOLS]
    key = tuple((n, d, tuple(a)) for n, d, a in TOOLS)
    idx = ToolIndex(key)
    from clawkit_memory import embeddings

    emb = (embeddings.LocalMiniLM if "--minilm" in sys.argv else embeddings.LocalStatic)(None)
    print(f"embeddings: {emb.model}")
    t0 = time.perf_counter()
    vectors.rank(emb, key, "warm up", 1)
    print(f"embedding 300 tool descriptions (once per tool set): {time.perf_counter() - t0:.2f} s")
    lexical = {q: idx.search(q, 50) for q, _ in REQUESTS}
    semantic = {q: vectors.rank(emb, key, q, 50) for q, _ in REQUESTS}
    hybrid = {q: vectors.hybrid(emb, key, q, idx.scores(q), 50) for q, _ in REQUESTS}
    fns = (lexical.get, semantic.get, lambda q: vectors.fuse(lexical[q], semantic[q], k=50), hybrid.get)
    print(f"{'k':>5} {'BM25':>6} {'vectors':>8} {'RRF':>7} {'hybrid':>7}")
    for k in (1, 3, 5, 8, 12):
        r = [sum(w in f(q)[:k] for q, w in REQUESTS) / len(REQUESTS) for f in fns]
        print(f"{k:>5} {r[0]:6.3f} {r[1]:8.3f} {r[2]:7.3f} {r[3]:7.3f}")
    mrr = [sum(1 / (f(q)[:10].index(w) + 1) for q, w in REQUESTS if w in f(q)[:10]) / len(REQUESTS) for f in fns]
    print(f"{'MRR10':>5} {mrr[0]:6.3f} {mrr[1]:8.3f} {mrr[2]:7.3f} {mrr[3]:7.3f}")
    sent = [d for d in defs if d.name in set(hybrid[REQUESTS[0][0]][:8])]
    before, after = def_tokens(defs), def_tokens(sent)
    print(f"tool-definition tokens per request: {before} with all 300 -> {after} with 8 ({before / after:.0f}x fewer)")
    times_b, times_h = [], []
    for q, _ in REQUESTS:
        t = time.perf_counter(); idx.search(q, 50); times_b.append(time.perf_counter() - t)
        t = time.perf_counter(); vectors.hybrid(emb, key, q, idx.scores(q), 8); times_h.append(time.perf_counter() - t)
    print(f"selection per request: BM25 {statistics.median(times_b) * 1e3:.2f} ms, hybrid {statistics.median(times_h) * 1e3:.2f} ms (median)")
    print(json.dumps({"requests": len(REQUESTS), "tools": len(TOOLS)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
