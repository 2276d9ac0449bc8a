"""BERT's uncased WordPiece tokenizer, as MiniLM was trained with it — the same ids as Hugging Face
``tokenizers`` with all-MiniLM-L6-v2's ``tokenizer.json`` (``test_minilm_numpy.py`` checks them
against it over docs/ and a Unicode sample), without loading ``tokenizers`` (+17 MiB of peak RSS on a
one-shot run; this takes ~1 MiB: the vocabulary as one sorted array).

The steps (``BertNormalizer``, ``BertPreTokenizer``, ``WordPiece``):

1. clean: drop NUL, U+FFFD and other characters (``C*`` but tab, newline, return); every
   whitespace character becomes a space;
2. put spaces around CJK ideographs (each is a word of its own);
3. strip accents (NFD, drop ``Mn``) and lowercase;
4. split on whitespace, and every punctuation character (ASCII punctuation, or Unicode ``P*``) is a
   word of its own;
5. each word: longest vocabulary match first, continuations prefixed ``##``; a word with a piece
   not in the vocabulary, or longer than 100 characters, is ``[UNK]``.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np

CLS, SEP, UNK, PAD = "[CLS]", "[SEP]", "[UNK]", "[PAD]"
MAX_WORD_CHARS = 100
_ASCII_PUNCT = frozenset(chr(c) for c in [*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127)])
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK)


def _is_whitespace(ch: str) -> bool:
    return ch.isspace()


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn")


def _is_punct(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def normalize(text: str) -> str:
    """Steps 1-3: the text as the model's vocabulary spells it."""
    if text.isascii():  # the common case: no control or CJK characters to look up one by one
        out = "".join(" " if ch in "\t\n\r" else ch for ch in text if ch >= " " or ch in "\t\n\r")
        return out.replace("\x7f", "").lower()
    chars = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            chars.append(" ")
        elif _is_cjk(cp):
            chars.append(f" {ch} ")
        else:
            chars.append(ch)
    text = unicodedata.normalize("NFD", "".join(chars))
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn").lower()


def words(text: str) -> list[str]:
    """Step 4 over normalized text."""
    out: list[str] = []
    for chunk in text.split():
        if chunk.isalnum():
            out.append(chunk)
            continue
        start = 0
        for i, ch in enumerate(chunk):
            if _is_punct(ch) or _is_whitespace(ch):
                if i > start:
                    out.append(chunk[start:i])
                if not _is_whitespace(ch):
                    out.append(ch)
                start = i + 1
        if start < len(chunk):
            out.append(chunk[start:])
    return out


class WordPiece:
    """``encode(text, max_length)`` → ``[CLS] … [SEP]`` ids, cut to ``max_length`` ids in all."""

    def __init__(self, vocab_file: Path):
        # the vocabulary as one sorted fixed-width byte array, searched by bisection and built without a
        # Python object per entry: ~0.7 MiB, where a dict of 30,522 strings took 5.2 MiB of a one-shot
        # run's memory (lookups are cached per word)
        buf = np.frombuffer(Path(vocab_file).read_bytes(), dtype=np.uint8)
        ends = np.flatnonzero(buf == 10)
        if not len(buf) or buf[-1] != 10:
            ends = np.append(ends, len(buf))
        starts = np.concatenate(([0], ends[:-1] + 1))
        lengths = ends - starts
        width = int(lengths.max(initial=1))
        chars = np.zeros((len(starts), width), dtype=np.uint8)
        for j in range(width):
            has = lengths > j
            chars[has, j] = buf[starts[has] + j]
        table = chars.view(f"S{width}").ravel()
        order = np.argsort(table, kind="stable")
        self._keys, self._ids, self._width = table[order], order.astype(np.int32), width
        self.cls, self.sep, self.unk, self.pad = (self.id_of(t) for t in (CLS, SEP, UNK, PAD))
        if None in (self.cls, self.sep, self.unk, self.pad):
            raise ValueError(f"{vocab_file}: not a BERT vocabulary (no [CLS], [SEP], [UNK] or [PAD])")
        self._cache: dict[str, tuple[int, ...]] = {}

    def id_of(self, piece: str) -> int | None:
        """The id of a vocabulary entry, or None."""
        key = piece.encode("utf-8")
        if len(key) > self._width or not key:
            return None
        i = int(self._keys.searchsorted(key))
        return int(self._ids[i]) if i < len(self._keys) and self._keys[i] == key else None

    def word_ids(self, word: str) -> tuple[int, ...]:
        """Step 5 for one word."""
        hit = self._cache.get(word)
        if hit is not None:
            return hit
        id_of, ids, start, n = self.id_of, [], 0, len(word)
        if n > MAX_WORD_CHARS:
            return (self.unk,)
        while start < n:
            end, found = n, None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = id_of(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                ids = [self.unk]
                break
            ids.append(found)
            start = end
        out = tuple(ids)
        if len(self._cache) < 50_000:
            self._cache[word] = out
        return out

    def encode(self, text: str, max_length: int = 256) -> list[int]:
        ids = [self.cls]
        room = max_length - 1
        for word in words(normalize(text)):
            ids.extend(self.word_ids(word))
            if len(ids) >= room:
                del ids[room:]
                break
        ids.append(self.sep)
        return ids
