"""Issue 28 item 4: storage backends behind the kernel's store interface as a plugin hook.

SQLite stays in the kernel; a ``postgresql://`` database is opened by clawkit-postgres through
``open_storage``. With the plugin installed, ``clawkit run --db postgresql://…`` keeps the session
in PostgreSQL (every builtin loaded, a real server); with it uninstalled (``CLAWKIT_LOAD_PLUGINS``
naming every other distribution) the same command fails at once with the install hint, the
password redacted, and no SQLite file is made in its place. On old main the kernel opened
PostgreSQL itself, so the run without the plugin succeeded and the hook did not exist.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from clawkit import hookimpl, storage
from clawkit.errors import ConfigError
from clawkit.plugins import get_plugin_manager
from clawkit.sessions import SessionStore


def _clawkit(cwd, *args: str, without: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # every installed plugin
    if without:  # as if that distribution were uninstalled
        dists = {ep.dist.name for ep in metadata.entry_points(group="clawkit") if ep.dist}
        assert without in dists
        env["CLAWKIT_LOAD_PLUGINS"] = ",".join(sorted(dists - {without}))  # narrow: the uninstalled plugin is what is tested
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.e2e
def test_postgres_storage_comes_from_the_plugin_and_its_absence_is_a_clear_error(tmp_path, model_server, postgres_db):
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: pg-store
        model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
        tools: []
        """))
    model_server.script("stored in postgres")
    ok = _clawkit(tmp_path, "run", "agent.yaml", "hi", "--json", "--db", postgres_db)
    assert ok.returncode == 0, ok.stderr[-3000:]
    sid = json.loads(ok.stdout)["session_id"]
    store = SessionStore(postgres_db)
    try:
        assert type(store.conn).__module__ == "clawkit_postgres.connection"
        assert [m.role for m in store.messages(sid)] == ["user", "assistant"]
    finally:
        store.close()

    secret = postgres_db.replace("postgresql://clawkit@", "postgresql://clawkit:hunter2@")
    missing = _clawkit(tmp_path, "run", "agent.yaml", "again", "--db", secret, without="clawkit-postgres")
    assert missing.returncode != 0
    assert "install clawkit-postgres" in missing.stderr and "postgresql://" in missing.stderr, missing.stderr[-2000:]
    assert "hunter2" not in missing.stderr and "Traceback" not in missing.stderr
    assert not (tmp_path / ".clawkit" / "state.db").exists()  # nothing fell back to SQLite
    assert len(model_server.requests) == 1  # the second run never reached the model


class MemoryBackend:
    """A storage plugin for ``memdb://`` URLs: an in-memory SQLite connection, read-only honoured."""

    opened: list = []

    @hookimpl
    def open_storage(self, url, read_only):
        if not url.startswith("memdb://"):
            return None
        type(self).opened.append((url, read_only))
        return sqlite3.connect(":memory:")


def test_open_storage_picks_the_backend_by_scheme():
    pm = get_plugin_manager(extra=[MemoryBackend()])
    conn = storage.open_url("memdb://scratch", read_only=True, pm=pm)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert MemoryBackend.opened == [("memdb://scratch", True)]
    # clawkit-postgres does not take another scheme; no plugin answering names the scheme
    with pytest.raises(ConfigError, match=r"no installed plugin opens redis:// databases"):
        storage.open_url("redis://u:pw@h/0", pm=pm)
    bare = get_plugin_manager(load_entry_points=False)  # narrow: no storage plugin installed is what is tested
    with pytest.raises(ConfigError, match=r"postgresql://u:\*\*\*@h/db: .*\(install clawkit-postgres\)"):
        storage.open_url("postgresql://u:pw@h/db", pm=bare)
