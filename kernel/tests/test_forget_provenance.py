"""Forgetting a conversation another one recalled (s10): the other session stays untrusted — the taint
is what keeps its gates closed — but its provenance record no longer names the deleted session, its
files or its sub-agents (they were the deleted conversation's content)."""

from __future__ import annotations

import json

from clawkit.forget import FORGOTTEN_DETAIL, forget, scrub_sources
from clawkit.sessions import SessionStore
from clawkit.types import Message


def test_a_recall_of_a_deleted_session_keeps_its_taint_without_naming_it(tmp_path):
    store = SessionStore(tmp_path / "state.db")
    try:
        a = store.create("lead")
        store.append(a, Message(role="user", content="read notes-secretword.txt"), None)
        b = store.create("lead")
        own = {"source": "tool", "detail": "web_fetch https://example.org", "kind": "tool"}
        recalled = {"source": "memory", "kind": "memory",
                    "detail": f"recalled: episode session:{a} of a past session that held untrusted content "
                              "(file notes-secretword.txt)"}
        store.save_metadata(b, {"untrusted": {"count": 2, "sources": [own, recalled]}, "other": 1})
        store.flush()
        report = forget(store, [a])
        assert report.ok and report.counts["provenance_rewritten"] == 1
        meta = store.load_metadata(b)
        assert meta["other"] == 1 and meta["untrusted"]["count"] == 2
        assert meta["untrusted"]["sources"] == [own, {**recalled, "detail": FORGOTTEN_DETAIL}]
        raw = store.conn.execute("SELECT metadata FROM sessions WHERE id = ?", (b,)).fetchone()[0]
        assert "secretword" not in raw and a not in raw
    finally:
        store.close()


def test_scrub_sources_merges_what_became_identical():
    ids = ["ses_1", "ses_2"]
    sources = [{"source": "memory", "detail": "recalled session:ses_1", "kind": "memory"},
               {"source": "memory", "detail": "recalled session:ses_2 (file x)", "kind": "memory"},
               {"source": "tool", "detail": "read_file y", "kind": "tool"}]
    out, changed = scrub_sources(sources, ids)
    assert changed and out == [{"source": "memory", "detail": FORGOTTEN_DETAIL, "kind": "memory"}, sources[2]]
    assert scrub_sources(sources[2:], ids) == (sources[2:], False)
    assert scrub_sources("not a list", ids) == ("not a list", False)
    json.dumps(out)
