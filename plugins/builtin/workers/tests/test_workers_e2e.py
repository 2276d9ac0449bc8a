"""Turns on a real PostgreSQL queue, run by real ``clawkit worker`` processes (DBOS workflows)."""

from __future__ import annotations

import collections
import os
import signal
import time

import pytest

from clawkit_workers.testing import Workers, agent_yaml

pytestmark = pytest.mark.e2e

SESSIONS = int(os.environ.get("CLAWKIT_E2E_SESSIONS", "200"))


def _lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _first_calls(model, sessions: dict[str, str]) -> int:
    """Model calls that opened one of these sessions' turns (no tool result yet)."""
    tokens = set(sessions.values())
    return sum(1 for r in list(model.server.requests)
               if r.messages and r.messages[-1]["role"] == "user" and r.messages[-1]["content"].split()[-1] in tokens)


def _check_transcripts(store_path, sessions: dict[str, str]) -> None:
    from clawkit.sessions import SessionStore

    store = SessionStore(store_path)
    try:
        for sid, token in sessions.items():
            roles = [m.role for m in store.messages(sid)]
            assert roles == ["user", "assistant", "tool", "assistant"], (sid, roles)
            msgs = store.messages(sid)
            assert token in msgs[0].content and msgs[-1].content == f"appended {token}"
            assert msgs[2].tool_result is not None and f"ok {token}" in msgs[2].content
    finally:
        store.close()


def test_two_hundred_sessions_on_three_workers_each_effect_once(pg_url, append_model, tmp_path):
    from clawkit.runtime import open_turn_queue

    yaml = agent_yaml(tmp_path, append_model.server.url)
    workers = Workers(pg_url, [yaml])
    try:
        workers.start(3)
        with open_turn_queue(pg_url) as q:
            sessions = {f"ses_many{i:03d}": f"t{i:03d}" for i in range(SESSIONS)}
            turns = {sid: q.submit("appender", f"please append token {tok}", session_id=sid) for sid, tok in sessions.items()}
            results = {sid: q.result(t, timeout=240) for sid, t in turns.items()}
            ran_on = {q.status(t)["executor"] for t in turns.values()}
            retried = {sid: q.submit("appender", "again", session_id=sid, turn_id=turns[sid]) for sid in list(turns)[:5]}
            assert all(retried[sid] == turns[sid] and q.result(t, timeout=30) == results[sid] for sid, t in retried.items())
    finally:
        workers.stop_all()
    assert all(r["reply"] == f"appended {sessions[sid]}" for sid, r in results.items())
    assert len(ran_on) == 3, ran_on  # the queue spread the turns over every worker
    effects = _lines(tmp_path / "ws" / "effects.log")
    attempts = _lines(tmp_path / "ws" / "attempts.log")
    assert sorted(line.split()[1] for line in effects) == sorted(sessions.values())  # each effect exactly once
    assert len(attempts) == SESSIONS  # and each tool step ran once
    _check_transcripts(pg_url, sessions)
    _audit_verifies_then_detects_an_edit(pg_url)


def _audit_verifies_then_detects_an_edit(url: str) -> None:
    """Three workers extended one audit chain in PostgreSQL: it verifies; an edited row is found."""
    import subprocess
    import sys

    import psycopg

    def verify():
        return subprocess.run([sys.executable, "-m", "clawkit", "audit", "verify", "--db", url], capture_output=True, text=True,
                              timeout=120)

    ok = verify()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        n = conn.execute("SELECT count(*) FROM policy_audit WHERE tool = 'shell_exec'").fetchone()[0]
        assert n >= SESSIONS  # every worker's tool executions are in the one chain
        conn.execute("UPDATE policy_audit SET reason = 'edited' WHERE seq = (SELECT min(seq) + 7 FROM policy_audit)")
    bad = verify()
    assert bad.returncode != 0 and "record 8" in bad.stderr and "edited" in bad.stderr, bad.stdout + bad.stderr


