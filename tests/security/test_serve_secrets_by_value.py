"""Issue 30 item 7: secrets by value, not only by name — through the real CLI with every builtin.

Credentials in unusual names (``GITHUB_PAT``, ``*_CREDS``, ``MY_PWD_FILE``, ``DEPLOY_PASSPHRASE``)
and a random token under a harmless name never reach ``shell_exec``'s environment (jailed or
not), the model, the stored session, ``sessions export``, the ledger or ``run --json``; the
model key, read reversed or base64 from a file, is redacted; without the jail, a command cannot
read the agent's own ``/proc/<pid>/environ``."""

from __future__ import annotations

import base64
import json
import sqlite3

import pytest

from .conftest import calls, clawkit, run_cli, write_agent

pytestmark = pytest.mark.e2e

SECRETS = {
    "GITHUB_PAT": "github_pat_11AQWERTY0" + "aB3dE5gH7jK9mN1pQ3sT5v" + "_X7zA9cE1gI3kM5oQ7sU9wY1aC3eG5iK7mO9qS1uW3yA5",
    "X_CREDS": "svc-deploy:Rk7wQ2pZ9mXv4TbL",
    "MY_PWD_FILE": "Hunter2-Orange-Falcon-88",
    "DEPLOY_PASSPHRASE": "tangerine lobster quantum 42",
    "BUILD_NOTE": "Zk4rT9qLm2Wx7Pv3Bn8Yc6Hd1Js5Gf0",  # a random token under a harmless name
}
MODEL_KEY = "sk-proj-Q7mZ2vX9pL4wR8tK3nB6yH1jD5sF0gA"
POLICY = """\
policy:
  risk: {"*": safe}
shield: {mode: audit-only}
"""


def _agent(ws, server, sandbox: str):
    path = write_agent(ws, server, ["shell_exec", "read_file"], POLICY + f"sandbox:\n  mode: {sandbox}\n")
    path.write_text(path.read_text().replace("api_key: sk-test", f"api_key: {MODEL_KEY}"))
    (ws / "notes.txt").write_text(f"reversed: {MODEL_KEY[::-1]}\n"
                                  f"b64: {base64.b64encode(('key=' + MODEL_KEY).encode()).decode()}\n"
                                  f"pat reversed: {SECRETS['GITHUB_PAT'][::-1]}\n")


# a command that builds the path of the agent's /proc/<pid>/environ at run time (the supervising
# shell's parent is the agent) and prints it reversed: no text check can see it coming
PROC = ('p=/pr; p="${p}oc"; f=envi; f="${f}ron"; a=$(ps -o ppid= -p $PPID | tr -d " "); '
        'tr "\\0" "\\n" < "$p/$a/$f" | rev; echo END')


@pytest.mark.parametrize("sandbox", ["off", "bwrap"])
def test_secrets_by_value_never_leave(tmp_path, server, audit_home, sandbox):
    import shutil

    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    ws = tmp_path / "ws"
    _agent(ws, server, sandbox)
    pat = SECRETS["GITHUB_PAT"]
    run = run_cli(
        ws, server, audit_home, "look around",
        # one command (the first call of the session: nothing untrusted read yet), then a read
        calls(("shell_exec", {"command": f"env; echo ----; {PROC}; echo {pat} | wc -c"}),
              ("read_file", {"path": "notes.txt"}), ids=["env", "notes"]),
        f"the token is {pat} and the key {MODEL_KEY}",
        env=SECRETS,
    )
    assert run.proc.returncode == 0, run.proc.stderr[-2000:]
    results = run.tool_results()
    assert "PATH=" in results["env"]  # the command ran and printed its environment
    assert "END" in results["env"]
    assert "reversed: [REDACTED]" in results["notes"] and "pat reversed: [REDACTED]" in results["notes"]
    b64 = results["notes"].split("b64: ", 1)[1].split("\n", 1)[0]
    assert "[REDACTED]" in b64 and base64.b64encode(("key=" + MODEL_KEY).encode()).decode() not in b64
    # what the model was shown (its own messages echo back what it wrote, which it knew already)
    seen = json.dumps([m for r in run.requests for m in r.messages if m.get("role") != "assistant"])
    export = clawkit(ws, run.env, "sessions", "export", run.result["session_id"])
    assert export.returncode == 0, export.stderr
    ledger = json.dumps(run.audit())
    conn = sqlite3.connect(ws / ".clawkit" / "state.db")
    stored = json.dumps([list(r) for r in conn.execute("SELECT * FROM messages")])
    conn.close()
    places = {"result": results["env"], "model": seen, "--json": run.proc.stdout, "export": export.stdout, "ledger": ledger, "stored": stored}
    for name, value in {**SECRETS, "MODEL_KEY": MODEL_KEY}.items():
        for variant in (value, value[::-1]):
            for where, text in places.items():
                assert variant not in text, f"{name} ({'reversed' if variant != value else 'clear'}) in {where}"
    assert "[REDACTED]" in run.proc.stdout  # the reply and the tool argument were redacted, not dropped
