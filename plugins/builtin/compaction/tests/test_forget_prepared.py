"""A summary prepared in the background (held in the serving process until the turn crossing the
threshold takes it) is dropped when its session is deleted (``forget_sessions``): it is the
conversation, summarised, and must not outlive ``sessions delete`` / ``DELETE /api/sessions/{id}``."""

from __future__ import annotations

from clawkit_compaction import background


def test_deleting_a_session_drops_its_prepared_summary(make_agent):
    agent = make_agent(["hello back", "bye"])  # every builtin loaded
    gone = agent.run("hello, remember PANGOLIN-44").session_id
    kept = agent.run("another conversation").session_id
    background._PREPARED[gone] = background._PREPARED[kept] = object()  # as a background summarizer leaves them
    try:
        report = agent.delete_session(gone)
        assert report.counts.get("compaction.prepared_summaries") == 1, report.counts
        assert gone not in background._PREPARED and kept in background._PREPARED
    finally:
        background._PREPARED.pop(kept, None)
