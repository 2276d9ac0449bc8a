"""The full install on PostgreSQL: a CLI run with every builtin plugin loaded against the loopback
model server, sessions/events/usage/runs/steps and the audit ledger in PostgreSQL, and
``clawkit audit verify --db postgresql://…`` detecting an edited row (issue 19's acceptance)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from clawkit.testing.server import Reply

pytestmark = pytest.mark.e2e


def _clawkit(*args: str, cwd, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)  # every installed plugin
    return subprocess.run([sys.executable, "-m", "clawkit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_cli_run_on_postgres_with_every_plugin_and_audit_verify(tmp_path, model_server, postgres_db):
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: pg-agent
        model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
        tools: [read_file, shell_exec]
        """))
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    model_server.script(
        Reply.tool_calls([("read_file", {"path": "notes.txt"})]),
        Reply.tool_calls([("shell_exec", {"command": "rm -rf /"})]),
        "It is 42.",
    )
    out = _clawkit("run", "agent.yaml", "hi", "--json", "--db", postgres_db, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["reply"] == "It is 42." if "reply" in result else True
    assert not (tmp_path / ".clawkit" / "state.db").exists()  # nothing went to SQLite

    from clawkit.sessions import SessionStore

    store = SessionStore(postgres_db)
    try:
        sid = result["session_id"]
        roles = [m.role for m in store.messages(sid)]
        assert roles[0] == "user" and roles[-1] == "assistant" and "tool" in roles
        assert store.usage_totals(sid)["calls"] == 3
        runs = store.runs(sid)
        assert runs and runs[0]["status"] == "done"
        assert {s["kind"] for s in store.steps(runs[0]["id"])} >= {"llm", "tool"}
        assert store.events(sid)
    finally:
        store.close()

    verify = _clawkit("audit", "verify", "--db", postgres_db, cwd=tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    listed = _clawkit("audit", "list", "--json", "--db", postgres_db, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    records = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    assert any(r.get("tool") == "shell_exec" for r in records)


def test_plugin_tables_and_workspace_commands_on_postgres(tmp_path, model_server, postgres_db):
    """Sequence rules (a glob prerequisite), the truncator's stored outputs, serve's keys, skills and
    translation stats, sessions and logs — each plugin's tables in PostgreSQL, declared once."""
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: pg-plugins
        model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
        tools: [read_file, list_dir]
        plugins:
          sequence:
            rules:
              - {{tool: read_file, requires: ["list_*"], message: "list the folder first"}}
          truncator: {{max_tokens: 200}}
        """))
    (tmp_path / "big.txt").write_text("".join(f"line {i} of a long file\n" for i in range(2000)))
    model_server.script(
        Reply.tool_calls([("read_file", {"path": "big.txt"})]),  # blocked: no list_* ran yet
        Reply.tool_calls([("list_dir", {"path": "."})]),
        Reply.tool_calls([("read_file", {"path": "big.txt"})]),  # allowed now; cut by the truncator
        "Read it.",
    )
    out = _clawkit("run", "agent.yaml", "read big.txt", "--json", "--db", postgres_db, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    first, _, last = result["tool_calls"]
    assert first["blocked"] and not last["is_error"]
    assert "list the folder first" in [m for m in model_server.requests[1].messages if m["role"] == "tool"][0]["content"]

    from clawkit.storage import connect
    from clawkit_truncator import store as outputs

    conn = connect(postgres_db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM sequence_calls WHERE tool = 'list_dir'").fetchone()[0] >= 1
        (output_id,) = conn.execute("SELECT id FROM truncator_outputs").fetchone()
        rng = outputs.read_range(conn, result["session_id"], output_id, 0, 30)
        assert rng.text.startswith("line 0 of a long file") and rng.chars > 40_000
    finally:
        conn.close()

    listed = _clawkit("sessions", "list", "--db", postgres_db, cwd=tmp_path)
    assert listed.returncode == 0 and result["session_id"] in listed.stdout, listed.stderr
    created = _clawkit("--db", postgres_db, "keys", "create", "--name", "ci", "--json", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    keys = _clawkit("--db", postgres_db, "keys", "list", "--json", cwd=tmp_path)
    assert keys.returncode == 0 and '"ci"' in keys.stdout, keys.stderr
    stats = _clawkit("skills", "stats", "--json", "--db", postgres_db, cwd=tmp_path)
    assert stats.returncode == 0, stats.stderr
    tr = _clawkit("translation", "stats", "--json", "--db", postgres_db, cwd=tmp_path)
    assert tr.returncode == 0, tr.stderr
    assert json.loads(tr.stdout)["messages_routed"] == 1, tr.stdout  # the turn's counters, summed at its commit
    logs = _clawkit("logs", "--json", cwd=tmp_path)
    assert logs.returncode == 0 and result["session_id"] in logs.stdout, logs.stdout + logs.stderr
    mem = _clawkit("memory", "index", "--sessions", "--agent", "agent.yaml", "--db", postgres_db, cwd=tmp_path)
    assert mem.returncode == 2 and "SQLite session database only" in mem.stderr  # explicit, not a crash


def test_a_sqlite_cli_run_with_every_plugin_imports_no_postgres_driver(tmp_path, model_server):
    """The zero-set-up path stays light: a full-install run on SQLite never imports psycopg,
    SQLAlchemy or DBOS (``-X importtime`` lists every module the process imported)."""
    (tmp_path / "agent.yaml").write_text(textwrap.dedent(f"""
        name: light
        model: {{name: openai/test, api_base: "{model_server.url}", api_key: x, max_retries: 0}}
        tools: [read_file]
        """))
    (tmp_path / "a.txt").write_text("x\n")
    model_server.script(Reply.tool_calls([("read_file", {"path": "a.txt"})]), "done")
    env = dict(os.environ)
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "clawkit", "run", "agent.yaml", "hi"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / ".clawkit" / "state.db").exists()
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert "sqlite3" in imported and "clawkit_policy" in imported
    assert not imported & {"psycopg", "psycopg_binary", "psycopg_pool", "sqlalchemy", "dbos"}, imported & {"psycopg", "sqlalchemy", "dbos"}


def test_the_storage_section_of_scale_out_runs_as_written(tmp_path, model_server, postgres_db):
    """docs/scale-out.md, "PostgreSQL storage": its agent file and its shell lines (all but the
    server set-up and the interactive chat), with the test server's URL for db.internal's."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "scale-out.md").read_text(encoding="utf-8")
    section = doc[doc.index("## PostgreSQL storage"):doc.index("\n## ", doc.index("## PostgreSQL storage") + 5)]
    documented = "postgresql://clawkit@db.internal:5432/clawkit"
    agent = next(b for b in re.findall(r"```yaml\n(.*?)```", section, re.S) if "state_db" in b)
    (tmp_path / "agent.yaml").write_text(agent.replace(documented, str(postgres_db)), encoding="utf-8")
    lines = [line for b in re.findall(r"```bash\n(.*?)```", section, re.S) for line in b.strip().splitlines()
             if line.startswith("clawkit ") and " chat " not in line]
    assert len(lines) >= 4
    model_server.script("Hello from PostgreSQL.")
    env = {**os.environ, "CLAWKIT_DB": str(postgres_db), "OPENAI_BASE_URL": model_server.url, "OPENAI_API_KEY": "sk-test",
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    for line in lines:
        out = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
        if line.startswith("clawkit run"):
            assert "Hello from PostgreSQL." in out.stdout
        if line.startswith("clawkit sessions list"):
            assert "triage" in out.stdout
        if line.startswith("clawkit audit verify"):
            assert "audit ledger" in out.stdout


def test_the_plugin_author_example_of_scale_out_runs_on_both_backends(tmp_path, postgres_db):
    """The "For plugin authors" example, as written, against a SQLite store and a PostgreSQL one."""
    import re
    from pathlib import Path

    from clawkit.sessions import SessionStore

    doc = (Path(__file__).resolve().parents[1] / "docs" / "scale-out.md").read_text(encoding="utf-8")
    example = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.S) if "declare(store.conn" in b)
    for db in (tmp_path / "state.db", postgres_db):
        scope: dict = {}
        exec(compile(example, "scale-out.md", "exec"), scope)
        store = SessionStore(db)
        try:
            first, second = scope["save"](store, "ses_1", "hello"), scope["save"](store, "ses_1", "again")
            assert second > first >= 1
            assert store.conn.execute("SELECT body FROM myplugin_notes ORDER BY id").fetchall() == [("hello",), ("again",)]
        finally:
            store.close()
