"""Hybrid search: FTS5 BM25 + sqlite-vec KNN, fused, filtered in SQL, optionally diversified.

Vector search is exact (sqlite-vec brute force, cosine) for small partitions; above
``quantize_above`` chunks it first takes ``k * oversample`` candidates by Hamming
distance over binary-quantised vectors (:mod:`.binary`, numpy over an in-memory copy of
sqlite-vec's bit column) and re-ranks them with the full vectors.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Literal

import numpy as np

from .config import SearchConfig
from .index import MemoryIndex

Mode = Literal["hybrid", "vector", "text"]
FILTER_KEYS = ("source", "path", "since", "until", "tags", "session")
_WORD = re.compile(r"\w+")
_DATED = re.compile(r"(^|/)\d{4}-\d{2}-\d{2}[^/]*$")
STOPWORDS = frozenset(
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its me my "
    "of on or our should so that the their them then there these they this to was we were what when where which "
    "who why will with would you your".split()
)
# what \w+ leaves of contractions and possessives ("can't" -> can, t; "someone's" -> someone, s):
# as BM25 words they match nothing useful, and as min-should-match prefixes they match everything
FRAGMENTS = frozenset("s t d ll re ve m".split())


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def query_terms(text: str) -> list[str]:
    """The query's distinct content words, crudely stemmed (matched as word prefixes)."""
    words = dict.fromkeys(w.lower() for w in _WORD.findall(text))
    return [_stem(w) for w in words if w not in STOPWORDS and w not in FRAGMENTS]


class FilterError(ValueError):
    """A bad ``filters`` argument; the message names the key."""


@dataclass
class Hit:
    """One search result with its citation and scores."""

    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    score: float
    similarity: float
    kind: str
    partition: str
    created: float | None
    session_id: str | None = None
    text_rank: int | None = None
    vector_rank: int | None = None
    id: int = 0
    #: an episode's provenance (``session:`` hits, set by the service): [] clean, else where its session's
    #: untrusted content came from — such a hit is shown only as data (see clawkit_memory.trust)
    untrusted_sources: list | None = None

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}" + (f"-{self.end_line}" if self.end_line != self.start_line else "")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["citation"] = self.citation
        return d


