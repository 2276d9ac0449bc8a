"""Distil all-MiniLM-L6-v2 into a static token-embedding table (the Model2Vec method).

Run once by a maintainer; the output ships as clawkit-memory's package data
(``clawkit_memory/data/minilm-static/``), so no install needs onnxruntime, a model file or
a download to embed. The method is Model2Vec's ``distill`` (MinishLab, MIT): every token of
the vocabulary is passed through the model alone (``[CLS] token [SEP]``), its output is
mean-pooled, the table is reduced by PCA, and each row is weighted by SIF over a Zipf
estimate of the token's frequency (rank = vocabulary id). At run time a text's vector is
the mean of its tokens' rows, L2-normalised.

    python scripts/distill_static_embeddings.py --model model.onnx --tokenizer tokenizer.json \\
        --out plugins/builtin/memory/src/clawkit_memory/data/minilm-static --dims 256

The model file: all-MiniLM-L6-v2 as ONNX (Apache-2.0, sentence-transformers); any export
with ``input_ids``/``attention_mask`` inputs and the last hidden state as first output.
Needs onnxruntime, tokenizers and numpy; takes a few minutes of CPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np


def token_vectors(model: Path, tokenizer: Path, batch: int = 512) -> np.ndarray:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    vocab = tok.get_vocab()
    n = max(vocab.values()) + 1
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    out = np.zeros((n, session.get_outputs()[0].shape[-1] or 384), dtype=np.float32)
    t0 = time.time()
    for s in range(0, n, batch):
        ids = np.array([[cls, i, sep] for i in range(s, min(n, s + batch))], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feeds)[0]
        out[s : s + len(ids)] = hidden.mean(axis=1)
        if s % (batch * 10) == 0:
            print(f"  {s}/{n} tokens, {time.time() - t0:.0f} s", flush=True)
    return np.nan_to_num(out)


def pca(x: np.ndarray, dims: int) -> np.ndarray:
    xc = x - x.mean(axis=0)
    vals, vecs = np.linalg.eigh((xc.T @ xc) / (len(x) - 1))
    return xc @ vecs[:, ::-1][:, :dims]


def sif_weights(n: int, coefficient: float = 1e-4) -> np.ndarray:
    inv_rank = 1 / np.arange(2, n + 2)
    proba = inv_rank / inv_rank.sum()
    return coefficient / (coefficient + proba)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--tokenizer", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--raw", type=Path, help="cache of the per-token model outputs (.npy), reused if present")
    args = ap.parse_args()
    if args.raw and args.raw.exists():
        raw = np.load(args.raw)
    else:
        raw = token_vectors(args.model, args.tokenizer)
        if args.raw:
            np.save(args.raw, raw)
    table = pca(raw, args.dims) * sif_weights(len(raw))[:, None]
    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / "embeddings.npy", table.astype(np.float16))
    shutil.copyfile(args.tokenizer, args.out / "tokenizer.json")
    (args.out / "config.json").write_text(json.dumps({
        "source": "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)", "method": "model2vec distill",
        "pca_dims": args.dims, "sif_coefficient": 1e-4, "pooling": "mean", "normalize": True,
        "vocab_size": len(raw)}, indent=1) + "\n")
    print(f"wrote {args.out}: {table.shape[0]} x {table.shape[1]} float16")


if __name__ == "__main__":
    main()
