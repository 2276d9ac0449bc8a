"""The default ``local`` provider (issue 29): all-MiniLM-L6-v2 shipped as int8 package data and run in
numpy — the same vectors as MiniLM on onnxruntime, the same token ids as Hugging Face ``tokenizers``,
and a clear error for a damaged model file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clawkit_memory import bert
from clawkit_memory.config import EmbeddingConfig
from clawkit_memory.errors import EmbeddingError
from clawkit_memory.local import LocalEmbeddings
from clawkit_memory.wordpiece import WordPiece

HERE = Path(__file__).parent
DOCS = HERE.parents[3] / "docs"
REFERENCE = json.loads((HERE / "minilm_reference.json").read_text(encoding="utf-8"))["texts"]
UNICODE = [
    "Crème brûlée à la française; naïve café — «quoted» ‘text’", "Ελληνικά и русский текст", "日本語のテキスト、漢字と仮名",
    "中文句子，带标点。", "emoji 🙂🚀 and symbols € ¥ © ± ∑ ≤", "zero\u200bwidth\u00a0nbsp\u2028line\u2029para",
    "control\x00\x07\x1bchars\x7f\ufffd and \ufeffBOM", "İstanbul ǅungla ß ﬁ ligatures", "x" * 120 + " long word",
    "tab\tnew\nline\rreturn\x0bvt\x0cff\x85nel", "a-b_c.d/e\\f:g;h@i#j$k%l^m&n*o(p)q[r]s{t}u|v~w`x'y\"z",
    "Ａｂｃ full-width １２３ and ①②③", "ﾊﾝｶｸ half-width kana", "\u0301combining first", "मानक हिन्दी", "한국어 문장입니다",
]


def test_token_ids_match_hugging_face_tokenizers():
    """WordPiece gives the same ids as ``tokenizers`` configured as MiniLM's tokenizer.json is
    (BertNormalizer, BertPreTokenizer, WordPiece) on every paragraph of docs/ and a Unicode sample."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    vocab = {line.rstrip("\n"): i for i, line in enumerate(bert.VOCAB.read_text(encoding="utf-8").splitlines(True))}
    ref = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    ref.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=True)
    ref.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    ref.post_processor = processors.BertProcessing(("[SEP]", vocab["[SEP]"]), ("[CLS]", vocab["[CLS]"]))
    ref.enable_truncation(max_length=256)
    ours = WordPiece(bert.VOCAB)
    texts = [p for f in sorted(DOCS.rglob("*.md")) for p in re.split(r"\n\s*\n", f.read_text(encoding="utf-8")) if p.strip()]
    texts += UNICODE + [r["text"] for r in REFERENCE]
    assert len(texts) > 1000
    wrong = [(t[:60], ours.encode(t), ref.encode(t).ids) for t in texts if ours.encode(t) != ref.encode(t).ids]
    assert not wrong, wrong[:3]
    for r in REFERENCE:  # and the ids the reference vectors were computed from
        assert ours.encode(r["text"]) == r["ids"]


def test_vectors_match_minilm_on_onnxruntime():
    """The numpy network over the shipped int8 weights gives MiniLM's vectors: cosine ≥ 0.9999 against
    an independent int8 ONNX export on onnxruntime (tests/minilm_reference.json), one text at a time
    and in one padded batch."""
    p = LocalEmbeddings(EmbeddingConfig())
    texts = [r["text"] for r in REFERENCE]
    want = np.array([r["vector"] for r in REFERENCE], dtype=np.float32)
    alone = np.vstack([p.embed([t]) for t in texts])
    together = p.embed(texts)
    assert alone.shape == (3, 384) and np.allclose(np.linalg.norm(alone, axis=1), 1, atol=1e-5)
    assert (np.sum(alone * want, axis=1) >= 0.9999).all(), np.sum(alone * want, axis=1)
    assert np.allclose(alone, together, atol=1e-5)  # padding changes nothing
    near, far = p.embed(["the kitten fears the hoover", "quarterly tax form"]) @ alone[0]
    assert near > 0.5 > far


def test_long_texts_are_truncated_at_256_tokens():
    p = LocalEmbeddings(EmbeddingConfig())
    head = "alpha beta gamma delta " * 100
    a, b = p.embed([head, head + " and a different ending entirely"])
    assert np.array_equal(a, b)


