"""The plugin author's path has no surprises (issue 28, item 6), through the real CLI with every
builtin plugin installed: a command-line ``--workspace`` is relative to the current directory
while the YAML's ``workspace:`` stays relative to the YAML's folder; ``name: off`` is the string
"off"; a key typo gets a "did you mean"; ``clawkit prompt`` starts no MCP server and writes
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from clawkit.testing.server import ModelServer, Reply

pytestmark = pytest.mark.e2e

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
        out.append([code, o.getvalue(), e.getvalue()])
    print(json.dumps(out))
""")


def run_all(cwd, argvs):
    env = {k: v for k, v in os.environ.items() if k not in ("CLAWKIT_LOAD_PLUGINS", "CLAWKIT_EAGER_PLUGINS")}
    p = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(argvs)], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_workspace_paths_and_a_name_that_yaml_11_calls_a_boolean(tmp_path, wire):
    root = tmp_path
    (root / "examples" / "ws").mkdir(parents=True)  # the YAML's own workspace: examples/ws
    (root / "ws").mkdir()  # the command line's: ./ws
    with ModelServer() as server:
        server.script(Reply.text("from the cwd workspace"), Reply.text("from the yaml workspace"))
        (root / "examples" / "agent.yaml").write_text(textwrap.dedent(f"""\
            name: off
            model: {{name: "{wire}/test-model", api_base: "{server.url}", api_key: sk-test}}
            workspace: ws
        """))
        results = run_all(root, [
            ["run", "examples/agent.yaml", "hi", "--workspace", "ws", "--json"],
            ["run", "examples/agent.yaml", "hi", "--json"],
        ])
    (code1, out1, err1), (code2, out2, err2) = results
    assert code1 == 0, err1
    assert code2 == 0, err2
    assert json.loads(out1)["reply"] == "from the cwd workspace"
    assert json.loads(out2)["reply"] == "from the yaml workspace"
    # each turn's session went to its workspace's database
    assert (root / "ws" / ".clawkit" / "state.db").exists()
    assert (root / "examples" / "ws" / ".clawkit" / "state.db").exists()
    assert not (root / "examples" / "ws" / "ws").exists()


def test_a_key_typo_is_an_error_with_a_hint_and_prompt_starts_no_mcp_server(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "STARTED"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    (tmp_path / "typo.yaml").write_text("name: typo\nmodel: openai/test-model\ntols: [read_file]\nworkspace: ws\n")
    (tmp_path / "mcp.yaml").write_text(textwrap.dedent(f"""\
        name: files
        model: openai/test-model
        workspace: ws
        mcp:
          servers:
            files: {{command: {json.dumps(server[0])}, args: {json.dumps(server[1:])}}}
    """))
    (typo_code, _, typo_err), (prompt_code, prompt_out, prompt_err) = run_all(tmp_path, [
        ["prompt", "typo.yaml"],
        ["prompt", "mcp.yaml", "--message", "list my files"],
    ])
    assert typo_code == 2 and "typo.yaml:3: tols: unknown key (did you mean `tools`?)" in typo_err, typo_err
    assert prompt_code == 0, prompt_err
    assert not marker.exists(), "clawkit prompt started the MCP server"
    assert list(ws.iterdir()) == [], f"clawkit prompt wrote into the workspace: {list(ws.rglob('*'))}"
