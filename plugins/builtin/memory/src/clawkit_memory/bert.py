"""all-MiniLM-L6-v2 run in numpy: the default ``local`` embedding model, with no onnxruntime.

The network is BERT (6 layers, 384 wide, 12 heads, GELU, post-LayerNorm) with mean pooling and
L2 normalisation, as sentence-transformers runs it. Its weights ship in this package
(``data/minilm-l6-v2-int8.safetensors``, Apache-2.0 like the model; how the file was made and
checked: ``scripts/quantize_minilm.py`` and docs/plugins/memory.md): each weight matrix and
embedding table as int8 with one float32 scale per row (symmetric, per output channel), biases
and LayerNorms as float32.

Memory is the constraint on the one-shot path, not speed: nothing is kept resident but the small
tensors. Each call reads the rows of the token table its texts use, and each layer's int8
matrices, with ``os.pread`` (the page cache holds the file, this process does not), and a matrix
is widened to float32 in blocks of ~1 MiB as it is multiplied. A query costs a few ms and ~2 MiB.
"""

from __future__ import annotations

import json
import math
import os
import struct
import threading
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"
WEIGHTS = DATA / "minilm-l6-v2-int8.safetensors"
VOCAB = DATA / "minilm-l6-v2-vocab.txt"
LAYERS, WIDTH, HEADS = 6, 384, 12
_DTYPES = {"I8": np.int8, "F16": np.float16, "F32": np.float32}
_BLOCK_BYTES = 1 << 20  # float32 bytes of a weight block widened at a time
_LINEARS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
            "intermediate.dense", "output.dense")


class ModelFileError(ValueError):
    pass


class TensorFile:
    """A safetensors file read tensor by tensor (or row by row) with ``pread``."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(self.fd).st_size
            (n,) = struct.unpack("<Q", os.pread(self.fd, 8, 0))
            if n > min(size - 8, 1 << 24):
                raise ModelFileError(f"{path}: not a safetensors file (header of {n} bytes)")
            header = json.loads(os.pread(self.fd, n, 8))
            header.pop("__metadata__", None)
            self.base = 8 + n
            self.meta: dict[str, tuple[np.dtype, tuple[int, ...], int, int]] = {}
            for name, m in header.items():
                start, end = m["data_offsets"]
                if m["dtype"] not in _DTYPES:
                    raise ModelFileError(f"{path}: unsupported tensor {m['dtype']} {m['shape']} ({name})")
                dtype = np.dtype(_DTYPES[m["dtype"]])
                shape = tuple(m["shape"])
                if end - start != math.prod(shape) * dtype.itemsize or self.base + end > size:
                    raise ModelFileError(f"{path}: tensor {name} is damaged or truncated")
                self.meta[name] = (dtype, shape, self.base + start, end - start)
        except ModelFileError:
            os.close(self.fd)
            raise
        except (KeyError, ValueError, struct.error) as e:
            os.close(self.fd)
            raise ModelFileError(f"{path}: unreadable model file ({e})") from None

    def tensor(self, name: str) -> np.ndarray:
        dtype, shape, offset, nbytes = self.meta[name]
        return np.frombuffer(bytearray(os.pread(self.fd, nbytes, offset)), dtype=dtype).reshape(shape)

    def rows(self, name: str, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of a 2-d tensor (each distinct row read once)."""
        dtype, shape, offset, _ = self.meta[name]
        uniq, inverse = np.unique(ids, return_inverse=True)
        buf = read_rows(self.fd, offset, shape[1] * dtype.itemsize, uniq.tolist())
        return np.frombuffer(buf, dtype=dtype).reshape(len(uniq), shape[1])[inverse]

    def close(self) -> None:
        os.close(self.fd)


def read_rows(fd: int, offset: int, row_bytes: int, ids: list[int]) -> bytearray:
    """Rows ``ids`` of a table stored at ``offset`` of ``fd``, one ``pread`` each, into one buffer
    (the process holds only these rows, never the table)."""
    buf = bytearray(len(ids) * row_bytes)
    view = memoryview(buf)
    for k, i in enumerate(ids):
        view[k * row_bytes : (k + 1) * row_bytes] = os.pread(fd, row_bytes, offset + i * row_bytes)
    return buf


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    x = x - mean
    var = np.square(x).mean(-1, keepdims=True)
    x *= 1.0 / np.sqrt(var + 1e-12)
    x *= gamma
    x += beta
    return x


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x), in place, with erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7;
    numpy has no erf, and scipy for one function would cost more than the model). By blocks of
    rows: the temporaries of a 256-token text's 1536-wide layer stay under 1 MiB each."""
    for r in range(0, x.shape[0], 64):
        b = x[r : r + 64]
        z = np.abs(b)
        z *= np.float32(1 / math.sqrt(2))
        t = z * np.float32(0.3275911)
        t += 1.0
        np.reciprocal(t, out=t)
        poly = t * np.float32(1.061405429)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly += np.float32(c)
            poly *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        poly *= z  # 1 - erf(|b| / sqrt 2)
        np.subtract(1.0, poly, out=poly)
        np.copysign(poly, b, out=poly)
        poly += 1.0
        poly *= 0.5
        b *= poly
    return x


