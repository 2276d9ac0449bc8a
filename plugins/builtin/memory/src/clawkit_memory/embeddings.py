"""Embedding providers: the opt-in ``static`` (WordLlama's static table, read from the wordllama
wheel's files) and ``minilm`` (MiniLM on onnxruntime) here, the default ``local`` (MiniLM in numpy)
in :mod:`.local`; remote ones come from other plugins through ``register_embedding_provider``
(``litellm`` from clawkit-litellm).

The contract: ``factory(config)`` returns an object with ``model``, ``dimensions`` and
``embed(texts) -> list of vectors``. Memory never imports another plugin.
"""

from __future__ import annotations

import os
import threading
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .config import EmbeddingConfig

WORDLLAMA_FILES = ("wordllama/weights/l2_supercat_256.safetensors", "wordllama/tokenizers/l2_supercat_tokenizer_config.json")


from .errors import EmbeddingError  # noqa: E402,F401  (defined apart: the remote providers raise it too)


_LOADED: dict[tuple, tuple] = {}


class RowFile:
    """A table of embedding rows on disk, read row by row with ``os.pread``: only the rows a text
    uses are read, and into this process's own short-lived buffers — the table never counts in
    the process's resident memory (a memory map would: every row a catch-up indexing touched
    stayed resident, +12-33 MiB of peak RSS on a one-shot run)."""

    def __init__(self, path: Path, offset: int, shape: tuple[int, int], dtype: Any):
        self.path, self.offset, self.shape, self.dtype = path, offset, shape, np.dtype(dtype)
        self.row_bytes = shape[1] * self.dtype.itemsize
        size = path.stat().st_size
        if offset + shape[0] * self.row_bytes > size:
            raise EmbeddingError(f"{path}: {size} bytes, too short for a {shape[0]}x{shape[1]} table")
        self.fd = os.open(path, os.O_RDONLY)

    def mean(self, ids: Any) -> np.ndarray:
        """The mean of the rows ``ids`` (float32)."""
        from .bert import read_rows

        uniq, counts = np.unique(np.clip(np.asarray(ids), 0, self.shape[0] - 1), return_counts=True)
        buf = read_rows(self.fd, self.offset, self.row_bytes, uniq.tolist())
        rows = np.frombuffer(buf, dtype=self.dtype).reshape(len(uniq), self.shape[1]).astype(np.float32)
        return (rows * counts[:, None]).sum(axis=0) / counts.sum()


def _safetensors_table(path: Path) -> RowFile:
    """The one tensor of a safetensors file (its header read by :class:`.bert.TensorFile`)."""
    from .bert import ModelFileError, TensorFile

    try:
        header = TensorFile(path)
    except ModelFileError as e:
        raise EmbeddingError(str(e)) from None
    header.close()
    if len(header.meta) != 1:
        raise EmbeddingError(f"{path}: expected one tensor, found {sorted(header.meta)}")
    ((name, (dtype, shape, offset, _)),) = header.meta.items()
    if dtype == np.int8 or len(shape) != 2:
        raise EmbeddingError(f"{path}: unsupported tensor {dtype} {list(shape)}")
    return RowFile(path, offset, shape, dtype)


