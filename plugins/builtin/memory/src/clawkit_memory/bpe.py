"""A compact reader of a SentencePiece-style BPE ``tokenizer.json`` (WordLlama's, i.e. Llama 2's
tokenizer): the same token ids as Hugging Face ``tokenizers`` for that file, in a tenth of the memory.

Why (issue 29): loading the file with ``tokenizers`` cost a one-shot run +17 MiB of peak RSS (its
JSON parse, the vocabulary twice, the merge table) — the largest part of what memory recall added
to a later run. What encoding needs is small: the id of each single character, the 256 byte-fallback
ids and the merge table as sorted integer pairs (61,249 merges: ~1 MiB of numpy arrays). Those are
extracted from the JSON once and kept in the user's cache directory (``$XDG_CACHE_HOME/clawkit``,
keyed by the file's size and mtime); a later process reads only the arrays.

Supported, and checked when the arrays are built (else :class:`Unsupported`, and the caller uses
``tokenizers``): a ``BPE`` model with ``byte_fallback`` and ``fuse_unk``, no dropout, no
continuing-subword prefix or end-of-word suffix; the normalizer ``Prepend('▁')`` +
``Replace(' ', '▁')``; no pre-tokenizer; special added tokens matched in the raw text. The text is
cut before each ``▁`` that follows another character — exact because no vocabulary entry has a
``▁`` after another character (checked) — and each piece is merged once and cached.
``test_light_bpe.py`` compares the ids with ``tokenizers`` on the repository's docs.
"""

from __future__ import annotations

import heapq
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

SPACE = "\u2581"
_PIECES = re.compile(f"{SPACE}*[^{SPACE}]+|{SPACE}+")
FORMAT = 1


class Unsupported(ValueError):
    """The tokenizer.json uses something this reader does not implement."""


def _arrays(source: Path) -> dict[str, np.ndarray]:
    """The arrays encoding needs, extracted from ``source`` (the whole JSON is parsed: done once)."""
    spec = json.loads(source.read_text(encoding="utf-8"))
    model = spec.get("model") or {}
    norm = spec.get("normalizer") or {}
    steps = norm.get("normalizers") if norm.get("type") == "Sequence" else None
    want_norm = [{"type": "Prepend", "prepend": SPACE}, {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}]
    if (model.get("type") != "BPE" or not model.get("byte_fallback") or not model.get("fuse_unk") or model.get("dropout")
            or model.get("continuing_subword_prefix") or model.get("end_of_word_suffix") or model.get("ignore_merges")
            or spec.get("pre_tokenizer") is not None or steps != want_norm):
        raise Unsupported(f"{source}: not a SentencePiece-style BPE this reader implements")
    vocab: dict[str, int] = model["vocab"]
    if any(SPACE in t.lstrip(SPACE) for t in vocab):
        raise Unsupported(f"{source}: a token has {SPACE!r} after another character")
    keys, vals = [], []
    for rank, m in enumerate(model["merges"]):
        a, b = m.split(" ") if isinstance(m, str) else m
        keys.append(vocab[a] << 32 | vocab[b])
        vals.append(rank << 32 | vocab[a + b])
    order = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
    chars = sorted((t, i) for t, i in vocab.items() if len(t) == 1)
    specials = [(t["content"], t["id"]) for t in spec.get("added_tokens") or [] if t.get("special")]
    byte_ids = np.asarray([vocab.get(f"<0x{b:02X}>", -1) for b in range(256)], dtype=np.int64)
    return {"format": np.asarray([FORMAT]), "keys": np.asarray(keys, dtype=np.int64)[order],
            "vals": np.asarray(vals, dtype=np.int64)[order], "chars": np.asarray([c for c, _ in chars] or [""]),
            "char_ids": np.asarray([i for _, i in chars], dtype=np.int64), "bytes": byte_ids,
            "specials": np.asarray([s for s, _ in specials] or [""]), "special_ids": np.asarray([i for _, i in specials], dtype=np.int64),
            "unk": np.asarray([vocab.get(model.get("unk_token") or "", -1)], dtype=np.int64)}


