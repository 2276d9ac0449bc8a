"""The compact BPE reader of the local provider's tokenizer.json (issue 29: peak RSS of a later
one-shot run): the same ids as Hugging Face ``tokenizers``, and the default provider no longer
imports ``tokenizers`` at all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clawkit_memory import bpe
from clawkit_memory.embeddings import _static_files

ROOT = Path(__file__).resolve().parents[4]
EDGES = ["", " ", "  two  spaces ", "tab\there\nnew line\r\n", "héllo wörld — ünïcode 日本語 한국어 🎉👩‍💻",
         "<s>special</s> tokens <unk> inside", "\x00\x01 control", "ﬁ ligature ½ ① Ⅳ", "a" * 300, "▁already▁marked"]


def test_same_ids_as_hugging_face_tokenizers(tmp_path, monkeypatch):
    tokenizers = pytest.importorskip("tokenizers")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _, tok_file = _static_files(None)
    hf = tokenizers.Tokenizer.from_file(str(tok_file))
    hf.no_padding()
    hf.no_truncation()
    texts = EDGES + [p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").rglob("*.md"))]
    built = bpe.load(tok_file)  # builds the arrays and caches them
    assert list((tmp_path / "clawkit" / "bpe").glob("*.npz")), "the arrays were not cached"
    cached = bpe.load(tok_file)  # from the cache
    for text in EDGES:
        assert built.encode(text) == hf.encode(text, add_special_tokens=False).ids, text[:80]
    for text in texts:
        assert cached.encode(text) == hf.encode(text, add_special_tokens=False).ids, text[:80]


def test_an_unsupported_tokenizer_json_is_refused(tmp_path):
    f = tmp_path / "tokenizer.json"
    f.write_text('{"model": {"type": "WordPiece", "vocab": {}}, "normalizer": null, "pre_tokenizer": null}')
    with pytest.raises(bpe.Unsupported, match="tokenizer.json"):
        bpe.load(f)


def test_the_local_provider_embeds_without_importing_tokenizers(tmp_path):
    code = ("import sys; from clawkit_memory.embeddings import LocalStatic; v = LocalStatic().embed(['my cat Miso']);"
            " print(round(float((v[0] ** 2).sum()), 3), 'tokenizers' in sys.modules)")
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for _ in range(2):  # building the cache, then reading it
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        assert out.stdout.split() == ["1.0", "False"]
