"""Every subcommand that reads a workspace takes ``--agent AGENT.yaml`` and ``--db PATH`` after
the subcommand (and ``--db`` before it), with every builtin plugin installed; hints match."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

pytestmark = pytest.mark.e2e

COMMANDS = [
    ["sessions", "list"], ["sessions", "show", "{sid}"], ["sessions", "export", "{sid}"],
    ["skills", "list"], ["skills", "stats"], ["memory", "stats"], ["memory", "search", "teal"],
    ["audit", "verify"], ["audit", "list"], ["translation", "stats"],
]

RUNNER = textwrap.dedent("""
    import contextlib, io, json, sys
    from clawkit.cli import main
    out = []
    for argv in json.loads(sys.argv[1]):
        o, e = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        out.append([argv, code, o.getvalue(), e.getvalue()])
    print(json.dumps(out))
""")


def run_all(cwd, argvs):
    env = {k: v for k, v in os.environ.items() if k != "CLAWKIT_LOAD_PLUGINS"}  # the full install
    p = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(argvs)], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_agent_and_db_after_every_workspace_subcommand(tmp_path, model_server):
    model_server.script("The sky is teal.")
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("# Notes\nThe sky is teal.\n")
    model = {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test"}
    agent = ws / "agent.yaml"
    agent.write_text(yaml.safe_dump({"name": "opts", "model": model, "instructions": "Brief."}))
    env = dict(os.environ, CLAWKIT_LOAD_PLUGINS="clawkit-litellm")
    first = subprocess.run([sys.executable, "-m", "clawkit", "run", "agent.yaml", "hi", "--json"], cwd=ws, env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    sid = json.loads(first.stdout)["session_id"]
    db = str(ws / ".clawkit" / "state.db")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    argvs = []
    for cmd in COMMANDS:
        cmd = [c.format(sid=sid) for c in cmd]
        argvs += [cmd + ["--agent", str(agent)], cmd + ["--db", db], ["--db", db, *cmd]]
    for argv, code, out, err in run_all(elsewhere, argvs):
        assert code == 0, (argv, out, err)
        assert "unrecognized arguments" not in err and "Traceback" not in err, (argv, err)
        if argv[:2] == ["sessions", "list"]:
            assert sid in out
    # without either, the hint names options that work
    [[_, code, _, err]] = run_all(elsewhere, [["sessions", "list"]])
    assert code == 2 and "pass --db PATH or --agent AGENT.yaml" in err
    [[_, code, _, err]] = run_all(elsewhere, [["sessions", "list", "--agent", "missing.yaml"]])
    assert code == 2 and "--agent missing.yaml: no such agent file" in err
