"""Fit a static token-embedding table to all-MiniLM-L6-v2's sentence vectors (Tokenlearn-style).

Run once by a maintainer (issue 29, s8); nothing here runs on an install. Three steps:

1. corpus: passages (a paragraph or a docstring, 40-800 characters, mostly letters, deduplicated)
   from text that is on any Python machine and is NOT clawkit's docs/: the standard library's
   docstrings, the docstrings and README/.rst/.md files of the installed packages (clawkit's own
   are excluded), and /usr/share/doc's text files. Shuffled with a fixed seed.
2. teacher: MiniLM (onnxruntime, the ``minilm`` provider's pipeline) embeds every passage; vectors
   are cached (``--cache``: ``passages.txt`` + ``vectors.npy``) so a rerun embeds only new passages.
3. student: the passages are tokenized with WordLlama's tokenizer (memory's ``bpe.py``), a text's
   vector is the normalised mean of its token rows (so a row's norm acts as the token's weight), and
   the table is fitted with Adam by one of two losses (``--loss``):
   - ``cosine`` (Tokenlearn's): each passage's vector against MiniLM's; the table starts from
     WordLlama's rows mapped into MiniLM's space by a least-squares linear map, with an L2 pull
     towards that start;
   - ``relational``: the cosines between the passages of a minibatch (1,024) against MiniLM's
     cosines between the same passages (squared error over every pair); the table stays in
     WordLlama's own space and starts as WordLlama's table.
   5 % of the passages are held out; the checkpoint with the best held-out score is kept.

    python scripts/train_static_embeddings.py --model model.onnx --tokenizer minilm-tokenizer.json \\
        --cache /tmp/teacher --out DIR [--passages 60000] [--loss relational --steps 2000 --lr 2e-3 --pull 0]
    python scripts/train_static_embeddings.py --cache /tmp/teacher --cached --out DIR ...   # every cached passage

Measured (issue 29, s8; docs/plugins/memory.md "Third pass"): neither loss reaches MiniLM's hybrid
recall@3 on the docs/ benchmark — the relational table brings vectors-alone recall@3 close to
MiniLM's, hybrid recall@3 not. Nothing it writes ships; it stays for the next attempt (more passages
need hours of the teacher on two shared cores: ~6 passages/s at load 10).

The output (``embeddings.npy`` + WordLlama's ``tokenizer.json``) is a ``static_dir`` table:
``bench_retrieval.py --static-dir DIR`` measures it. The labelled questions of the benchmark are
never read here.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import sysconfig
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
_DOCSTRING = re.compile(r'"""(.*?)"""', re.S)


def _texts(path: Path) -> list[str]:
    name = path.name.lower()
    if "changelog" in name or name.startswith("news"):
        return []
    try:
        raw = gzip.open(path, "rt", encoding="utf-8").read(400_000) if name.endswith(".gz") \
            else path.read_text(encoding="utf-8")[:400_000]
    except (OSError, UnicodeDecodeError, EOFError):
        return []
    return _DOCSTRING.findall(raw) if name.endswith(".py") else [raw]


def passages(roots: list[Path], limit: int, seed: int = 0) -> list[str]:
    """Deduplicated passages of the text files under ``roots`` (docs/ of this repository excluded)."""
    seen: set[str] = set()
    out: list[str] = []
    docs = (ROOT / "docs").resolve()
    for root in roots:
        for dp, dn, fn in os.walk(root):
            dn.sort()
            if "clawkit" in dp or Path(dp).resolve().is_relative_to(docs):
                dn.clear()
                continue
            for f in sorted(fn):
                if not f.lower().endswith((".py", ".md", ".rst", ".txt", ".txt.gz", ".md.gz")) and not f.startswith("README"):
                    continue
                for text in _texts(Path(dp) / f):
                    for para in re.split(r"\n\s*\n", text):
                        s = " ".join(para.split())
                        if 40 <= len(s) <= 800 and sum(c.isalpha() or c == " " for c in s) > 0.8 * len(s) and s not in seen:
                            seen.add(s)
                            out.append(s)
    random.Random(seed).shuffle(out)
    return out[:limit]


def teacher(texts: list[str], model: Path, tokenizer: Path, cache: Path) -> np.ndarray:
    """MiniLM's vectors of ``texts``, from ``cache`` where it has them."""
    cache.mkdir(parents=True, exist_ok=True)
    known: dict[str, np.ndarray] = {}
    if (cache / "vectors.npy").exists():
        old = (cache / "passages.txt").read_text(encoding="utf-8").split("\n")
        known = dict(zip(old, np.load(cache / "vectors.npy")))
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    if todo:
        sys.path.insert(0, str(ROOT / "plugins" / "builtin" / "memory" / "src"))
        from clawkit_memory.config import EmbeddingConfig
        from clawkit_memory.embeddings import LocalMiniLM

        m = LocalMiniLM(EmbeddingConfig(provider="minilm", model_path=str(model), tokenizer_path=str(tokenizer), batch_size=64))
        t0 = time.time()
        for s in range(0, len(todo), 2000):  # saved every 2,000 passages: an interrupted run resumes
            part = todo[s : s + 2000]
            known.update(zip(part, m.embed(part)))
            keys = list(known)
            (cache / "passages.txt").write_text("\n".join(keys), encoding="utf-8")
            np.save(cache / "vectors.npy", np.stack([known[k] for k in keys]).astype(np.float32))
            print(f"  teacher: {s + len(part)}/{len(todo)} passages, {time.time() - t0:.0f} s", flush=True)
    return np.stack([known[t] for t in texts]).astype(np.float32)