def test_kill_9_mid_turn_another_worker_finishes_without_rerunning_steps(pg_url, append_model, tmp_path):
    import threading

    from clawkit.runtime import open_turn_queue

    yaml = agent_yaml(tmp_path, append_model.server.url)
    workers = Workers(pg_url, [yaml])
    n = 12
    try:
        procs = workers.start(3)
        with open_turn_queue(pg_url) as q:
            append_model.hold, append_model.hold_first = 3.0, threading.Event()
            # odd ones are still inside their tool (a 3 s command) when the worker dies, even ones wait on the model
            sessions = {f"ses_kill{i:02d}": f"{'z' if i % 2 else 'k'}{i:02d}" for i in range(n)}
            turns = {sid: q.submit("appender", f"please append token {tok}", session_id=sid) for sid, tok in sessions.items()}
            assert append_model.hold_first.wait(60)
            deadline = time.monotonic() + 30
            while _first_calls(append_model, sessions) < n and time.monotonic() < deadline:
                time.sleep(0.05)
            deadline = time.monotonic() + 30
            while len(_lines(tmp_path / "ws" / "attempts.log")) < n and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # k…: tool step done, waiting on the model; z…: inside the sleeping command
            before = {t: q.status(t) for t in turns.values()}
            assert {s["status"] for s in before.values()} == {"PENDING"}, before
            by_worker = collections.Counter(s["executor"] for s in before.values())
            victim_id = by_worker.most_common(1)[0][0]
            interrupted = [t for t, s in before.items() if s["executor"] == victim_id]
            victim = next(p for p in procs if p.pid == int(victim_id.split("-")[-2]))
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
            append_model.hold = 0.0
            results = {sid: q.result(t, timeout=120) for sid, t in turns.items()}
            finished_on = {t: q.status(t)["executor"] for t in interrupted}
    finally:
        append_model.hold = 0.0
        workers.stop_all()
    assert all(r["reply"] == f"appended {sessions[sid]}" for sid, r in results.items())
    assert interrupted and victim_id not in finished_on.values()  # every interrupted turn finished on another worker
    assert _first_calls(append_model, sessions) == n  # the first model call of each turn was replayed, not repeated
    attempts = collections.Counter(_lines(tmp_path / "ws" / "attempts.log"))
    effects = _lines(tmp_path / "ws" / "effects.log")
    token_of_turn = {turns[sid]: tok for sid, tok in sessions.items()}
    cut = {token_of_turn[t] for t in interrupted if token_of_turn[t].startswith("z")}
    assert cut, "no tool step was interrupted: the kill came too late"
    for line, count in attempts.items():
        key, token = line.split()
        # a finished step never ran again; an interrupted one ran again once, with the same key
        assert count == (2 if token in cut else 1), (line, count)
    assert len(attempts) == n  # one key per tool step, whatever the attempts
    assert sorted(line.split()[1] for line in effects) == sorted(sessions.values())  # each effect exactly once
    _check_transcripts(pg_url, sessions)


def test_an_approval_waits_while_every_worker_restarts_then_the_turn_finishes(pg_url, append_model, tmp_path):
    """Two calls in one response both need approval: one is answered before every worker restarts
    (its tool runs once and is replayed from the record), the other after (it waits on the same row)."""
    import re
    import subprocess
    import sys

    from clawkit.runtime import open_turn_queue

    def clawkit(*args):
        return subprocess.run([sys.executable, "-m", "clawkit", *args, "--db", pg_url], capture_output=True, text=True, timeout=60)

    yaml = agent_yaml(tmp_path, append_model.server.url, approve_shell=True)  # shell_exec is unsafe: asks a person
    workers = Workers(pg_url, [yaml])
    try:
        first = workers.start(1, "--shutdown-timeout", "1")
        with open_turn_queue(pg_url) as q:
            turn = q.submit("appender", "please append token p1", session_id="ses_approve")
            deadline = time.monotonic() + 60
            while len(pending := q.approvals()) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(pending) == 2 and {p["session_id"] for p in pending} == {"ses_approve"}, pending
            by_token = {re.search(r'KEY (p1[ab])"', p["arguments"]["command"]).group(1): p for p in pending}
            early, late = by_token["p1a"], by_token["p1b"]
            answered = clawkit("approvals", "approve", early["id"], "--by", "ops")
            assert answered.returncode == 0 and "approved" in answered.stdout, answered.stderr
            deadline = time.monotonic() + 30
            while not any(line.endswith(" p1a") for line in _lines(tmp_path / "ws" / "effects.log")):
                assert time.monotonic() < deadline, "the approved call did not run"
                time.sleep(0.1)
            for p in first:  # every worker goes away while the turn waits for the other answer
                assert workers.stop(p) == 0
            assert q.status(turn)["status"] == "PENDING"
            workers.start(1, "--shutdown-timeout", "1")
            listed = clawkit("approvals", "list")
            assert listed.returncode == 0 and late["id"] in listed.stdout and early["id"] not in listed.stdout
            answered = clawkit("approvals", "approve", late["id"], "--by", "ops")
            assert answered.returncode == 0, answered.stderr
            result = q.result(turn, timeout=90)
            again = clawkit("approvals", "deny", late["id"])
            assert again.returncode == 1 and "already approved" in again.stderr
    finally:
        workers.stop_all()
    assert result["reply"] == "appended p1"
    assert sorted(line.split()[1] for line in _lines(tmp_path / "ws" / "effects.log")) == ["p1a", "p1b"]
    assert len(_lines(tmp_path / "ws" / "attempts.log")) == 2  # the call answered early was not run again
