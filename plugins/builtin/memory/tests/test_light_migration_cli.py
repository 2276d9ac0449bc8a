"""A workspace whose memory.db was made by an older clawkit-memory (issue 29, goal 3): the next
``clawkit run`` migrates it (sqlite-utils) and recall still reaches the first prompt — through the
real CLI, every builtin plugin loaded, the loopback model recording what it was sent. On old main
the schema's index on a column the old file lacks stopped memory from opening its database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

OLD = """
CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE memory_sources (partition TEXT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL, hash TEXT, mtime REAL,
    size INTEGER, indexed_at REAL, PRIMARY KEY (partition, path));
CREATE TABLE memory_chunks (id INTEGER PRIMARY KEY, partition TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
    start_line INTEGER, end_line INTEGER, heading TEXT, text TEXT NOT NULL, hash TEXT NOT NULL, tags TEXT,
    session_id TEXT);
"""


def test_a_run_migrates_an_older_memory_db_and_recalls(tmp_path):
    from clawkit_memory import db as mdb

    ws = tmp_path / "ws"
    (ws / ".clawkit").mkdir(parents=True)
    raw = mdb.sqlite.connect(str(ws / ".clawkit" / "memory.db"))
    raw.executescript(OLD)
    raw.close()
    (ws / "MEMORY.md").write_text("# About me\n\n- My cat is called Miso; she hides under the bed when the "
                                  "vacuum cleaner runs.\n")
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}  # the full install
    env["CLAWKIT_AUDIT_HOME"] = str(ws / ".audit-home")
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    with ModelServer() as server:
        (ws / "agent.yaml").write_text(textwrap.dedent(f"""\
            name: helper
            model: {{name: openai/test, api_base: "{server.url}", api_key: sk-test, max_retries: 0, timeout: 30}}
            instructions: Answer briefly.
            """))
        server.script(Reply.text("Your cat is Miso."))
        done = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "what is my cat called?", "--json"],
                              cwd=ws, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-2000:]
        sent = json.dumps(server.requests[0].body)
    assert "[MEMORY.md#L" in sent and "Miso" in sent, sent[:2000]
    conn = mdb.sqlite.connect(str(ws / ".clawkit" / "memory.db"))
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1
    assert {"forgotten", "forgotten_before"} <= {r[1] for r in conn.execute("PRAGMA table_info(memory_sources)")}
    assert "created" in {r[1] for r in conn.execute("PRAGMA table_info(memory_chunks)")}
