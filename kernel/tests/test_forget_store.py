"""Deleting sessions: the store's rows, sub-agent sessions, transcripts, blobs, the forget_sessions
hook (a failing plugin keeps the kernel's rows and is reported), unknown and busy sessions."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from clawkit.forget import BusySessions, UnknownSessions, forget, older_than, parse_duration
from clawkit.hooks import HookRunner
from clawkit.hookspecs import hookimpl
from clawkit.plugins import get_plugin_manager
from clawkit.sessions import SessionStore
from clawkit.transcript import Transcript
from clawkit.types import ContentBlock, Message

SHA = "ab" * 32


def _session(store, agent="a", text="hello", run=None, parent_run=None, sha=None):
    sid = store.create(agent)
    run = run or f"run_{sid}"
    store.run_start({"id": run, "trace_id": "t", "session_id": sid, "agent": agent, "parent_run_id": parent_run,
                     "started": time.time(), "data": {}})
    blocks = [ContentBlock(type="image", media_type="image/png", sha256=sha)] if sha else []
    store.append(sid, Message(role="user", content=text, blocks=blocks), run)
    store.event(sid, run, "turn.end", {"text": text}, time.time())
    store.step(run, "s1", "tool", "read_file", time.time(), time.time(), "ok", {"text": text})
    store.flush()
    return sid, run


class Keeper:
    def __init__(self, fail=False):
        self.seen, self.fail = [], fail

    @hookimpl
    def forget_sessions(self, store, session_ids, config):
        self.seen.append(list(session_ids))
        if self.fail:
            raise RuntimeError("index offline")
        return {"things": len(session_ids)}


def _hooks(*plugins):
    pm = get_plugin_manager(load_entry_points=False)  # narrow: only the test's own plugins implement the hook under test
    for p in plugins:
        pm.register(p)
    return HookRunner(pm)


def _count(store, sql, *args):
    return store.conn.execute(sql, args).fetchone()[0]


def test_delete_removes_every_kernel_row_children_transcripts_and_unshared_blobs(tmp_path):
    store = SessionStore(tmp_path / ".clawkit" / "state.db")
    store.transcript = Transcript(tmp_path / ".clawkit" / "transcripts")
    a, run_a = _session(store, text="CANARY-A", sha=SHA)
    child, _ = _session(store, "child", text="CANARY-A child", parent_run=run_a)
    b, _ = _session(store, text="CANARY-B")
    blob = tmp_path / ".clawkit" / "attachments" / SHA[:2] / SHA
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"png")
    keeper = Keeper()
    report = forget(store, [a], hooks=_hooks(keeper))
    assert report.ok and report.sessions == [a, child] and keeper.seen == [[a, child]]
    assert report.counts["sessions"] == 2 and report.counts["messages"] == 2 and report.counts["steps"] == 2
    assert report.counts["transcripts"] == 2 and report.counts["attachments"] == 1
    assert [v for k, v in report.counts.items() if k.endswith(".things")] == [2]
    for table in ("sessions", "messages", "events", "runs", "steps"):
        dump = json.dumps(store.conn.execute(f"SELECT * FROM {table}").fetchall())
        assert "CANARY-A" not in dump and a not in dump
    assert "CANARY-B" in json.dumps(store.conn.execute("SELECT * FROM messages").fetchall())
    assert not blob.exists() and store.exists(b) and (tmp_path / ".clawkit" / "transcripts" / f"{b}.jsonl").exists()
    store.close()


def test_a_shared_blob_stays(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    a, _ = _session(store, sha=SHA)
    _session(store, sha=SHA)
    blob = tmp_path / "attachments" / SHA[:2] / SHA
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"png")
    forget(store, [a])
    assert blob.exists()
    store.close()


def test_unknown_and_busy_delete_nothing(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    a, _ = _session(store)
    with pytest.raises(UnknownSessions, match="nope"):
        forget(store, [a, "nope"])
    other = SessionStore(tmp_path / "state.db")
    assert other.try_lock(a)
    with pytest.raises(BusySessions, match=a):
        forget(store, [a])
    other.unlock(a)
    assert store.try_lock(a)  # this store's own turn: busy too
    with pytest.raises(BusySessions):
        forget(store, [a])
    store.unlock(a)
    assert store.exists(a)
    other.close()
    store.close()


def test_a_failing_plugin_is_reported_and_the_kernel_rows_are_kept(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    a, _ = _session(store)
    good, bad = Keeper(), Keeper(fail=True)
    report = forget(store, [a], hooks=_hooks(good, bad))
    assert not report.ok and report.kept and "index offline" in report.failures[0][1]
    assert good.seen and store.exists(a)  # the others still ran; the session can be deleted again
    store.close()


def test_prune_selects_old_top_level_sessions(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    old, run = _session(store)
    child, _ = _session(store, parent_run=run)
    new, _ = _session(store)
    store.conn.execute("UPDATE sessions SET updated = ? WHERE id IN (?, ?)", (time.time() - 3 * 86400, old, child))
    assert older_than(store, parse_duration("2d"), time.time()) == [old]
    assert parse_duration("12h") == 43200
    with pytest.raises(Exception, match="30x"):
        parse_duration("30x")
    store.close()


def test_cli_delete_unknown_is_exit_1(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    a, _ = _session(store)
    store.close()
    run = lambda *a: subprocess.run([sys.executable, "-m", "clawkit", "sessions", *a, "--db", str(tmp_path / "state.db")],
                                    capture_output=True, text=True)
    r = run("delete", a, "ses_nope")
    assert r.returncode == 1 and "ses_nope" in r.stderr
    r = run("delete", a, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["deleted"]["sessions"] == 1


def test_cli_refuses_a_busy_session(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    a, _ = _session(store)
    assert store.try_lock(a)  # a turn of this (other) process runs on it
    try:
        r = subprocess.run([sys.executable, "-m", "clawkit", "sessions", "delete", a, "--db", str(tmp_path / "state.db")],
                           capture_output=True, text=True)
        assert r.returncode == 1 and a in r.stderr and "busy" in r.stderr
        assert store.exists(a)
    finally:
        store.unlock(a)
        store.close()


def test_agent_delete_session_through_clawkit_agent(tmp_path):
    from clawkit import Agent
    from clawkit.config import validate_agent
    from clawkit.forget import ForgetFailed
    from clawkit.testing.scripted import ScriptedProvider

    keeper = Keeper()
    pm = get_plugin_manager(extra=[keeper], load_entry_points=False)  # narrow: only this test's plugin answers the hook
    cfg = validate_agent({"name": "deleter", "model": "m", "workspace": str(tmp_path)}, "<t>", {})
    with Agent(cfg, pm=pm, provider=ScriptedProvider(["ok CANARY", "again"])) as agent:
        sid = agent.run("hello CANARY").session_id
        report = agent.delete_session(sid)
        assert report.ok and report.counts["sessions"] == 1 and keeper.seen == [[sid]]
        assert not agent.store.exists(sid) and "CANARY" not in json.dumps(agent.store.conn.execute("SELECT * FROM messages").fetchall())
        with pytest.raises(UnknownSessions):
            agent.delete_session(sid)
        sid2 = agent.run("hi").session_id
        keeper.fail = True
        with pytest.raises(ForgetFailed, match="index offline"):
            agent.delete_session(sid2)
        assert agent.store.exists(sid2)


def test_an_async_implementation_is_awaited_inside_a_running_loop_too(tmp_path):
    import asyncio

    class AsyncKeeper:
        @hookimpl
        async def forget_sessions(self, session_ids):
            await asyncio.sleep(0)
            return {"rows": len(session_ids)}

    store = SessionStore(tmp_path / "state.db")
    a, _ = _session(store)
    b, _ = _session(store)

    async def inside() -> Any:
        return forget(store, [b], hooks=_hooks(AsyncKeeper()))

    assert [v for k, v in forget(store, [a], hooks=_hooks(AsyncKeeper())).counts.items() if k.endswith(".rows")] == [1]
    assert [v for k, v in asyncio.run(inside()).counts.items() if k.endswith(".rows")] == [1]
    store.close()
