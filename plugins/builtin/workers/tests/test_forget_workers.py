"""``clawkit sessions delete`` on a PostgreSQL store whose agent runs turns on the queue: the
session's DBOS workflows (input, steps' outputs), approvals and rows go; another session's stay."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clawkit_workers.testing import Workers, agent_yaml

pytestmark = pytest.mark.e2e
CANARY_A, CANARY_B = "qcanaryforgetone", "qcanarykeeptwo"


def _hits(url: str, needle: str) -> list[str]:
    """schema.table of every row (any schema, DBOS's included) whose text holds ``needle``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
                              " AND table_schema NOT IN ('pg_catalog', 'information_schema')").fetchall()
        return sorted(f"{s}.{t}" for s, t in tables
                      if conn.execute(f'SELECT 1 FROM "{s}"."{t}" x WHERE x::text LIKE %s LIMIT 1', (f"%{needle}%",)).fetchone())


def test_delete_forgets_queued_turns(pg_url, append_model, tmp_path):
    from clawkit.runtime import open_turn_queue

    yaml = agent_yaml(tmp_path, append_model.server.url)
    workers = Workers(pg_url, [yaml])
    try:
        workers.start(1)
        with open_turn_queue(pg_url) as q:
            ta = q.submit("appender", f"please append token {CANARY_A}", session_id="ses_forgetA")
            tb = q.submit("appender", f"please append token {CANARY_B}", session_id="ses_keepB")
            assert q.result(ta, timeout=120)["reply"] == f"appended {CANARY_A}"
            q.result(tb, timeout=120)
    finally:
        workers.stop_all()
    assert "public.messages" in _hits(pg_url, CANARY_A)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    out = subprocess.run([sys.executable, "-m", "clawkit", "sessions", "delete", "ses_forgetA", "--db", pg_url, "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["deleted"]["sessions"] == 1 and report["deleted"]["workers.turn_workflows"] == 1
    assert [h for h in _hits(pg_url, CANARY_A) if h != "public.policy_audit"] == []
    assert "public.messages" in _hits(pg_url, CANARY_B)  # (DBOS keeps inputs encoded: checked through its API below)
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=pg_url)
    try:
        assert client.list_workflows(workflow_ids=[ta]) == [] and len(client.list_workflows(workflow_ids=[tb])) == 1
    finally:
        client.destroy()