def _cache_file(source: Path) -> Path:
    st = source.stat()
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clawkit" / "bpe"
    return root / f"{source.stem}-{st.st_size}-{st.st_mtime_ns}-v{FORMAT}.npz"


def load(source: str | Path) -> "CompactBPE":
    """The tokenizer of ``source``: from the cached arrays when they exist, else built (and cached)."""
    source = Path(source)
    cached = _cache_file(source)
    try:
        with np.load(cached) as z:
            arrays = {k: z[k] for k in z.files}
        if int(arrays["format"][0]) == FORMAT:
            return CompactBPE(arrays)
    except (OSError, ValueError, KeyError):
        pass
    arrays = _arrays(source)
    try:  # write then rename: a concurrent reader sees the whole file or none
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only home: built again next time
    return CompactBPE(arrays)


class CompactBPE:
    """``encode(text) -> list of ids``, as ``Tokenizer.encode(text, add_special_tokens=False).ids``."""

    def __init__(self, a: dict[str, np.ndarray]):
        self.keys, self.vals = a["keys"], a["vals"]
        self.chars = {str(c): int(i) for c, i in zip(a["chars"].tolist(), a["char_ids"].tolist())}
        self.bytes = a["bytes"].tolist()
        self.unk = int(a["unk"][0])
        self.specials = {str(s): int(i) for s, i in zip(a["specials"].tolist(), a["special_ids"].tolist()) if s}
        self._split = (re.compile("(" + "|".join(re.escape(s) for s in sorted(self.specials, key=len, reverse=True)) + ")")
                       if self.specials else None)
        self._cache: dict[str, list[int]] = {}

    def _merge(self, a: int, b: int) -> tuple[int, int] | None:
        key = a << 32 | b
        i = int(np.searchsorted(self.keys, key))
        if i < len(self.keys) and int(self.keys[i]) == key:
            v = int(self.vals[i])
            return v >> 32, v & 0xFFFFFFFF
        return None

    def _symbols(self, piece: str) -> list[int]:
        out: list[int] = []
        for ch in piece:
            i = self.chars.get(ch)
            if i is not None:
                out.append(i)
                continue
            ids = [self.bytes[b] for b in ch.encode("utf-8")]
            if all(x >= 0 for x in ids):
                out.extend(ids)
            elif not (out and out[-1] == self.unk):  # fuse_unk
                out.append(self.unk)
        return out

    def _bpe(self, piece: str) -> list[int]:
        hit = self._cache.get(piece)
        if hit is not None:
            return hit
        ids: list[Any] = self._symbols(piece)
        n = len(ids)
        nxt = list(range(1, n)) + [-1]
        prv = list(range(-1, n - 1))
        heap: list[tuple[int, int, int, int, int]] = []
        for i in range(n - 1):
            m = self._merge(ids[i], ids[i + 1])
            if m:
                heap.append((m[0], i, m[1], ids[i], ids[i + 1]))
        heapq.heapify(heap)
        while heap:
            _, pos, new, a, b = heapq.heappop(heap)
            j = nxt[pos]
            if ids[pos] != a or j < 0 or ids[j] != b:
                continue  # stale: a neighbour merged since
            ids[pos], ids[j] = new, None
            nxt[pos] = nxt[j]
            if nxt[j] >= 0:
                prv[nxt[j]] = pos
            for left, right in ((prv[pos], pos), (pos, nxt[pos])):
                if left >= 0 and right >= 0:
                    m = self._merge(ids[left], ids[right])
                    if m:
                        heapq.heappush(heap, (m[0], left, m[1], ids[left], ids[right]))
        out = [i for i in ids if i is not None]
        if len(self._cache) > 20_000:
            self._cache.clear()
        self._cache[piece] = out
        return out

    def encode(self, text: str) -> list[int]:
        parts = self._split.split(text) if self._split else [text]
        out: list[int] = []
        for k, part in enumerate(parts):
            if k % 2 and self._split:
                out.append(self.specials[part])
            elif part:
                for piece in _PIECES.findall(SPACE + part.replace(" ", SPACE)):
                    out.extend(self._bpe(piece))
        return out
