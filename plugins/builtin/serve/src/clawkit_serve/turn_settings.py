"""Model settings a chat-completions request asked for (``temperature``, ``max_tokens``…), applied
to the model calls of that request's turn only.

The HTTP handler sets :data:`CURRENT` before it starts the turn; the turn's task (and only
it: asyncio copies the context into the tasks it creates) sees the value, and
:class:`TurnSettings`, registered on every served agent, puts it into each
``LlmRequest.settings`` of that session — sub-agents and other sessions are untouched.
``max_tokens`` is capped at the agent's own ``model.max_tokens`` when it sets one.
"""

from __future__ import annotations

import contextvars
from typing import Any

from clawkit import hookimpl

#: (session id, settings) of the turn being started, or None
CURRENT: contextvars.ContextVar[tuple[str, dict[str, Any]] | None] = contextvars.ContextVar("clawkit_serve_turn_settings",
                                                                                           default=None)


class TurnSettings:
    @hookimpl
    def message_received(self, ctx, message):
        """A client's ``response_format`` makes the turn typed (clawkit.output, docs/typed-output.md):
        sent the way the agent's model takes it best, the answer validated and retried."""
        current = CURRENT.get()
        if current is None or ctx.session is None or ctx.session.id != current[0]:
            return None
        if current[1].get("response_format"):
            ctx.state["output"] = current[1]["response_format"]
        return None

    @hookimpl
    def before_llm_call(self, ctx, request):
        current = CURRENT.get()
        if current is None or ctx.session is None or ctx.session.id != current[0]:
            return None
        settings = dict(current[1])
        settings.pop("response_format", None)  # the turn's typed output (message_received) sends it
        effort = settings.pop("reasoning_effort", None)
        if effort is not None:
            request.reasoning_effort = effort
        cap = getattr(ctx.agent.model, "max_tokens", None)
        if cap is not None and "max_tokens" in settings:
            settings["max_tokens"] = min(int(settings["max_tokens"]), int(cap))
        request.settings = {**request.settings, **settings}
        return None
