"""``clawkit memory index [PATH…] | search "query" | stats | forget PATH|--older-than``."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported in the handlers: ``clawkit --help`` must not load numpy
    from .config import MemoryConfig
    from .service import AgentMemory

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class _CliAgent:
    """What the memory service needs of an agent, when the CLI runs without an agent file."""

    def __init__(self, name: str, workspace: Path, section: MemoryConfig):
        self.name, self.workspace, self._section = name, workspace, section

    def plugin(self, name: str) -> Any:
        return self._section if name == "memory" else None


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``2w``… in seconds; ValueError names the expected form."""
    m = _DURATION.match(text.strip())
    if not m:
        raise ValueError(f"--older-than {text!r}: expected a number and a unit s/m/h/d/w, e.g. 30d")
    return float(m.group(1)) * _UNITS[m.group(2)]


def register(cli: Any) -> None:
    from clawkit.cli import add_workspace_options

    p = cli.command("memory", help="index, search and manage agent memory")
    p.add_argument("--workspace", default=".", help="workspace directory when no --agent is given")
    p.add_argument("--partition", help="memory partition (default: the agent's name, or the only one in the db)")
    sub = p.add_subparsers(dest="memory_cmd", required=True)
    ix = sub.add_parser("index", help="index memory files (default: MEMORY.md, memory/, configured paths) or PATHs")
    ix.add_argument("paths", nargs="*")
    ix.add_argument("--sessions", action="store_true", help="also index finished turns of past sessions")
    ix.add_argument("--state-db", help="session database for --sessions (default: the agent's, or .clawkit/state.db)")
    se = sub.add_parser("search", help="hybrid search")
    se.add_argument("query")
    se.add_argument("--k", type=int, default=5)
    se.add_argument("--json", action="store_true")
    se.add_argument("--mode", choices=("hybrid", "vector", "text"), default="hybrid")
    se.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                    help="source=file|episode, path=GLOB, since=DATE, until=DATE, tags=a,b, session=ID")
    st = sub.add_parser("stats", help="what is indexed")
    st.add_argument("--json", action="store_true")
    fg = sub.add_parser("forget", help="drop a source (path or glob) or everything older than a duration")
    fg.add_argument("path", nargs="?")
    fg.add_argument("--older-than", help="e.g. 30d, 12h, 2w")
    cp = sub.add_parser("compact", help="merge old episodes into summaries now (the agent's model writes them; needs --agent)")
    cp.add_argument("--json", action="store_true")
    add_workspace_options(p)  # --agent (workspace, partition, embedding settings) and --db, at every level
    p.set_defaults(handler=run)


def _open(args: Any) -> tuple[AgentMemory, Path | None]:
    from .config import MemoryConfig
    from .service import db_path, memory_for

    from clawkit.cli import workspace_config, workspace_db

    state_db: Path | None = None
    cfg = workspace_config(args)
    if cfg is not None:
        from clawkit.hooks import HookRunner
        from clawkit.plugins import get_plugin_manager

        agent, hooks = cfg, HookRunner(get_plugin_manager(disabled=cfg.disabled_plugins()))
        state_db = workspace_db(args)
    else:
        from clawkit.hooks import HookRunner
        from clawkit.plugins import get_plugin_manager

        ws = Path(args.workspace).resolve()
        section = MemoryConfig()
        name = args.partition or _only_partition(db_path(ws, section)) or "default"
        agent, hooks = _CliAgent(name, ws, section), HookRunner(get_plugin_manager())
        state_db = Path(getattr(args, "db", None) or ws / ".clawkit" / "state.db")
    if args.partition and cfg is not None:
        agent.plugins.memory.partition = args.partition  # type: ignore[union-attr]
    if getattr(args, "state_db", None):
        state_db = Path(args.state_db)
    return memory_for(agent, hooks, progress=sys.stderr.isatty()), state_db


def _only_partition(path: Path) -> str | None:
    if not path.exists():
        return None
    from .db import connect

    conn = connect(path)
    try:
        rows = conn.execute("SELECT DISTINCT partition FROM memory_sources").fetchall()
    finally:
        conn.close()
    return rows[0][0] if len(rows) == 1 else None


def _filters(items: list[str]) -> dict[str, Any]:
    from .search import FilterError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise FilterError(f"--filter {item!r}: expected KEY=VALUE")
        out[key] = value.split(",") if key == "tags" else value
    return out


