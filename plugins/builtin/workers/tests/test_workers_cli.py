"""Bad input to ``clawkit worker``/``submit``/``approvals`` is a clear error and exit 2, before any
database or agent is touched; the plugin loads nothing heavy until a worker or a queue opens."""

from __future__ import annotations

import subprocess
import sys

from clawkit.cli import main


def test_worker_needs_a_postgresql_url(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CLAWKIT_DB", raising=False)
    (tmp_path / "a.yaml").write_text("name: a\nmodel: openai/x\n")
    assert main(["worker", str(tmp_path / "a.yaml"), "--db", str(tmp_path / "state.db")]) == 2
    assert "--db must be a PostgreSQL URL" in capsys.readouterr().err
    assert main(["submit", "a", "hi"]) == 2
    assert "--db must be a PostgreSQL URL (postgresql://USER@HOST:PORT/DB), got None" in capsys.readouterr().err


def test_worker_names_a_missing_agent_file_and_a_bad_concurrency(tmp_path, capsys):
    url = "postgresql://nobody@127.0.0.1:1/none"
    assert main(["worker", str(tmp_path / "missing.yaml"), "--db", url]) == 2
    assert f"{tmp_path / 'missing.yaml'}: no such agent file" in capsys.readouterr().err
    (tmp_path / "a.yaml").write_text("name: a\nmodel: openai/x\n")
    assert main(["worker", str(tmp_path / "a.yaml"), "--db", url, "--concurrency", "0"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err


def test_the_plugin_imports_no_engine_until_used():
    code = ("import sys, clawkit.cli as c; c.build_parser(__import__('clawkit.plugins').plugins.get_plugin_manager()); "
            "print('dbos' in sys.modules, 'clawkit_workers.engine' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_durable_steps_is_none_outside_a_worker(make_agent):
    import clawkit_workers

    agent = make_agent(["hi"], plugins=(clawkit_workers,))
    assert agent.run("hello").reply == "hi"  # the hook answered None: the kernel ran the turn itself


def test_an_unreachable_database_is_a_clear_error_without_the_password(capsys):
    assert main(["submit", "a", "hi", "--db", "postgresql://bob:s3cret@127.0.0.1:1/none"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach the queue at postgresql://bob:***@127.0.0.1:1/none" in err and "s3cret" not in err