def _npy_table(path: Path) -> RowFile:
    """A 2-D ``.npy`` table (as ``scripts/distill_static_embeddings.py`` writes)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(f)  # public readers (numpy 2.x has no _read_array_header)
        offset = f.tell()
    if fortran or len(shape) != 2:
        raise EmbeddingError(f"{path}: expected a 2-D C-ordered table")
    return RowFile(path, offset, shape, dtype)


def _static_files(static_dir: str | None) -> tuple[Path, Path]:
    if static_dir:  # a table of your own: embeddings.npy (or .safetensors) + tokenizer.json
        d = Path(static_dir)
        table = d / "embeddings.npy" if (d / "embeddings.npy").exists() else d / "embeddings.safetensors"
        return table, d / "tokenizer.json"
    try:  # files of the wordllama distribution, located without importing it
        dist = metadata.distribution("wordllama")
    except metadata.PackageNotFoundError:
        raise EmbeddingError("the local embedding provider reads WordLlama's table: pip install wordllama "
                             "(or set plugins.memory.embedding.static_dir)") from None
    return tuple(Path(str(dist.locate_file(f))) for f in WORDLLAMA_FILES)  # type: ignore[return-value]


def _static_tokenizer(tok_file: Path) -> Callable[[str], list[int]]:
    """``text -> token ids`` (no special tokens added) for a static table's ``tokenizer.json``: the
    compact BPE reader (:mod:`.bpe`, +3 MiB where ``tokenizers`` took +17 MiB of peak RSS) when it
    supports the file, else Hugging Face ``tokenizers``."""
    from . import bpe

    try:
        return bpe.load(tok_file).encode
    except bpe.Unsupported:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tok_file))
        tok.no_padding()
        tok.no_truncation()
        return lambda text: tok.encode(text, add_special_tokens=False).ids


class LocalStatic:
    """The opt-in ``static`` provider (the default from issue 29's first pass to its fifth): static
    token embeddings, no neural network at run time.

    The table is WordLlama's ``l2_supercat`` (256 dimensions, 32k tokens; Lee Miller, MIT),
    read from the files of the ``wordllama`` wheel with its ``tokenizer.json`` (read by :mod:`.bpe`,
    the same ids as Hugging Face ``tokenizers`` in a fifth of the memory) — wordllama's code is
    not imported. A text's vector is the mean of its tokens' rows, L2-normalised (what
    WordLlama's own ``embed(norm=True)`` computes). No onnxruntime; rows are read from the file
    as needed (``RowFile``), so the table costs no resident memory.
    ``static_dir`` points at another table (``embeddings.npy`` + ``tokenizer.json``, e.g. the
    MiniLM distillation of ``scripts/distill_static_embeddings.py``). Loads once per process.
    """

    model = "local/wordllama-l2-supercat-256"  # another table gets another name: stored vectors are then rebuilt
    dimensions = 256
    # recall's default floor: unrelated questions scored -0.05-0.14 against notes, related ones 0.19-0.47
    # (MiniLM's 0.35 would drop most related ones); see docs/plugins/memory.md
    min_similarity = 0.15

    def __init__(self, config: EmbeddingConfig | None = None):
        config = config or EmbeddingConfig()
        settings = config.settings()
        self.batch_size = config.batch_size
        self._dir = settings.get("static_dir")
        self._table: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        key = ("static", self._dir)
        with self._lock:
            if self._table is not None:
                return
            if key not in _LOADED:
                table_file, tok_file = _static_files(self._dir)
                missing = [str(f) for f in (table_file, tok_file) if not f.exists()]
                if missing:
                    raise EmbeddingError(f"static embedding files missing: {', '.join(missing)}")
                table = _npy_table(table_file) if table_file.suffix == ".npy" else _safetensors_table(table_file)
                if table.shape[1] != self.dimensions:
                    raise EmbeddingError(f"{table_file}: {table.shape[1]} dimensions, expected {self.dimensions}")
                _LOADED[key] = (_static_tokenizer(tok_file), table)
            self._tokenizer, self._table = _LOADED[key]

    @property
    def loaded(self) -> bool:
        """Whether the table is open in this process (embedding costs no load)."""
        return self._table is not None or ("static", self._dir) in _LOADED

    def load(self) -> None:
        """Open the table now (once per process)."""
        if self._table is None:
            self._load()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` (float32, unit length), in order; a text without tokens gets zeros."""
        if self._table is None:
            self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for i, text in enumerate(texts):  # one at a time: a batch's encodings would all be in memory at once
            ids = self._tokenizer(text)
            if ids:
                v = self._table.mean(ids)
                out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
        return out


def _tokenizer_file(configured: str | None) -> Path:
    if not configured:
        raise EmbeddingError("the minilm provider needs MiniLM's tokenizer.json: set plugins.memory.embedding.tokenizer_path")
    return Path(configured)


def _model_file(configured: str | None) -> Path:
    if not configured:
        raise EmbeddingError("the minilm provider needs an all-MiniLM-L6-v2 ONNX file: "
                             "set plugins.memory.embedding.model_path (and pip install onnxruntime)")
    return Path(configured)


class LocalMiniLM:
    """all-MiniLM-L6-v2 (ONNX, 384 dimensions) on the CPU, offline: the opt-in ``minilm``
    provider (the default until the static table replaced it; docs/plugins/memory.md has both
    measured). Needs onnxruntime (``clawkit-memory[minilm]``) and a model file you supply
    (``model_path``) and its ``tokenizer.json`` (``tokenizer_path``). Same pipeline as sentence-transformers: truncation at 256 tokens,
    mean pooling over the attention mask, L2 normalisation. Loads on first use.
    """

    model = "local/all-MiniLM-L6-v2-int8"
    dimensions = 384
    max_length = 256

    def __init__(self, config: EmbeddingConfig | None = None):
        config = config or EmbeddingConfig()
        settings = config.settings()
        self.batch_size = config.batch_size
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        # half the cores at most (1 on 2 cores): the embedding runs beside the reply path, which keeps a core;
        # on 2 shared cores 1 thread embedded a query in 5 ms (2 threads: 10-12 ms) and a batch no slower
        self.threads = int(settings.get("threads", max(1, min(4, cpus // 2))))
        self._model_path = settings.get("model_path")
        self._tokenizer_path = settings.get("tokenizer_path")
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def _load(self) -> None:
        key = (self._model_path, self._tokenizer_path, self.threads)
        with self._lock:
            if self._session is not None:
                return
            if key in _LOADED:  # one model in memory per process, however many agents
                self._tokenizer, self._session, self._inputs = _LOADED[key]
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(_tokenizer_file(self._tokenizer_path)))
            tok.enable_truncation(max_length=self.max_length)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            opts.intra_op_num_threads = self.threads
            # idle pool threads sleep instead of spinning: a spinning pool burnt CPU the reply path needed
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(str(_model_file(self._model_path)), sess_options=opts,
                                           providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer, self._session = tok, session
            _LOADED[key] = (tok, session, self._inputs)

    def _encode(self, texts: list[str]) -> np.ndarray:
        encs = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory in this process (embedding costs no load)."""
        return self._session is not None or (self._model_path, self._tokenizer_path, self.threads) in _LOADED

    def load(self) -> None:
        """Load the model now (once per process), so a later ``embed`` does only the model's work."""
        if self._session is None:
            self._load()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` (float32, unit length), in order."""
        if self._session is None:
            self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        # batches of similar length waste little on padding
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            out[idx] = self._encode([texts[i] for i in idx])
        return out


Factory = Callable[[EmbeddingConfig], Any]


def collect_providers(hooks: Any) -> dict[str, Factory]:
    """Every embedding provider the loaded plugins register."""
    found: dict[str, Factory] = {}
    hooks.call_sync("register_embedding_provider", register=lambda name, factory: found.__setitem__(name, factory))
    return found


def resolve_provider(config: EmbeddingConfig, factories: dict[str, Factory]) -> Any:
    """The provider ``config`` asks for. ``auto``: the configured remote provider (``remote:``, or
    ``litellm`` when ``model`` or ``api_base`` is set) with the
    local model as its fallback (:class:`clawkit_memory.remote.FallbackEmbeddings`); else ``local``."""
    from .remote import FallbackEmbeddings, GeminiEmbeddings, OpenAIEmbeddings

    name = config.provider
    from .local import LocalEmbeddings

    factories = {"local": LocalEmbeddings, "static": LocalStatic, "minilm": LocalMiniLM, "openai": OpenAIEmbeddings, "gemini": GeminiEmbeddings,
                 **factories}
    remote = None
    if name == "auto":
        remote = config.settings().get("remote")
        if remote is None and (config.model or config.api_base):
            remote = "litellm"
        name = str(remote) if remote else "local"
    if name not in factories:
        hint = " — install clawkit-litellm, which registers it" if name == "litellm" else ""
        field = "embedding.remote" if remote else "embedding.provider"
        raise EmbeddingError(f"plugins.memory.{field}: unknown provider {name!r}{hint} "
                             f"(registered: {', '.join(sorted(factories))})")
    if remote:
        return FallbackEmbeddings(factories[name](config), lambda: factories["local"](config), name)
    return factories[name](config)