def bag(texts: list[str], encode, vocab: int):
    """Sparse (passages x vocab) matrix of token frequencies: row @ table = mean of the token rows."""
    import scipy.sparse as sp

    rows, cols, vals = [], [], []
    for i, t in enumerate(texts):
        ids, counts = np.unique(np.clip(np.asarray(encode(t), dtype=np.int64), 0, vocab - 1), return_counts=True)
        if len(ids):
            rows.append(np.full(len(ids), i))
            cols.append(ids)
            vals.append(counts / counts.sum())
    return sp.csr_matrix((np.concatenate(vals).astype(np.float32), (np.concatenate(rows), np.concatenate(cols))),
                         shape=(len(texts), vocab))


def fit(X, Y: np.ndarray, W0: np.ndarray, steps: int, lr: float, pull: float, val: float = 0.05):
    n = X.shape[0]
    nv = max(1, int(n * val))
    Xtr, Ytr, Xva, Yva = X[nv:], Y[nv:], X[:nv], Y[:nv]

    def cos(Xs, Ys, W):
        P = Xs @ W
        P /= np.linalg.norm(P, axis=1, keepdims=True) + 1e-9
        return float((P * Ys).sum(1).mean())

    W = W0.copy()
    XtT = Xtr.T.tocsr()
    m, v = np.zeros_like(W), np.zeros_like(W)
    best, best_W = cos(Xva, Yva, W), W.copy()
    print(f"  start: held-out cosine {best:.4f}", flush=True)
    for it in range(1, steps + 1):
        P = Xtr @ W
        nrm = np.linalg.norm(P, axis=1, keepdims=True) + 1e-9
        Pn = P / nrm
        G = -(Ytr - (Pn * Ytr).sum(1, keepdims=True) * Pn) / nrm / len(P)  # d mean(1 - cos) / dP
        g = XtT @ G + pull * (W - W0)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        W -= lr * (m / (1 - 0.9**it)) / (np.sqrt(v / (1 - 0.999**it)) + 1e-8)
        if it % 25 == 0 or it == steps:
            c = cos(Xva, Yva, W)
            print(f"  step {it}: held-out cosine {c:.4f}, train {cos(Xtr, Ytr, W):.4f}", flush=True)
            if c > best:
                best, best_W = c, W.copy()
    return best_W, best