def run(args: Any) -> int:
    from .search import FilterError
    from .service import close_all

    try:
        try:
            mem, state_db = _open(args)
        except Exception as exc:  # ConfigError and friends: bad input
            print(f"clawkit memory: {exc}", file=sys.stderr)
            return 2
        return _dispatch(args, mem, state_db)
    except (FilterError, ValueError) as exc:
        print(f"clawkit memory: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"clawkit memory: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        close_all()


def _dispatch(args: Any, mem: AgentMemory, state_db: Path | None) -> int:
    cmd = args.memory_cmd
    if cmd == "index":
        missing = [p for p in args.paths if not mem.index.expand([p])]
        if missing:
            print(f"clawkit memory index: nothing to index at {', '.join(missing)}", file=sys.stderr)
            return 2
        if args.sessions and str(state_db).startswith("postgres"):
            print("clawkit memory index --sessions: sessions are indexed as episodes from a SQLite session database "
                  "only; memory's index is per machine and does not read a PostgreSQL server (see docs/scale-out.md)",
                  file=sys.stderr)
            return 2
        report = mem.index.index_paths(args.paths, mem.partition, force=True) if args.paths else mem.refresh(force=True)
        if args.sessions and state_db is not None:
            report.add(mem.sync_sessions(state_db))
        print(f"partition {mem.partition}: {report.files} sources indexed, {report.unchanged} unchanged, "
              f"{report.removed} removed; {report.chunks} chunks, {report.embedded} embedded, {report.cached} from cache")
        return 0
    if cmd == "search":
        hits = mem.search(args.query, k=args.k, filters=_filters(args.filter), mode=args.mode)
        if args.json:
            print(json.dumps([h.as_dict() for h in hits], indent=2))
        else:
            for h in hits:
                snippet = " ".join(h.text.split())[:200]
                print(f"{h.citation}  score={h.score:.4f} sim={h.similarity:.3f}  {h.heading}\n    {snippet}")
            if not hits:
                print("no results")
        return 0
    if cmd == "stats":
        stats = mem.index.stats()
        describe = getattr(mem.index.provider, "describe", None)
        if describe is not None:
            stats["embedder"] = describe()
        if args.json:
            print(json.dumps(stats, indent=2))
        else:
            print(f"{stats['db']} ({stats['bytes']} bytes), model {stats['model']}, "
                  f"{stats['cached_embeddings']} cached embeddings")
            if stats.get("embedder"):  # auto: which provider answers, and whether it fell back
                print(f"embeddings: {stats['embedder']}")
            for part, kinds in stats["partitions"].items():
                for kind, n in kinds.items():
                    print(f"  {part}: {n['chunks']} chunks from {n['sources']} {kind} sources")
        return 0
    if cmd == "compact":
        return _compact(args, mem, state_db)
    if cmd == "forget":
        if not args.path and not args.older_than:
            print("clawkit memory forget: give a PATH (or glob) or --older-than DURATION", file=sys.stderr)
            return 2
        older = parse_duration(args.older_than) if args.older_than else None
        n = mem.index.forget(mem.partition, path=args.path, older_than=older)
        print(f"partition {mem.partition}: forgot {n} chunks")
        return 0
    return 2


def _compact(args: Any, mem: AgentMemory, state_db: Path | None) -> int:
    """``clawkit memory compact``: index what is pending, then merge every group of old episodes due."""
    import asyncio

    from clawkit.runtime import open_agent

    from .merge import compact, model_summarizer

    if not getattr(args, "agent", None):
        print("clawkit memory compact: give --agent AGENT.yaml (its model writes the summaries)", file=sys.stderr)
        return 2
    if state_db is not None and mem.cfg.sessions:
        mem.sync_sessions(state_db)
    agent = open_agent(args.agent, persist=False)
    try:
        summarize = model_summarizer(agent.provider, agent.config.model.name, mem.cfg.compaction.summary_max_tokens)
        merged = asyncio.run(compact(mem, state_db, summarize))
    finally:
        agent.close()
    if args.json:
        print(json.dumps({"partition": mem.partition, "merged": merged}))
    else:
        print(f"partition {mem.partition}: " + (f"merged into {', '.join(merged)}" if merged else "nothing to merge"))
    return 0
