"""memory.db schema migrations with sqlite-utils (issue 29, goal 3): an older file is brought in line
with the declared schema once, nothing in it lost; a current file never imports sqlite-utils."""

from __future__ import annotations

import subprocess
import sys

from clawkit_memory import db as mdb
from clawkit_memory.migrate import SCHEMA_VERSION

OLD = """
CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE memory_sources (partition TEXT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL, hash TEXT, mtime REAL,
    size INTEGER, indexed_at REAL, PRIMARY KEY (partition, path));
CREATE TABLE memory_chunks (id INTEGER PRIMARY KEY, partition TEXT NOT NULL, kind TEXT NOT NULL, path TEXT NOT NULL,
    start_line INTEGER, end_line INTEGER, heading TEXT, text TEXT NOT NULL, hash TEXT NOT NULL, tags TEXT,
    session_id TEXT);
INSERT INTO memory_sources VALUES ('default', 'MEMORY.md', 'file', 'h1', 1.0, 10, 2.0);
INSERT INTO memory_chunks VALUES (7, 'default', 'file', 'MEMORY.md', 1, 3, '# About', 'My cat is Miso.', 'c1', NULL, NULL);
"""


def test_an_older_memory_db_is_migrated_and_keeps_its_rows(tmp_path):
    path = tmp_path / "memory.db"
    raw = mdb.sqlite.connect(str(path))
    raw.executescript(OLD)
    raw.commit()
    raw.close()

    conn = mdb.connect(path)
    cols = {r[1]: r for r in conn.execute("PRAGMA table_info(memory_sources)")}
    assert {"forgotten", "forgotten_before"} <= set(cols)  # added
    assert cols["forgotten"][3] == 1 and cols["forgotten"][4] == "0"  # NOT NULL DEFAULT 0, as declared
    chunks = {r[1]: r for r in conn.execute("PRAGMA table_info(memory_chunks)")}
    assert "created" in chunks
    assert chunks["tags"][3] == 1 and chunks["tags"][4] == "','"  # transformed: NOT NULL DEFAULT ','
    assert conn.execute("SELECT path, hash, forgotten FROM memory_sources").fetchall() == [("MEMORY.md", "h1", 0)]
    assert conn.execute("SELECT id, text, tags FROM memory_chunks").fetchall() == [(7, "My cat is Miso.", ",")]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # the index opens it and works: a chunk can be written with the new columns
    conn.execute("INSERT INTO memory_chunks (partition, kind, path, text, hash, created) "
                 "VALUES ('default', 'file', 'x.md', 't', 'c2', 1.0)")
    conn.close()


def test_a_current_or_new_memory_db_does_not_import_sqlite_utils(tmp_path):
    code = ("import sys; from clawkit_memory import db; c = db.connect(sys.argv[1]); c.close(); c = db.connect(sys.argv[1]);"
            " print(c.execute('PRAGMA user_version').fetchone()[0], 'sqlite_utils' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m.db")], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(SCHEMA_VERSION), "False"]
