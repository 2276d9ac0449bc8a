"""Memory's cost per turn: episode indexing off the turn's path (watermark, one connection,
bounded steps), no embedding when memory is empty, recall timings, freshness kept."""

from __future__ import annotations

import threading
import time

import pytest

import clawkit_memory
from clawkit.sessions import SessionStore
from clawkit.types import Message
from clawkit_memory.index import EPISODE_BATCH
from clawkit_memory.service import close_all, memory_for

TOOLS = ["memory_search", "memory_get", "memory_save"]


@pytest.fixture(autouse=True)
def _close_services():
    yield
    close_all()


def _turns(store: SessionStore, agent: str, texts: list[tuple[str, str]], session_id: str | None = None) -> str:
    sid = session_id or store.create(agent)
    for question, answer in texts:
        store.append(sid, Message(role="user", content=question))
        store.append(sid, Message(role="assistant", content=answer))
    return sid


def test_empty_memory_starts_no_recall_and_embeds_nothing(make_agent, workspace, spy):
    agent = make_agent(script=["hi", "hello again"], plugins=(clawkit_memory, spy), tools=TOOLS,
                       plugin_config={"memory": {"sessions": False}})
    agent.run("hello, what do you remember about me?")
    agent.run("anything at all?")
    assert spy.states == [None, None]  # no retrieval started: the contributor stays out of the prompt
    mem = memory_for(agent.config)
    assert mem.index.counters["embedded"] == 0 and not mem.index._query_cache
    assert not hasattr(mem.index._provider, "embed")  # the embedding model was never even loaded
    # a memory file appearing later is found by the next turn (no restart)
    (workspace / "MEMORY.md").write_text("# User\n\nThe user's name is Ada and she prefers tea over coffee.\n")
    agent.provider.script.append("ok")
    agent.run("what does the user prefer to drink?")
    assert spy.states[-1] is not None and any("tea" in h.text for h in spy.states[-1]["hits"])


def test_recall_reports_embedding_and_search_time_separately(make_agent, workspace, spy):
    (workspace / "MEMORY.md").write_text("# Pets\n\nThe user's cat is called Miso.\n")
    agent = make_agent(script=["ok", "ok"], plugins=(clawkit_memory, spy), tools=TOOLS)
    memory_for(agent.config, agent.hooks).refresh(force=True)
    agent.run("what is my cat called?")
    agent.run("what is my cat called?")  # same query: the embedding comes from the cache
    first, second = (s["timings"] for s in spy.states)
    assert first["embed_ms"] > 0 and first["search_ms"] > 0 and "refresh_ms" in first
    assert second["embed_ms"] < first["embed_ms"]
    assert spy.states[0]["hits"] and spy.states[0]["waited_ms"] >= first["embed_ms"]


def test_episodes_are_indexed_after_the_turn_and_recalled_in_a_later_session(make_agent, workspace, spy):
    agent = make_agent(script=["Noted: the release train leaves on Thursdays.", "ok"], plugins=(clawkit_memory, spy),
                       tools=TOOLS)
    first = agent.run("Last week we decided that releases ship every Thursday.")
    mem = memory_for(agent.config)
    mem.wait_idle()
    agent.run("what did we decide last week about releases?")  # a new session
    hits = spy.states[1]["hits"]
    assert hits and hits[0].path == f"session:{first.session_id}" and "Thursday" in hits[0].text