def test_a_damaged_model_file_is_a_clear_error(tmp_path):
    """A truncated or foreign file names itself: the provider raises EmbeddingError, never a numpy
    traceback (the CLI's handling: the next test)."""
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(bert.WEIGHTS.read_bytes()[: 5_000_000])
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\xff" * 64)
    for path in (cut, junk, tmp_path / "missing.safetensors"):
        p = LocalEmbeddings(EmbeddingConfig(provider="local", model_path=str(path)))
        with pytest.raises(EmbeddingError, match=re.escape(str(path))):
            p.embed(["hello"])


def test_embedding_loads_no_onnxruntime_tokenizers_or_wordllama():
    """A fresh process embedding with the default provider imports none of the heavy or third-party
    model packages, and keeps its peak memory small (the one-shot budget is measured by bench_oneshot)."""
    code = (
        "import sys, resource\n"
        "from clawkit_memory.config import EmbeddingConfig\n"
        "from clawkit_memory.embeddings import resolve_provider\n"
        "import numpy\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "p = resolve_provider(EmbeddingConfig(), {})\n"
        "v = p.embed(['what is the name of my cat, and what is it scared of?'])\n"
        "grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024\n"
        "print(type(p).__name__, v.shape[1], grew < 24)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'onnxruntime', 'tokenizers', 'wordllama', 'safetensors', 'torch', 'scipy'}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.splitlines() == ["LocalEmbeddings 384 True", "[]"], out


def test_model_path_points_at_a_copy(tmp_path):
    """``model_path`` / ``vocab_path`` read another copy of the files (as quantize_minilm.py writes them)."""
    shutil.copyfile(bert.WEIGHTS, tmp_path / "w.safetensors")
    shutil.copyfile(bert.VOCAB, tmp_path / "vocab.txt")
    p = LocalEmbeddings(EmbeddingConfig(provider="local", model_path=str(tmp_path / "w.safetensors"),
                                        vocab_path=str(tmp_path / "vocab.txt")))
    assert float(p.embed([REFERENCE[0]["text"]])[0] @ np.array(REFERENCE[0]["vector"])) >= 0.9999


def test_a_run_with_a_broken_model_answers_and_says_why_in_one_line(tmp_path, model_server):
    """``clawkit run`` with every builtin loaded and ``model_path`` at a damaged file: the turn is
    answered (memory failing never takes the agent down), stderr names the file in one line (no
    traceback), and ``clawkit memory search`` exits 1 with the same reason."""
    model_server.script(lambda request: "Miso hides under the bed.")
    (tmp_path / "MEMORY.md").write_text("# Notes\nMy cat Miso hides under the bed when the vacuum runs.\n")
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 16)
    (tmp_path / "agent.yaml").write_text(
        f"name: t\nmodel: {{name: openai/x, api_base: '{model_server.url}', api_key: sk-test}}\n"
        "plugins:\n  memory:\n    embedding: {provider: local, model_path: junk.safetensors}\n")
    runs = [subprocess.run([sys.executable, "-m", "clawkit", *argv], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120) for argv in (["run", "agent.yaml", "what is my cat afraid of?"],
                                                     ["run", "agent.yaml", "and again?"],
                                                     ["memory", "--agent", "agent.yaml", "search", "cat"])]
    for done in runs[:2]:
        assert done.returncode == 0 and "Miso hides" in done.stdout, done.stderr
        assert "Traceback" not in done.stderr
    assert "junk.safetensors" in runs[1].stderr  # the second run catches up the first's turn: the model is needed
    assert runs[2].returncode == 1 and "junk.safetensors" in runs[2].stderr and "Traceback" not in runs[2].stderr


def test_blas_runs_on_one_thread_for_the_whole_process_once_the_model_loads():
    """The limit is set once, not entered and left around each pass: left per call, two threads
    embedding at once restored each other's limit, so passes ran on OpenBLAS's pool — and a fork
    while a pass waited on the pool deadlocked in OpenBLAS's fork handler (a CI run hung so)."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: BLAS has one thread anyway")
    code = (
        "from threadpoolctl import threadpool_info\n"
        "from clawkit_memory.local import LocalEmbeddings\n"
        "blas = lambda: sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'})\n"
        "before = blas()\n"
        "LocalEmbeddings().embed(['some words to embed'])\n"
        "print(before, blas())\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                         env=env).stdout.split("] [")
    assert out[0] != "[1" and out[1].strip() == "1]", out
