"""``clawkit logs``: recent runs across every workspace this user has run agents in.

The per-user index is a plain text file, one state-database path a line:
``$CLAWKIT_HOME/workspaces`` when set, else ``$XDG_STATE_HOME/clawkit/workspaces``
(default ``~/.local/state/clawkit/workspaces``). Each process adds a database the
first time a turn uses it; ``clawkit logs`` reads every listed database (read-only)
and forgets the ones that no longer exist.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_seen: set[str] = set()


def index_path() -> Path:
    home = os.environ.get("CLAWKIT_HOME")
    if home:
        return Path(home) / "workspaces"
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "clawkit" / "workspaces"


def remember_workspace(ctx: Any) -> None:
    """Add this turn's state database to the index (once per process and database)."""
    path = getattr(ctx.session.store, "path", None)
    if path is None or str(path) == ":memory:":
        return
    db = str(path)
    if db in _seen:
        return
    _seen.add(db)
    from clawkit.storage import is_postgres_url, redact_url

    try:
        # a server is remembered by its URL without the password (libpq finds that in ~/.pgpass or PGPASSWORD)
        db = redact_url(db).replace(":***@", "@") if is_postgres_url(db) else os.path.abspath(db)
        index = index_path()
        known = index.read_text(encoding="utf-8").splitlines() if index.exists() else []
        if db not in known:
            index.parent.mkdir(parents=True, exist_ok=True)
            with open(index, "a", encoding="utf-8") as fh:  # one short append: atomic enough between processes
                fh.write(db + "\n")
    except OSError:
        pass  # a read-only home must not break a run


def _runs(db: str, limit: int, agent: str | None) -> list[dict[str, Any]]:
    from clawkit.storage import connect, is_postgres_url  # not at import: `clawkit --help` loads this module

    conn = connect(db, read_only=True, timeout=2.0)
    try:
        rows = conn.execute(
            "SELECT e.run_id, e.session_id, e.type, e.data, e.ts, s.agent FROM events e JOIN sessions s ON s.id = e.session_id"
            " WHERE e.type IN ('turn.end', 'turn.failed') AND e.run_id IS NOT NULL"
            + (" AND s.agent = ?" if agent else "") + " ORDER BY e.id DESC LIMIT ?",
            ((agent, limit) if agent else (limit,)),
        ).fetchall()
        out = []
        for run_id, sid, kind, data, ts, agent_name in rows:
            d = json.loads(data)
            usage = d.get("usage") or {}
            models = [m for (m,) in conn.execute("SELECT DISTINCT model FROM usage WHERE run_id = ?", (run_id,)) if m]
            first = conn.execute("SELECT MIN(created), (SELECT content FROM messages WHERE run_id = ? AND role = 'user' ORDER BY id LIMIT 1)"
                                 " FROM messages WHERE run_id = ?", (run_id, run_id)).fetchone()
            duration = d.get("duration")
            if duration is None and first and first[0]:
                duration = ts - first[0]
            out.append({
                "ts": ts, "workspace": db if is_postgres_url(db) else str(Path(db).parent.parent), "db": db, "agent": agent_name, "session_id": sid,
                "run_id": run_id, "model": ", ".join(models) or None,
                "prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
                "cache_read_tokens": usage.get("cache_read_tokens", 0), "cache_write_tokens": usage.get("cache_write_tokens", 0),
                "reasoning_tokens": usage.get("reasoning_tokens", 0),
                "cost": usage.get("cost"), "duration": round(duration, 3) if duration is not None else None,
                "outcome": "failed: " + str(d.get("error")) if kind == "turn.failed" else d.get("stop_reason", "done"),
                "prompt": (first[1] or "")[:80] if first else "",
            })
        return out
    finally:
        conn.close()


def recent_runs(limit: int = 20, agent: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """(runs newest first, problems) across the indexed databases; missing databases are dropped from the index."""
    index = index_path()
    dbs = index.read_text(encoding="utf-8").splitlines() if index.exists() else []
    from clawkit.storage import exists

    alive = [d for d in dict.fromkeys(dbs) if d and exists(d)]
    if len(alive) != len(dbs):
        try:
            index.write_text("".join(d + "\n" for d in alive), encoding="utf-8")
        except OSError:
            pass
    import sqlite3

    runs, problems = [], []
    for db in alive:
        try:
            runs.extend(_runs(db, limit, agent))
        except sqlite3.Error as exc:
            problems.append(f"{db}: {exc}")
    runs.sort(key=lambda r: r["ts"], reverse=True)
    return runs[:limit], problems


def register(cli: Any) -> None:
    p = cli.command("logs", help="recent runs across the workspaces you used: model, tokens, cost, duration, outcome")
    p.add_argument("-n", "--count", type=int, default=20, help="how many runs (default 20)")
    p.add_argument("--agent", help="only this agent")
    p.add_argument("--json", action="store_true", help="one JSON object per run, newest first")
    p.set_defaults(handler=cmd_logs)


def _cache_and_thinking(r: dict[str, Any]) -> str:
    """`` cache 1200r/300w think 512`` when the run read or wrote the prompt cache or thought (docs/anthropic.md)."""
    out = ""
    if r.get("cache_read_tokens") or r.get("cache_write_tokens"):
        out += f" cache {r.get('cache_read_tokens') or 0}r/{r.get('cache_write_tokens') or 0}w"
    if r.get("reasoning_tokens"):
        out += f" think {r['reasoning_tokens']}"
    return out


def cmd_logs(args: Any) -> int:
    if args.count < 1:
        print("clawkit logs: --count must be at least 1", file=sys.stderr)
        return 2
    runs, problems = recent_runs(args.count, args.agent)
    for p in problems:
        print(f"clawkit logs: skipped {p}", file=sys.stderr)
    if args.json:
        for r in runs:
            print(json.dumps(r, ensure_ascii=False))
        return 0
    if not runs:
        print(f"no runs yet (index: {index_path()})", file=sys.stderr)
        return 0
    for r in runs:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["ts"]))
        cost = f"${r['cost']:.6f}" if r["cost"] is not None else "-"
        dur = f"{r['duration']:.2f}s" if r["duration"] is not None else "-"
        extra = _cache_and_thinking(r)
        print(f"{when}  {r['agent']:12} {r['model'] or '-':24} {r['prompt_tokens']:>6}/{r['completion_tokens']:<6}{extra} {cost:>10} {dur:>8}  "
              f"{r['outcome']:10} {r['workspace']}  [{r['session_id']}]  {r['prompt']!r}")
    return 0