def test_episode_sync_reads_only_what_is_new(tmp_path):
    """The watermark: a run after N sessions touches only the sessions with new messages."""
    store = SessionStore(tmp_path / "state.db")
    sids = [_turns(store, "a", [(f"question {i} about topic {i}", f"answer {i}")]) for i in range(EPISODE_BATCH + 6)]
    ws = tmp_path / "ws"
    ws.mkdir()
    from clawkit_memory.index import MemoryIndex
    from clawkit_memory.embeddings import LocalStatic

    index = MemoryIndex(tmp_path / "memory.db", LocalStatic(), workspace=ws)
    statements: list[str] = []
    try:
        bounded = index.sync_sessions(store.path, "a", "a", max_sessions=EPISODE_BATCH)
        assert bounded.files == EPISODE_BATCH and bounded.more  # a bounded step leaves the rest
        rest = index.sync_sessions(store.path, "a", "a")
        assert rest.files == 6 and not rest.more
        conn = index._state_conn(store.path)
        conn.set_trace_callback(statements.append)
        assert index.sync_sessions(store.path, "a", "a").files == 0
        assert not any("GROUP BY" in s for s in statements)  # nothing new: no scan of the history at all
        _turns(store, "a", [("and one more thing about topic 3", "noted")], session_id=sids[3])
        _turns(store, "b", [("another agent's chat", "fine")])
        statements.clear()
        again = index.sync_sessions(store.path, "a", "a")
        assert again.files == 1 and again.paths == [f"session:{sids[3]}"] and again.unchanged == 0
        assert sum("FROM messages WHERE session_id" in s for s in statements) == 1  # one session re-read
        assert index._state_conn(store.path) is conn  # one connection, kept open
        n = index.conn.execute("SELECT COUNT(*) FROM memory_chunks WHERE path = ?", (f"session:{sids[3]}",)).fetchone()[0]
        assert n == 2
    finally:
        index.close()
        store.close()


def test_a_new_state_db_starts_over(tmp_path):
    """Message ids restart in a new session database: the old watermark must not hide them."""
    from clawkit_memory.embeddings import LocalStatic
    from clawkit_memory.index import MemoryIndex

    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(tmp_path / "memory.db", LocalStatic(), workspace=ws)
    try:
        store = SessionStore(tmp_path / "state.db")
        for i in range(3):
            _turns(store, "a", [(f"old question {i}", "old answer")])
        assert index.sync_sessions(store.path, "a", "a").files == 3
        store.close()
        for f in tmp_path.glob("state.db*"):
            f.unlink()
        store = SessionStore(tmp_path / "state.db")
        sid = _turns(store, "a", [("a brand new question about kayaks", "kayaks it is")])
        report = index.sync_sessions(store.path, "a", "a")
        assert report.paths == [f"session:{sid}"]
        store.close()
    finally:
        index.close()


def test_forgotten_session_stays_forgotten_when_it_grows(make_agent, workspace):
    agent = make_agent(script=["Noted, the door code is 4711.", "Noted, lunch is at noon."], plugins=(clawkit_memory,),
                       tools=TOOLS)
    r = agent.run("The office door code is 4711.")
    mem = memory_for(agent.config)
    mem.wait_idle()
    key = f"session:{r.session_id}"
    assert mem.index.forget(mem.partition, path=key) == 1
    time.sleep(0.01)  # the next turn is strictly newer than the forget
    agent.run("Lunch is at noon from now on.", session_id=r.session_id)
    mem.wait_idle()
    texts = [t for (t,) in mem.index.conn.execute("SELECT text FROM memory_chunks WHERE path = ?", (key,))]
    assert len(texts) == 1 and "noon" in texts[0] and "4711" not in texts[0]


def test_memory_file_edit_changes_the_next_recall(make_agent, workspace, spy):
    (workspace / "MEMORY.md").write_text("# Editor\n\nThe user's favourite editor is Helix.\n")
    agent = make_agent(script=["ok", "ok"], plugins=(clawkit_memory, spy), tools=TOOLS,
                       plugin_config={"memory": {"watch": False}})
    agent.run("which text editor does the user like?")
    (workspace / "MEMORY.md").write_text("# Editor\n\nThe user's favourite editor is now Zed, not Helix.\n")
    agent.run("which text editor does the user like?")
    before, after = ([h.text for h in st["hits"] if h.path == "MEMORY.md"] for st in spy.states)
    assert before and "Helix" in before[0] and "Zed" not in before[0]
    assert after and "Zed" in after[0]