def _epoch(value: Any, key: str) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    try:
        dt = datetime.fromisoformat(str(value))
    except ValueError:
        raise FilterError(f"filters.{key}: expected a date (YYYY-MM-DD) or epoch seconds, got {value!r}") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def filter_sql(filters: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL (over ``memory_chunks c``) for metadata filters: source, path glob, since/until, tags, session."""
    clauses: list[str] = []
    args: list[Any] = []
    for key, value in (filters or {}).items():
        if value is None or value == "" or value == []:
            continue
        if key == "source":
            if value not in ("file", "episode"):
                raise FilterError(f"filters.source: expected 'file' or 'episode', got {value!r}")
            clauses.append("c.kind = ?")
            args.append(value)
        elif key == "path":
            clauses.append("c.path GLOB ?")
            args.append(str(value))
        elif key in ("since", "until"):
            clauses.append("c.created >= ?" if key == "since" else "c.created < ?")
            args.append(_epoch(value, key))
        elif key == "tags":
            tags = [value] if isinstance(value, str) else list(value)
            clauses.append("(" + " OR ".join("c.tags LIKE ?" for _ in tags) + ")")
            args += [f"%,{str(t).lower().lstrip('#')},%" for t in tags]
        elif key == "session":
            clauses.append("c.session_id = ?")
            args.append(str(value))
        else:
            raise FilterError(f"filters.{key}: unknown filter (known: {', '.join(FILTER_KEYS)})")
    return " AND ".join(clauses), args


def fts_words(text: str) -> list[str]:
    """The query's distinct words, lower-cased, stop words dropped (all words if only stop words)."""
    words = [w.lower() for w in _WORD.findall(text)]
    keep = [w for w in words if w not in STOPWORDS and w not in FRAGMENTS] or words
    return list(dict.fromkeys(keep))


def fts_query(text: str, words: list[str] | None = None) -> str | None:
    """A safe FTS5 query: the query's words (or ``words``) OR-ed, each a quoted phrase."""
    words = fts_words(text) if words is None else words
    return " OR ".join(f'"{w}"' for w in words) if words else None


class Searcher:
    """Searches one :class:`MemoryIndex` across the partitions a caller may read."""

    def __init__(self, index: MemoryIndex, config: SearchConfig | None = None):
        self.index = index
        self.config = config or SearchConfig()
        self._counts: dict[tuple | None, int] = {}
        self._counts_version: tuple | None = None
        self._vocab_ready = False

    def _count(self, partitions: list[str] | None) -> int:
        """Chunks in ``partitions`` (all chunks for None), cached until the database changes."""
        conn = self.index.conn
        version = (self.index.generation, conn.execute("PRAGMA data_version").fetchone()[0])
        if self._counts_version != version:
            self._counts, self._counts_version = {}, version
        key = tuple(partitions) if partitions is not None else None
        if key not in self._counts:
            if partitions is None:
                sql, args = "SELECT COUNT(*) FROM memory_chunks", ()
            else:
                sql = f"SELECT COUNT(*) FROM memory_chunks WHERE partition IN ({','.join('?' * len(partitions))})"
                args = tuple(partitions)
            self._counts[key] = conn.execute(sql, args).fetchone()[0]
        return self._counts[key]

    def _affordable(self, words: list[str]) -> list[str]:
        """The query words BM25 can score within ``bm25_max_postings``: FTS5 scores every chunk
        that contains any word, so a common word makes an OR query slow while adding little
        (its IDF is low). Words are kept rarest first while their document counts fit the
        budget; the rarest always stays. Words are stemmed by FTS5 itself (a scratch table
        with the same tokenizer), their counts read from ``fts5vocab``."""
        budget = self.config.bm25_max_postings
        if not budget or len(words) < 2 or self._count(None) * len(words) <= budget:
            return words
        conn = self.index.conn
        if not self._vocab_ready:
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_fts_vocab USING fts5vocab(main, memory_fts, row)")
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_qtok USING fts5(w, tokenize = 'porter unicode61')")
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_qtok_i USING fts5vocab(temp, memory_qtok, instance)")
            self._vocab_ready = True
        conn.executemany("INSERT INTO temp.memory_qtok (rowid, w) VALUES (?, ?)", list(enumerate(words)))
        stems: dict[int, list[str]] = {}
        for i, term in conn.execute("SELECT doc, term FROM temp.memory_qtok_i"):
            stems.setdefault(i, []).append(term)
        conn.execute("DELETE FROM temp.memory_qtok")
        terms = sorted({t for ts in stems.values() for t in ts})
        df = dict(conn.execute(f"SELECT term, doc FROM temp.memory_fts_vocab WHERE term IN ({','.join('?' * len(terms))})",
                               terms).fetchall()) if terms else {}
        cost = {i: sum(df.get(t, 0) for t in stems.get(i, [])) for i in range(len(words))}
        if sum(cost.values()) <= budget:
            return words
        # the rarest word stays even over budget, unless it is in more than half of the chunks: BM25
        # gives such a word no weight (its IDF is clamped to ~0), so scoring its postings — every
        # stored episode for "2" in "what is 2 + 3?" — would cost time growing with the store for nothing
        half = self._count(None) / 2
        keep, spent = set(), 0
        for i in sorted(cost, key=lambda i: (cost[i], i)):
            if (keep and spent + cost[i] > budget) or cost[i] > half:
                break
            keep.add(i)
            spent += cost[i]
        return [w for i, w in enumerate(words) if i in keep]

    def _bm25_ids(self, q: str, partitions: list[str], where: str, args: list[Any], n: int) -> list[int]:
        """Top ``n`` chunk ids by BM25. When the partitions hold most of the index and there is
        no filter, FTS5 ranks on its own (no join: ~2x faster) and the partition check runs on
        the few ids it returns; otherwise FTS5 is joined with the chunk table."""
        conn = self.index.conn
        marks = ",".join("?" * len(partitions))
        mine, total = self._count(partitions), self._count(None)
        if not where and mine * 2 >= total:
            fetch = n if mine == total else n * 4
            ids = [r[0] for r in conn.execute(
                "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY bm25(memory_fts) LIMIT ?", (q, fetch))]
            if mine == total or not ids:
                return ids
            ok = {r[0] for r in conn.execute(
                f"SELECT id FROM memory_chunks WHERE id IN ({','.join('?' * len(ids))}) AND partition IN ({marks})",
                (*ids, *partitions))}
            kept = [i for i in ids if i in ok]
            if len(kept) >= n or len(ids) < fetch:
                return kept[:n]
        sql = (f"SELECT c.id FROM memory_fts JOIN memory_chunks c ON c.id = memory_fts.rowid"
               f" WHERE memory_fts MATCH ? AND c.partition IN ({marks})"
               + (f" AND {where}" if where else "") + " ORDER BY bm25(memory_fts) LIMIT ?")
        return [r[0] for r in conn.execute(sql, (q, *partitions, *args, n))]

    def text_ranked(self, query: str, partitions: list[str], where: str, args: list[Any], n: int,
                    min_should_match: float = 0.0) -> list[int]:
        """BM25 ranking over the query's words OR-ed; with ``min_should_match`` a chunk must
        contain at least that fraction of the words to stay in the list."""
        words = fts_words(query)
        if not words:
            return []
        affordable = self._affordable(words)
        if not affordable:  # only words that weigh nothing: the vectors rank this query
            return []
        ids = self._bm25_ids(fts_query(query, affordable), partitions, where, args, n)
        terms = query_terms(query)
        if min_should_match <= 0 or len(terms) < 2 or not ids:
            return ids
        need = math.ceil(len(terms) * min_should_match)
        texts = dict(self.index.conn.execute(
            f"SELECT id, lower(COALESCE(heading, '') || ' ' || text) FROM memory_chunks"
            f" WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall())
        out = []
        probes = [" " + t for t in terms]
        for cid in ids:
            flat = " " + " ".join(_WORD.findall(texts.get(cid, "")))  # word starts are " x": prefix tests become substring tests
            if sum(1 for t in probes if t in flat) >= need:
                out.append(cid)
        return out

    def vector_ranked(self, qv: np.ndarray, partitions: list[str], where: str, args: list[Any], n: int) -> list[int]:
        conn = self.index.conn
        marks = ",".join("?" * len(partitions))
        if where:  # a filtered set small enough is scored exactly; else over-fetch and filter
            ids = [r[0] for r in conn.execute(
                f"SELECT c.id FROM memory_chunks c WHERE c.partition IN ({marks}) AND {where} LIMIT 20001",
                (*partitions, *args))]
            if len(ids) <= 20000:
                sims = self.similarities(qv, ids)
                return [i for i, _ in sorted(sims.items(), key=lambda kv: -kv[1])[:n]]
        fetch = n * 4 if where else n
        if self._count(partitions) > self.config.quantize_above:
            cand = self.index.binary.top(conn, qv, partitions, fetch * self.config.oversample)
            sims = self.similarities(qv, cand)
            ranked = [i for i, _ in sorted(sims.items(), key=lambda kv: -kv[1])]
        else:
            ranked = [r[0] for r in conn.execute(
                f"SELECT rowid FROM memory_vec WHERE embedding MATCH ? AND k = ? AND partition IN ({marks})",
                (qv.tobytes(), fetch, *partitions))]
        if where:
            marks2 = ",".join("?" * len(ranked))
            ok = {r[0] for r in conn.execute(
                f"SELECT c.id FROM memory_chunks c WHERE c.id IN ({marks2}) AND {where}", (*ranked, *args))}
            ranked = [i for i in ranked if i in ok]
        return ranked[:n]

    def similarities(self, qv: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Exact cosine similarity of ``ids`` to the query, from the embedding cache."""
        out: dict[int, float] = {}
        model = self.index.model
        for s in range(0, len(ids), 900):
            part = ids[s : s + 900]
            rows = self.index.conn.execute(
                f"SELECT c.id, e.vector FROM memory_chunks c JOIN memory_embeddings e ON e.model = ? AND e.hash = c.hash"
                f" WHERE c.id IN ({','.join('?' * len(part))})", (model, *part)).fetchall()
            if rows:
                mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
                sims = mat @ qv / (np.linalg.norm(mat, axis=1) * (np.linalg.norm(qv) or 1.0) + 1e-12)
                out.update(zip((r[0] for r in rows), sims.tolist()))
        return out

    def search(self, query: str, *, partitions: list[str], k: int = 5, filters: dict[str, Any] | None = None,
               mode: Mode = "hybrid", mmr: bool | None = None, decay: bool | None = None) -> list[Hit]:
        """The ``k`` best chunks for ``query`` in ``partitions``, best first."""
        cfg = self.config
        where, args = filter_sql(filters)
        n = max(cfg.candidates, k)
        with self.index.lock:
            if not self._count(partitions):
                return []
            qv = self.index.query_vector(query) if mode != "text" else None
            msm = cfg.min_should_match if mode == "hybrid" else 0.0
            text = self.text_ranked(query, partitions, where, args, n, msm) if mode != "vector" else []
            vec = self.vector_ranked(qv, partitions, where, args, n) if qv is not None else []
            ids = list(dict.fromkeys(vec + text))
            sims = self.similarities(qv, ids) if qv is not None else {}
            rows = {r[0]: r for r in self.index.conn.execute(
                "SELECT id, path, start_line, end_line, heading, text, kind, partition, created, session_id"
                f" FROM memory_chunks WHERE id IN ({','.join('?' * len(ids))})", ids)} if ids else {}
        t_rank = {i: r for r, i in enumerate(text, 1)}
        v_rank = {i: r for r, i in enumerate(vec, 1)}
        hits = []
        for i in ids:
            if i not in rows:
                continue
            _, path, a, b, heading, body, kind, part, created, sid = rows[i]
            hits.append(Hit(path, a, b, heading or "", body, 0.0, float(sims.get(i, 0.0)), kind, part, created, sid,
                            t_rank.get(i), v_rank.get(i), i))
        self._score(hits, len(text))
        if decay if decay is not None else cfg.temporal_decay:
            now = time.time()
            for h in hits:
                if h.created and (h.kind == "episode" or _DATED.search(h.path)):
                    h.score *= 0.5 ** (max(0.0, now - h.created) / 86400 / cfg.half_life_days)
        hits.sort(key=lambda h: (-h.score, h.id))
        if cfg.collapse:
            hits = collapse_sections(hits)
        if mmr if mmr is not None else cfg.mmr:
            hits = self._mmr(hits, k)
        return hits[:k]

    def _score(self, hits: list[Hit], n_text: int) -> None:
        cfg = self.config
        if cfg.fusion == "rrf":
            for h in hits:
                h.score = (cfg.vector_weight / (cfg.rrf_k + h.vector_rank) if h.vector_rank else 0.0) + \
                          (cfg.text_weight / (cfg.rrf_k + h.text_rank) if h.text_rank else 0.0)
            return
        # weighted: cosine similarity plus a rank-normalised BM25 score in [0, 1]
        for h in hits:
            text_part = 1.0 - (h.text_rank - 1) / max(1, n_text) if h.text_rank else 0.0
            h.score = cfg.vector_weight * max(0.0, h.similarity) + cfg.text_weight * text_part

    def _mmr(self, hits: list[Hit], k: int) -> list[Hit]:
        """Maximal marginal relevance: trade relevance against similarity to what is already chosen."""
        if len(hits) <= 1:
            return hits
        vecs = self.vectors([h.id for h in hits])
        top = max(h.score for h in hits) or 1.0
        chosen: list[Hit] = []
        rest = list(hits)
        lam = self.config.mmr_lambda
        while rest and len(chosen) < k:
            def value(h: Hit) -> float:
                red = max((float(vecs[h.id] @ vecs[c.id]) for c in chosen if h.id in vecs and c.id in vecs), default=0.0)
                return lam * h.score / top - (1 - lam) * red
            best = max(rest, key=value)
            chosen.append(best)
            rest.remove(best)
        return chosen + rest

    def vectors(self, ids: list[int]) -> dict[int, np.ndarray]:
        """Unit-length stored embeddings of chunks ``ids`` (those that have one)."""
        rows = self.index.conn.execute(
            "SELECT c.id, e.vector FROM memory_chunks c JOIN memory_embeddings e ON e.model = ? AND e.hash = c.hash"
            f" WHERE c.id IN ({','.join('?' * len(ids))})", (self.index.model, *ids)).fetchall()
        out = {}
        for i, blob in rows:
            v = np.frombuffer(blob, dtype=np.float32)
            out[i] = v / (np.linalg.norm(v) or 1.0)
        return out


def collapse_sections(hits: list[Hit]) -> list[Hit]:
    """One hit per section first: a hit from a section already represented by a better hit (same
    path and heading trail — the windows a long section was cut into) moves after every section's
    best, in order. Where there are no sections (a file without headings, an episode's turn), only
    windows that overlap a better one's lines count as the same. Nothing is dropped: a caller
    asking for more results still gets the other windows, after the distinct ones."""
    seen: set[tuple[str, str]] = set()
    spans: dict[str, list[tuple[int, int]]] = {}
    first: list[Hit] = []
    rest: list[Hit] = []
    for h in hits:
        if h.heading:
            key = (h.path, h.heading)
            same = key in seen
            seen.add(key)
        else:
            kept = spans.setdefault(h.path, [])
            same = any(h.start_line <= b and h.end_line >= a for a, b in kept)
            if not same:
                kept.append((h.start_line, h.end_line))
        (rest if same else first).append(h)
    return first + rest


def format_hits(hits: list[Hit], max_chars: int = 700) -> str:
    """Hits as cited text for the model: ``[path#L3-9] (score) heading`` then the snippet."""
    if not hits:
        return "No matching memory."
    out = []
    for h in hits:
        body = h.text if len(h.text) <= max_chars else h.text[: max_chars - 1].rstrip() + "…"
        head = f"[{h.citation}] (similarity {h.similarity:.2f})" + (f" {h.heading}" if h.heading else "")
        out.append(f"{head}\n{body}")
    return "\n\n".join(out)


__all__ = ["Hit", "Searcher", "FilterError", "filter_sql", "fts_query", "fts_words", "format_hits", "collapse_sections"]
