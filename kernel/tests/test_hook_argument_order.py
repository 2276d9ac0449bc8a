"""Hook arguments are matched by name, in any order, and only the declared ones are passed
(docs/hooks.md) — the kernel calls implementations positionally in their own parameter order."""

from __future__ import annotations

from clawkit import hookimpl


def test_implementations_get_their_arguments_by_name_in_their_own_order(make_agent):
    seen = []

    class Reversed:
        @hookimpl
        def message_received(self, message, ctx):  # the spec says (ctx, message)
            seen.append(("received", type(ctx).__name__, message.content))

        @hookimpl
        def before_llm_call(self, request, ctx):
            seen.append(("llm", type(ctx).__name__, type(request).__name__))

        @hookimpl
        def message_sending(self, outbound):  # a subset: ctx is not declared
            seen.append(("sending", outbound.kind))

        @hookimpl
        def on_event(self, event):
            if event.type == "turn.end":
                seen.append(("event", event.type))

    agent = make_agent(["ok"], plugins=(Reversed(),))
    assert agent.run("hello").reply == "ok"
    assert ("received", "TurnContext", "hello") in seen
    assert ("llm", "TurnContext", "LlmRequest") in seen
    assert ("sending", "final_reply") in seen
    assert ("event", "turn.end") in seen
