"""Item 4 + 6: the agent cannot erase or rewrite its audit trail unnoticed; a ledger failure
withholds the result (redacted first) and blocks further calls."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from .conftest import calls, clawkit, run_cli, write_agent

ALL_SAFE = """\
policy:
  risk: {"*": safe}
"""

# (call id, tool, arguments) — each tries to write the state directory, the agent's YAML or the audit key
ATTACKS = [
    ("w_empty_db", "write_file", {"path": ".clawkit/state.db", "content": ""}),
    ("w_dot_db", "write_file", {"path": "./.clawkit/../.clawkit/state.db", "content": "x"}),
    ("w_new_in_state", "write_file", {"path": ".clawkit/evil.db", "content": "x"}),
    ("w_symlink_db", "write_file", {"path": "innocent.txt", "content": ""}),  # innocent.txt -> .clawkit/state.db
    ("w_agent_yaml", "write_file", {"path": "agent.yaml", "content": "name: pwned\n"}),
    ("e_agent_yaml", "edit_file", {"path": "agent.yaml", "old": "name: target", "new": "name: pwned"}),
    ("w_audit_key", "write_file", {"path": "{audit}/key", "content": "0" * 32}),
    ("s_rm_db", "shell_exec", {"command": "rm -f .clawkit/state.db"}),
    ("s_glob_db", "shell_exec", {"command": "rm -rf .c*"}),
    ("s_sqlite", "shell_exec", {"command": ["sh", "-c", "echo > ./.clawkit/state.db"]}),
    ("s_cwd_state", "shell_exec", {"command": "truncate -s0 state.db", "cwd": ".clawkit"}),
    ("s_yaml", "shell_exec", {"command": "sed -i s/target/pwned/ agent.yaml"}),
    ("s_audit_home", "shell_exec", {"command": "rm -rf {audit}"}),
]


@pytest.fixture(scope="module")
def attacked(tmp_path_factory, server, audit_home):
    ws = tmp_path_factory.mktemp("ledger") / "ws"
    # even a grant that covers the audit home does not let a tool write the key
    write_agent(ws, server, ["write_file", "edit_file", "shell_exec", "read_file"],
                ALL_SAFE + f'  grants: [{{tools: ["*"], paths: ["{audit_home}"]}}]\n')
    (ws / ".clawkit").mkdir()
    os.symlink(".clawkit/state.db", ws / "innocent.txt")
    script = calls(*[(tool, json.loads(json.dumps(args).replace("{audit}", str(audit_home)))) for _, tool, args in ATTACKS],
                   ids=[i for i, _, _ in ATTACKS])
    run = run_cli(ws, server, audit_home, "tidy up", script, "done")
    assert run.proc.returncode == 0, run.proc.stderr
    return run


@pytest.mark.parametrize("call_id", [a[0] for a in ATTACKS])
def test_tools_never_write_state_config_or_key(attacked, call_id, audit_home):
    seen = attacked.tool_results()[call_id]
    assert "Error:" in seen and "never" in seen, seen
    assert (attacked.ws / ".clawkit" / "state.db").stat().st_size > 0
    assert "name: target" in (attacked.ws / "agent.yaml").read_text()
    assert (audit_home / "key").exists() and not (attacked.ws / ".clawkit" / "evil.db").exists()
    kinds = {r["kind"] for r in attacked.recorded(call_id)}
    assert {"decision", "execution"} <= kinds  # the ledger recorded the attempt and its (refused) outcome


def test_clean_run_verifies(attacked):
    out = clawkit(attacked.ws, attacked.env, "audit", "verify")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK" in out.stdout


def _tamper_copy(run, tmp_path: Path) -> Path:
    ws = tmp_path / "copy"
    shutil.copytree(run.ws, ws, symlinks=True)
    return ws


def _empty(db: Path) -> None:
    db.write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def _delete(db: Path) -> None:
    db.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def _sql(*statements: str):
    def apply(db: Path) -> None:
        conn = sqlite3.connect(db)
        for s in statements:
            conn.execute(s)
        conn.commit()
        conn.close()
    return apply


def _rewrite_chain(db: Path) -> None:
    """Recompute the whole chain consistently with a key the attacker made up (or none)."""
    import hmac

    from clawkit_policy.ledger import COLUMNS, GENESIS, _COMPACT

    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM policy_audit WHERE seq > 3")
    prev = GENESIS
    for row in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM policy_audit ORDER BY seq").fetchall():
        values = dict(zip(COLUMNS, row))
        values["prev_hash"] = prev
        payload = _COMPACT([values[c] for c in COLUMNS]).encode()
        prev = hmac.new(b"attacker-key-0123456789abcdef", payload, hashlib.sha256).hexdigest()
        conn.execute("UPDATE policy_audit SET prev_hash = ?, hash = ? WHERE seq = ?", (values["prev_hash"], prev, values["seq"]))
    conn.execute("UPDATE policy_audit_head SET seq = 3, hash = ?", (prev,))
    conn.commit()
    conn.close()


def _unrecorded_call(db: Path) -> None:
    conn = sqlite3.connect(db)
    sid = conn.execute("SELECT id FROM sessions LIMIT 1").fetchone()[0]
    data = json.dumps({"tool_result": {"call_id": "call_ghost", "name": "shell_exec", "content": "exit code 0"}})
    conn.execute("INSERT INTO messages (session_id, role, content, data, created) VALUES (?, 'tool', 'exit code 0', ?, ?)", (sid, data, time.time()))
    conn.commit()
    conn.close()


TAMPERING = [
    ("emptied", _empty, "was emptied"),
    ("deleted", _delete, "was deleted"),
    ("dropped", _sql("DROP TABLE policy_audit"), "audit table was dropped"),
    ("truncated", _sql("DELETE FROM policy_audit WHERE seq > 5",
                       "UPDATE policy_audit_head SET seq = 5, hash = (SELECT hash FROM policy_audit WHERE seq = 5)"),
     "was truncated"),
    ("rewritten", _rewrite_chain, "rewritten without the audit key"),
    ("edited", _sql("UPDATE policy_audit SET reason = 'nothing to see' WHERE seq = 2"), "was edited"),
    ("unrecorded", _unrecorded_call, "has no audit record"),
]


@pytest.mark.parametrize("name,tamper,message", TAMPERING, ids=[t[0] for t in TAMPERING])
def test_verify_detects_tampering(attacked, tmp_path, audit_home, name, tamper, message):
    ws = _tamper_copy(attacked, tmp_path)
    # the copy is a different database file: give it the original's anchor
    from clawkit_policy import anchor

    os.environ["CLAWKIT_AUDIT_HOME"], old = str(audit_home), os.environ.get("CLAWKIT_AUDIT_HOME")
    try:
        anchor.forget_keys()
        src = anchor.read_anchor(anchor.load_key(create=False), str(attacked.ws / ".clawkit" / "state.db"))
        assert src and src["valid"]
        anchor.write_anchor(anchor.load_key(create=False), os.path.realpath(ws / ".clawkit" / "state.db"), src["seq"], src["head"])
    finally:
        os.environ["CLAWKIT_AUDIT_HOME"] = old or ""
        anchor.forget_keys()
    tamper(ws / ".clawkit" / "state.db")
    out = clawkit(ws, attacked.env, "audit", "verify")
    assert out.returncode == 1, out.stdout + out.stderr
    assert message in out.stderr, out.stderr
    assert "empty (no records yet)" not in out.stdout


def test_missing_key_fails_verification(attacked, tmp_path):
    env = {**attacked.env, "CLAWKIT_AUDIT_HOME": str(tmp_path / "elsewhere")}
    out = clawkit(attacked.ws, env, "audit", "verify")
    assert out.returncode == 1 and "audit key" in out.stderr


def test_ledger_failure_withholds_redacted_result_and_blocks(tmp_path, server, audit_home):
    """The anchors cannot be written (a file where the directory should be): the ledger fails.
    The secret read is neither shown raw nor shown at all, and the next call is blocked."""
    home = tmp_path / "broken-home"
    home.mkdir()
    (home / "key").write_bytes(os.urandom(32))  # its own key: the shared home may have none yet on this worker
    (home / "key").chmod(0o600)
    (home / "anchors").write_text("not a directory")
    ws = tmp_path / "ws"
    write_agent(ws, server, ["read_file", "shell_exec"], ALL_SAFE)
    (ws / "notes.txt").write_text("token: ghp_" + "A1b2C3d4" * 5 + "\n")
    run = run_cli(ws, server, home, "read my notes",
                  calls(("read_file", {"path": "notes.txt"}), ids=["read1"]),
                  calls(("shell_exec", {"command": "echo hi > ran.txt"}), ids=["sh1"]), "ok",
                  env={"CLAWKIT_AUDIT_HOME": str(home)})
    assert run.proc.returncode in (0, 1), run.proc.stderr
    assert "ghp_" not in run.model_saw()
    seen = run.tool_results()
    assert "withheld" in seen["read1"]
    assert not (ws / "ran.txt").exists()
    assert "sh1" not in seen or seen["sh1"].startswith("Error:")
