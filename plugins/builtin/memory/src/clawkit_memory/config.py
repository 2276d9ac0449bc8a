"""The ``plugins.memory`` section of an agent YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from clawkit.config import section_of
from pydantic import BaseModel, ConfigDict, Field

MEMORY_ROOTS = ("MEMORY.md", "memory")  # memory files in the workspace: a file and a folder
EPISODE_DELAY = 0.25  # seconds after a turn's end before its episode is indexed (when the thread is free)


class EmbeddingConfig(BaseModel):
    """Which embedding provider to use. ``auto``: remote when ``model`` names a remote
    model (or ``api_base`` is set), else the local offline MiniLM."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    provider: str = Field("auto", description="auto | local | litellm | any registered embedding provider")
    model: str | None = Field(None, description="remote model string for litellm, e.g. openai/text-embedding-3-small")
    api_base: str | None = Field(None, description="OpenAI-compatible endpoint for the remote provider")
    api_key: str | None = None
    dimensions: int | None = Field(None, description="vector size of the remote model (asked on first use when unset)")
    batch_size: int = Field(32, gt=0, description="texts per embedding call")
    timeout: float = Field(60.0, gt=0, description="seconds per remote embedding call")

    def settings(self) -> dict[str, Any]:
        """Extra keys, passed on to the provider (e.g. ``model_path``, ``threads``)."""
        return dict(self.model_extra or {})


class ChunkingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: int = Field(400, gt=20, description="window size in (approximate) tokens for long sections")
    overlap: int = Field(80, ge=0, description="tokens shared by consecutive windows")


# A fresh process's embedding model (numpy + onnxruntime + MiniLM) loaded in 0.5-2.1 s on a 2-core
# machine at load 13: 4 s is twice the worst (tests/benchmarks/bench_first_turn.py, docs/plugins/memory.md)
LOAD_WAIT_MS = 4000


class RecallConfig(BaseModel):
    """The prompt contributor that injects relevant memory into the system prompt."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    budget_ms: int = Field(300, ge=0, description="longest wait for the search itself, counted from when the embedding "
                                                  "model is ready, before the prompt is built without it")
    load_wait_ms: int = Field(LOAD_WAIT_MS, ge=0, description="longest wait, from the message's arrival, for a fresh "
                              "process's embedding model to load (it loads while the rest of the turn is prepared)")
    k: int = Field(3, gt=0, description="snippets injected at most")
    min_similarity: float | None = Field(None, description="cosine similarity a snippet needs to be injected; default "
                                                         "the embedding provider's (local: 0.30, static: 0.15, minilm/remote: 0.35)")
    dedup_similarity: float = Field(0.92, gt=0, le=1, description="a hit this similar (cosine) to a better one is a "
                                    "near-duplicate and left out, so distinct facts are not crowded out")
    max_chars: int = Field(2000, gt=0, description="size limit of the injected section")


class SearchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(60, gt=0)
    vector_weight: float = Field(1.0, ge=0)
    text_weight: float = Field(1.0, ge=0)
    min_should_match: float = Field(0.0, ge=0, le=1, description="in hybrid search, the fraction of the query's words "
                                    "a BM25 hit must contain to take part in the fusion (0 = any word)")
    candidates: int = Field(20, gt=0, description="candidates taken from each of BM25 and KNN before fusion (50 until "
                            "issue 29's fourth pass: deeper lists let chunks ranked low by both outrank either's best)")
    collapse: bool = Field(True, description="one hit per section first: the other windows of a section already "
                           "found (or, without headings, overlapping windows) move after every section's best")
    bm25_max_postings: int = Field(5_000, ge=0, description="BM25 drops a query's most common words (rarest kept "
                                   "first) once their document counts add up to more than this (0 = never); a word "
                                   "in more than half of the chunks (no weight in BM25) is dropped then even if rarest")
    quantize_above: int = Field(2_000, ge=0, description="chunk count above which KNN uses the binary prefilter")
    oversample: int = Field(10, gt=0, description="binary-prefilter candidates per wanted result")
    mmr: bool = False
    mmr_lambda: float = Field(0.7, ge=0, le=1)
    temporal_decay: bool = False
    half_life_days: float = Field(30.0, gt=0)


class EpisodeCompactionConfig(BaseModel):
    """Old episodes (past sessions' turns) summarised by the agent's model and merged, in the
    background after a turn (docs/memory-episode-compaction.md)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="compact old episodes after turns (and with `clawkit memory compact`)")
    keep_recent: int = Field(50, ge=0, description="the most recent sessions' episodes are kept verbatim")
    batch: int = Field(20, ge=2, description="old sessions merged into one summary (compaction waits until this many are old)")
    max_chars: int = Field(24_000, ge=1000, description="episode text per summarisation request (more: a rolling summary)")
    summary_max_tokens: int = Field(800, gt=0, description="longest summary the model may write")


class MemoryConfig(BaseModel):
    """Memory for one agent: what to index, how to embed and how to search."""

    model_config = ConfigDict(extra="forbid")

    db: str | None = Field(None, description="memory SQLite file; default <workspace>/.clawkit/memory.db")
    partition: str | None = Field(None, description="this agent's partition; default the agent's name")
    read_partitions: list[str] = Field(default_factory=list, description="other partitions this agent may read")
    child_of: str | None = Field(None, description="set by clawkit-subagents for a sub-agent (not by hand): the parent's "
                                 "partition. The child's notes go to its own folder and partition (never the workspace's "
                                 "memory files); the parent recalls them only as untrusted data")
    paths: list[str] = Field(default_factory=list, description="extra files/dirs/globs to index (relative to the workspace)")
    sessions: bool = Field(True, description="index finished turns of past sessions (episodes)")
    watch: bool = Field(True, description="re-index memory files when they change (watchfiles)")
    save_file: str = Field("memory/{date}.md", description="where memory_save appends ({date} = YYYY-MM-DD)")
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    compaction: EpisodeCompactionConfig = Field(default_factory=EpisodeCompactionConfig)


def config_of(agent: Any) -> MemoryConfig:
    """The agent's ``plugins.memory`` section as a :class:`MemoryConfig` (defaults when absent; remembered
    per agent config: :func:`clawkit.config.section_of`)."""
    return section_of(agent, "memory", MemoryConfig)


CHILD_NOTES = ".clawkit/memory/children"  # a sub-agent's memory_save notes, one folder per child partition


def notes_dir(partition: str) -> str:
    """A child partition's notes folder, relative to the workspace (``lead>researcher`` →
    ``.clawkit/memory/children/lead/researcher``)."""
    import re

    parts = [re.sub(r"[^A-Za-z0-9_.-]", "_", p).lstrip(".") or "_" for p in partition.split(">")]
    return "/".join([CHILD_NOTES, *parts])


def is_below(partition: str, ancestor: str) -> bool:
    """Whether ``partition`` is a sub-agent's partition below ``ancestor`` (``lead>researcher``)."""
    return partition.startswith(ancestor + ">")


def db_path(workspace: Path, cfg: MemoryConfig) -> Path:
    if cfg.db:
        p = Path(cfg.db)
        return (p if p.is_absolute() else workspace / p).resolve()
    return (workspace / ".clawkit" / "memory.db").resolve()