def fit_relational(X, Y: np.ndarray, W0: np.ndarray, steps: int, lr: float, pull: float, batch: int = 1024,
                   val: float = 0.05, seed: int = 0):
    """Space-free: the student's cosines between passages fitted to the teacher's (minibatches of
    ``batch`` passages, squared error over every pair), starting from the table itself."""
    n = X.shape[0]
    nv = max(2, int(n * val))
    Xtr, Ytr, Xva, Yva = X[nv:], Y[nv:], X[:nv], Y[:nv]
    rng = np.random.default_rng(seed)

    def unit(P):
        return P / (np.linalg.norm(P, axis=1, keepdims=True) + 1e-9)

    def err(Xs, Ys, W):
        S, T = unit(Xs @ W), Ys
        return float(np.mean((S @ S.T - T @ T.T) ** 2))

    vb = rng.choice(nv, min(nv, 2000), replace=False)
    Xv, Yv = Xva[vb], Yva[vb]
    W = W0.copy()
    m, v = np.zeros_like(W), np.zeros_like(W)
    best, best_W = err(Xv, Yv, W), W.copy()
    print(f"  start: held-out pair error {best:.5f}", flush=True)
    for it in range(1, steps + 1):
        b = rng.choice(Xtr.shape[0], batch, replace=False)
        Xb, Yb = Xtr[b], Ytr[b]
        P = Xb @ W
        nrm = np.linalg.norm(P, axis=1, keepdims=True) + 1e-9
        S = P / nrm
        D = S @ S.T - Yb @ Yb.T
        g_s = 4 * (D @ S) / (batch * batch)
        G = (g_s - (g_s * S).sum(1, keepdims=True) * S) / nrm
        rows = np.unique(Xb.indices)
        g = (Xb.T @ G)[rows] + pull * (W[rows] - W0[rows])
        m[rows] = 0.9 * m[rows] + 0.1 * g
        v[rows] = 0.999 * v[rows] + 0.001 * g * g
        W[rows] -= lr * (m[rows] / (1 - 0.9**it)) / (np.sqrt(v[rows] / (1 - 0.999**it)) + 1e-8)
        if it % 100 == 0 or it == steps:
            e = err(Xv, Yv, W)
            print(f"  step {it}: held-out pair error {e:.5f}", flush=True)
            if e < best:
                best, best_W = e, W.copy()
    return best_W, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="all-MiniLM-L6-v2 ONNX (the teacher)")
    ap.add_argument("--tokenizer", type=Path, help="MiniLM's tokenizer.json")
    ap.add_argument("--cache", type=Path, required=True, help="folder of the teacher's cached vectors")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--root", type=Path, action="append", help="corpus folders (default: stdlib, site-packages, /usr/share/doc)")
    ap.add_argument("--passages", type=int, default=60000)
    ap.add_argument("--dims", type=int, default=384, help="table width: 384 (MiniLM's) or fewer (PCA of the teacher)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--pull", type=float, default=1e-4)
    ap.add_argument("--loss", choices=("cosine", "relational"), default="cosine",
                    help="cosine: each passage's vector fitted to the teacher's (in its space, from WordLlama mapped "
                         "there); relational: the cosines between passages fitted, in WordLlama's own space")
    ap.add_argument("--teacher-only", action="store_true", help="stop after step 2 (fill the cache)")
    ap.add_argument("--cached", action="store_true", help="fit on every passage of the cache, embed nothing")
    args = ap.parse_args()
    if args.cached:
        texts = (args.cache / "passages.txt").read_text(encoding="utf-8").split("\n")
        Y = np.load(args.cache / "vectors.npy").astype(np.float32)
        order = np.random.default_rng(0).permutation(len(texts))  # the held-out 5 %: a random sample
        texts, Y = [texts[i] for i in order], Y[order]
        print(f"corpus: the cache's {len(texts)} passages", flush=True)
    else:
        roots = args.root or [Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"]), Path("/usr/share/doc")]
        texts = passages(roots, args.passages)
        print(f"corpus: {len(texts)} passages from {', '.join(map(str, roots))}", flush=True)
        Y = teacher(texts, args.model, args.tokenizer, args.cache)
    if args.teacher_only:
        return
    sys.path.insert(0, str(ROOT / "plugins" / "builtin" / "memory" / "src"))
    from clawkit_memory import bpe
    from clawkit_memory.embeddings import WORDLLAMA_FILES, _safetensors_table
    from importlib import metadata

    dist = metadata.distribution("wordllama")
    table_file, tok_file = (Path(str(dist.locate_file(f))) for f in WORDLLAMA_FILES)
    rf = _safetensors_table(table_file)
    wl = np.fromfile(table_file, dtype=rf.dtype, offset=rf.offset, count=rf.shape[0] * rf.shape[1]).reshape(rf.shape).astype(np.float32)
    X = bag(texts, bpe.load(tok_file).encode, rf.shape[0])
    if args.dims < Y.shape[1]:  # the teacher's space reduced by PCA (cosines nearly kept)
        mu = Y.mean(0)
        vecs = np.linalg.eigh(np.cov((Y - mu).T))[1][:, ::-1][:, : args.dims]
        Y = Y @ vecs
    Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    if args.loss == "relational":
        W, score = fit_relational(X, Y, wl, args.steps, args.lr, args.pull)
    else:
        A = np.linalg.lstsq(X @ wl, Y, rcond=None)[0]  # WordLlama's space -> the teacher's
        W, score = fit(X, Y, (wl @ A).astype(np.float32), args.steps, args.lr, args.pull)
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "embeddings.npy", W.astype(np.float16))
    shutil.copyfile(tok_file, args.out / "tokenizer.json")
    (args.out / "config.json").write_text(json.dumps({
        "teacher": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)", "start": "WordLlama l2_supercat 256 (MIT)",
        "method": "tokenlearn-style: mean of token rows, L2-normalised; " + (
            "cosines between passages fitted to the teacher's" if args.loss == "relational"
            else "each passage's vector fitted to the teacher's (cosine)"),
        "loss": args.loss, "passages": len(texts), "dims": W.shape[1], "steps": args.steps, "lr": args.lr, "pull": args.pull,
        "held_out": round(score, 5)}, indent=1) + "\n")
    print(f"wrote {args.out}: {W.shape[0]} x {W.shape[1]} float16, held-out {'pair error' if args.loss == 'relational' else 'cosine'} {score:.5f}")


if __name__ == "__main__":
    main()
