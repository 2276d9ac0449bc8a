"""Memory off the reply path: a repeated question with nothing new is answered on the event
loop (no worker, no search), finished turns wait for a quiet moment (bounded) and are
written in one transaction per batch, and closing indexes what still waits."""

from __future__ import annotations

import time

import pytest

import clawkit_memory
from clawkit.sessions import SessionStore
from clawkit.types import Message
from clawkit_memory import db as mdb, service
from clawkit_memory.service import close_all, memory_for

TOOLS = ["memory_search", "memory_get", "memory_save"]


@pytest.fixture(autouse=True)
def _close_services():
    yield
    close_all()
    clawkit_memory._ACTIVE.clear()


def _indexed(workspace, sid: str) -> bool:
    # memory's own SQLite build (pysqlite3): two SQLite libraries in one process do not see each
    # other's locks on a WAL database
    conn = mdb.sqlite.connect(str(workspace / ".clawkit" / "memory.db"))
    try:
        return conn.execute("SELECT 1 FROM memory_sources WHERE path = ?", (f"session:{sid}",)).fetchone() is not None
    finally:
        conn.close()


def _until(cond, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_repeated_question_in_a_new_session_is_answered_without_a_search(make_agent, workspace, monkeypatch, spy):
    monkeypatch.setattr(service, "EPISODE_DELAY", 60.0)  # nothing new gets indexed between the turns below
    monkeypatch.setattr(service, "MAX_DEFER", 60.0)
    agent = make_agent(script=["Noted: the release train leaves on Thursdays.", "Thursdays.", "Thursdays.",
                               "Thursdays."], plugins=(clawkit_memory, spy), tools=TOOLS)
    first = agent.run("Our release train leaves on Thursdays.")
    mem = memory_for(agent.config)
    mem.wait_idle()
    assert _indexed(workspace, first.session_id)
    question = "when does the release train leave?"
    agent.run(question)  # a new session: embeds the query and searches
    submitted = []
    original = mem.executor.submit
    monkeypatch.setattr(mem.executor, "submit", lambda *a, **k: submitted.append(a) or original(*a, **k))
    agent.run(question)  # another new session, same question, nothing new in memory
    searched, cached = spy.states[1], spy.states[2]
    assert "cached" not in searched["timings"] and searched["hits"]
    assert cached["timings"].get("cached") == 1.0 and submitted == []  # answered on the event loop
    assert [h.id for h in cached["hits"]] == [h.id for h in searched["hits"]]
    assert cached["hits"][0].session_id == first.session_id and "Thursdays" in cached["hits"][0].text
    agent.run(question, session_id=first.session_id)  # a session is never reminded of its own turns
    assert all(h.session_id != first.session_id for h in spy.states[3]["hits"])


def test_finished_turns_wait_for_a_quiet_moment(make_agent, workspace, monkeypatch):
    monkeypatch.setattr(service, "EPISODE_DELAY", 0.05)
    (workspace / "MEMORY.md").write_text("# Pets\n\nThe user's dog is called Pixel.\n")
    agent = make_agent(script=["Pixel.", "Noted: the wiki moves to Hetzner.", "ok"], plugins=(clawkit_memory,),
                       tools=TOOLS)
    agent.run("what is my dog called?")  # the process's first turn catches up on earlier sessions
    mem = memory_for(agent.config)
    mem.wait_idle()
    clawkit_memory._ACTIVE["another-session"] = time.monotonic()  # a reply in the making elsewhere in the process
    r = agent.run("We decided to host the wiki on Hetzner.")
    time.sleep(0.4)  # several quiet-moment checks come and go
    assert not _indexed(workspace, r.session_id) and mem._episodes_running
    clawkit_memory._ACTIVE.pop("another-session")
    assert _until(lambda: _indexed(workspace, r.session_id))
    # a process that is never quiet still indexes, MAX_DEFER seconds after the turn ended
    monkeypatch.setattr(service, "MAX_DEFER", 0.3)
    clawkit_memory._ACTIVE["another-session"] = time.monotonic()
    second = agent.run("Lunch is at noon from now on.")
    assert _until(lambda: _indexed(workspace, second.session_id), 10.0)


def test_episodes_of_a_batch_are_written_in_one_transaction(tmp_path):
    from clawkit_memory.embeddings import LocalStatic
    from clawkit_memory.index import MemoryIndex

    store = SessionStore(tmp_path / "state.db")
    for i in range(10):
        sid = store.create("a")
        store.append(sid, Message(role="user", content=f"question {i} about topic {i}"))
        store.append(sid, Message(role="assistant", content=f"answer {i}"))
    ws = tmp_path / "ws"
    ws.mkdir()
    index = MemoryIndex(tmp_path / "memory.db", LocalStatic(), workspace=ws)
    calls = []
    embed = index.provider.embed
    index.provider.embed = lambda texts: calls.append(len(texts)) or embed(texts)
    try:
        index._ensure_vectors()
        before = index.generation
        report = index.sync_sessions(store.path, "a", "a")
        assert report.files == 10 and report.chunks == 10
        assert index.generation == before + 1  # one write transaction for the ten sessions
        assert calls == [10]  # one embedding batch
    finally:
        index.close()
        store.close()


def test_closing_indexes_the_turns_still_waiting(make_agent, workspace, monkeypatch):
    monkeypatch.setattr(service, "EPISODE_DELAY", 60.0)
    monkeypatch.setattr(service, "MAX_DEFER", 60.0)
    (workspace / "MEMORY.md").write_text("# Pets\n\nThe user's dog is called Pixel.\n")
    agent = make_agent(script=["Pixel.", "Noted."], plugins=(clawkit_memory,), tools=TOOLS)
    agent.run("what is my dog called?")  # the recall loads the embedding model
    r = agent.run("Our office moves to Porto in May.")
    mem = memory_for(agent.config)
    assert mem.index.provider.loaded and not _indexed(workspace, r.session_id)
    agent.close()  # the agent's memory service closes: the waiting turn is indexed first (bounded)
    assert _indexed(workspace, r.session_id) and not mem.executor._thread.is_alive()


def test_episodes_off_and_nothing_in_memory_stays_idle(make_agent, workspace, monkeypatch):
    """Nothing to recall and nothing that will ever be indexed: no index is built, no timer runs."""
    monkeypatch.setattr("clawkit_memory.config.EPISODE_DELAY", 0.01)
    agent = make_agent(script=["a", "b"], plugins=(clawkit_memory,), tools=TOOLS,
                       plugin_config={"memory": {"sessions": False}})
    agent.run("hi")
    agent.run("hello")
    time.sleep(0.2)  # (an idle turn's indexing timer would have fired by now)
    # (this agent's turns: another test's hand-built turn context, with no turn.end, may leave its own entry)
    assert not [v for v in clawkit_memory._IDLE_ENDING.values() if v[0] is agent.config]
    assert not clawkit_memory.service_loaded(agent.config)
    assert not (workspace / ".clawkit" / "memory.db").exists()
