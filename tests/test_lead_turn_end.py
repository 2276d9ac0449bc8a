"""Every turn that ends emits ``turn.end`` — also one a plugin answered itself (a directive-only
message), which observers (the audit ledger's turn close, telemetry's run span, memory's indexing,
`clawkit logs`) otherwise never saw end."""

from __future__ import annotations


def test_a_plugin_answered_turn_ends_with_turn_end(make_agent):
    seen = []

    class Observer:
        from clawkit import hookimpl

        @hookimpl
        def on_event(self, event):
            seen.append((event.type, dict(event.data)))

    agent = make_agent(script=["a model answer"], plugins=[Observer()])
    handled = agent.run("/verbose on")  # the directives plugin answers it: no model call
    assert handled.stop_reason == "handled", handled
    ends = [d for t, d in seen if t == "turn.end"]
    assert len(ends) == 1 and ends[0]["stop_reason"] == "handled", seen
    normal = agent.run("hello", session_id=handled.session_id)
    assert normal.reply.startswith("a model answer")
    assert [d["stop_reason"] for t, d in seen if t == "turn.end"] == ["handled", "done"]