def test_worker_runs_recalls_before_background_indexing():
    from clawkit_memory.worker import MemoryWorker

    w = MemoryWorker("test-memory")
    order: list[str] = []
    gate = threading.Event()
    try:
        w.submit(gate.wait, 5)  # hold the thread while the queue fills
        bg = w.later(0.0, order.append, "index")
        fg = [w.submit(order.append, f"recall{i}") for i in range(2)]
        late = w.later(30.0, order.append, "much later")
        gate.set()
        bg.result(timeout=5)
        assert [f.result(timeout=5) for f in fg] == [None, None]
        assert order == ["recall0", "recall1", "index"]  # urgent work first, background in the gaps
        assert not late.done()
        w.flush(timeout=5)  # due now: runs before flush returns
        assert order[-1] == "much later"
        pending = w.later(30.0, order.append, "never")
    finally:
        w.shutdown()
    assert pending.cancelled()
    with pytest.raises(RuntimeError):
        w.submit(order.append, "after shutdown")


def test_a_new_process_recalls_the_last_processes_session_on_its_first_turn(make_agent, workspace, spy):
    """One-shot use (a process per message): the turn-end indexing may never run before
    exit, so the next process catches up before its first recall."""
    a = make_agent(script=["Noted: we go with Hetzner."], plugins=(clawkit_memory,), tools=TOOLS)
    first = a.run("Last week we decided to host the wiki on Hetzner.")
    mem = memory_for(a.config)
    mem.executor.shutdown()  # the process exits: queued background indexing is lost
    close_all()
    b = make_agent(script=["ok"], plugins=(clawkit_memory, spy), tools=TOOLS)
    b.run("where did we decide to host the wiki last week?")
    hits = spy.states[0]["hits"]
    assert hits and hits[0].path == f"session:{first.session_id}" and "Hetzner" in hits[0].text


def test_idle_memory_loads_no_index_and_indexes_the_first_turn_later(make_agent, workspace, monkeypatch):
    """Nothing in memory, nothing to catch up on: the first turn opens no memory database (so
    neither numpy, sqlite-vec nor the embedding runtime is needed); the finished turn is
    indexed off the reply path shortly after, and the next turn takes the full path."""
    monkeypatch.setattr("clawkit_memory.config.EPISODE_DELAY", 0.05)
    agent = make_agent(script=["Noted: your cat is called Miso.", "Miso."], plugins=(clawkit_memory,), tools=TOOLS)
    db = workspace / ".clawkit" / "memory.db"
    agent.run("my cat is called Miso")
    assert not db.exists() and not clawkit_memory.service_loaded(agent.config)
    deadline = time.monotonic() + 30
    while not clawkit_memory.service_loaded(agent.config) and time.monotonic() < deadline:
        time.sleep(0.02)
    mem = memory_for(agent.config)
    mem.wait_idle(timeout=30)
    assert db.exists() and mem.maybe_has_memory()
    hits = mem.search("cat name", k=3, mode="keyword")
    assert any("Miso" in h.text for h in hits)
    agent.run("what is my cat called?")  # memory is no longer idle: the full path, recall included
    assert clawkit_memory.service_loaded(agent.config)


def test_identical_recall_with_nothing_new_skips_the_search(make_agent, workspace, monkeypatch):
    (workspace / "MEMORY.md").write_text("# Pets\n\nThe user's dog is called Pixel.\n")
    agent = make_agent(script=[], plugins=(clawkit_memory,), tools=TOOLS, plugin_config={"memory": {"watch": False}})
    mem = memory_for(agent.config)
    first: dict = {}
    hits = mem.recall("what is the dog called?", timings=first)
    searches = []
    original = mem.searcher.search
    monkeypatch.setattr(mem.searcher, "search", lambda *a, **k: searches.append(a) or original(*a, **k))
    again: dict = {}
    assert [h.text for h in mem.recall("what is the dog called?", timings=again)] == [h.text for h in hits]
    assert again.get("cached") == 1.0 and searches == [] and "Pixel" in hits[0].text
    mem.recall("and the cat?")  # another query searches
    assert len(searches) == 1
    (workspace / "MEMORY.md").write_text("# Pets\n\nThe user's dog is now called Byte.\n")
    mem.refresh(force=True)
    fresh: dict = {}
    changed = mem.recall("what is the dog called?", timings=fresh)
    assert "cached" not in fresh and len(searches) == 2 and "Byte" in changed[0].text