class MiniLM:
    """``embed(batch of token-id lists)`` → unit vectors (float32, 384-d)."""

    def __init__(self, path: Path = WEIGHTS):
        self.file = TensorFile(path)
        t = self.file.tensor
        self._small = {n: t(n) for n, (dtype, shape, _, _) in self.file.meta.items()
                       if dtype == np.float32}  # biases, LayerNorms, scales, positions: 1.2 MiB
        missing = [f"encoder.layer.{i}.{lin}.weight" for i in range(LAYERS) for lin in _LINEARS
                   if f"encoder.layer.{i}.{lin}.weight" not in self.file.meta]
        if missing or "embeddings.word_embeddings.weight" not in self.file.meta:
            raise ModelFileError(f"{path}: not a MiniLM-L6 file (missing {', '.join(missing[:3]) or 'the token table'})")
        self.vocab_size = self.file.meta["embeddings.word_embeddings.weight"][1][0]
        self._lock = threading.Lock()  # one forward pass at a time: its transient memory, not n of them

    def _int8(self, name: str, ids: np.ndarray | None = None) -> np.ndarray:
        q = self.file.rows(name, ids) if ids is not None else self.file.tensor(name)
        scale = self._small[name + ".scale"]
        return q.astype(np.float32) * (scale[ids] if ids is not None else scale)[:, None]

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        q = self.file.tensor(prefix + ".weight")  # (out, in) int8
        out = np.empty((x.shape[0], q.shape[0]), dtype=np.float32)
        step = max(1, _BLOCK_BYTES // (4 * q.shape[1]))
        for j in range(0, q.shape[0], step):
            np.matmul(x, q[j : j + step].astype(np.float32).T, out=out[:, j : j + step])
        out *= self._small[prefix + ".weight.scale"]
        out += self._small[prefix + ".bias"]
        return out

    def embed(self, batch: list[list[int]]) -> np.ndarray:
        with self._lock:
            return self._forward(batch)

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        s = self._small
        n, length = len(batch), max(len(ids) for ids in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, row in enumerate(batch):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        ids = np.clip(ids, 0, self.vocab_size - 1)
        x = self._int8("embeddings.word_embeddings.weight", ids.reshape(-1))
        x = x.reshape(n, length, WIDTH) + s["embeddings.position_embeddings.weight"][:length]
        x += s["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x.reshape(n * length, WIDTH), s["embeddings.LayerNorm.weight"], s["embeddings.LayerNorm.bias"])
        head = WIDTH // HEADS
        bias = ((mask - 1.0) * 1e9)[:, None, None, :]  # padding keys get no attention
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            q, k, v = (self._linear(x, p + lin).reshape(n, length, HEADS, head).transpose(0, 2, 1, 3)
                       for lin in _LINEARS[:3])
            ctx = np.empty((n, length, HEADS, head), dtype=np.float32)
            for g in range(0, HEADS, 4):  # 4 heads at a time: a 256-token text's scores take 1 MiB, not 3
                scores = q[:, g : g + 4] @ k[:, g : g + 4].transpose(0, 1, 3, 2)
                scores *= np.float32(1 / math.sqrt(head))
                scores += bias
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                ctx[:, :, g : g + 4] = (scores @ v[:, g : g + 4]).transpose(0, 2, 1, 3)
            ctx = ctx.reshape(n * length, WIDTH)
            del q, k, v, scores
            x = _layer_norm(self._linear(ctx, p + _LINEARS[3]) + x,
                            s[p + "attention.output.LayerNorm.weight"], s[p + "attention.output.LayerNorm.bias"])
            h = _gelu(self._linear(x, p + _LINEARS[4]))
            x = _layer_norm(self._linear(h, p + _LINEARS[5]) + x,
                            s[p + "output.LayerNorm.weight"], s[p + "output.LayerNorm.bias"])
            del h
        w = mask[..., None]
        pooled = (x.reshape(n, length, WIDTH) * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
