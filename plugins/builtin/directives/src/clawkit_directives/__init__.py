"""clawkit-directives: ``/think``, ``/verbose``, ``/elevated`` and ``/status`` in chat.

Directives are parsed anywhere in a message (``message_received``) and stripped
before the model sees the text. A message holding only directives sets them for
the session (session metadata ``directives``) and is answered by the plugin; a
directive inside a normal message applies to that turn only. ``/elevated`` is
always a session-level, time-limited grant (metadata ``elevated_until``), and
only when the agent's config permits it. Every change emits ``directive.change``.
"""

from __future__ import annotations


from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_exports, lazy_module

from .parse import VALUES, Parsed, parse

__all__ = ["DirectivesConfig", "ThinkContributor", "effective", "elevated_until", "parse", "session_directives"]

# Thin hookimpls: ``clawkit --help`` imports every plugin, so pydantic and clawkit.prompt
# load (with :mod:`clawkit_directives.plugin`) only when a hook first runs.
_EXPORTS = dict.fromkeys(
    ("DirectivesConfig", "ThinkContributor", "effective", "elevated_until", "session_directives", "status_text",
     "supports_reasoning", "STATE_KEY", "META_KEY", "ELEVATED_KEY", "THINK_TEXT"), "plugin"
)


__getattr__ = lazy_exports(__name__, _EXPORTS)
_plugin = lazy_module(__name__, "plugin")  # the implementation, imported by the first hook call


@hookimpl
def register_config(register):
    _plugin().register_config(register)


@hookimpl
@hook_order(20)
def message_received(ctx, message):
    """Strip directives; persist a directive-only message's settings and answer it."""
    return _plugin().message_received(ctx, message)


@hookimpl
@hook_order(20)
def before_llm_call(ctx, request):
    """Set the provider's reasoning effort for /think, where the model accepts it."""
    return _plugin().before_llm_call(ctx, request)


@hookimpl
def register_prompt_contributor(register, agent):
    """The ``/think`` prompt section."""
    _plugin().register_prompt_contributor(register, agent)


@hookimpl
@hook_order(20)
def message_sending(ctx, outbound):
    """Show tool calls (and with ``full`` their results) and token usage for /verbose."""
    return _plugin().message_sending(ctx, outbound)
