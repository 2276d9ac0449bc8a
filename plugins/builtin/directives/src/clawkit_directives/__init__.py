"""clawkit-directives: ``/think``, ``/verbose``, ``/elevated`` and ``/status`` in chat.

Directives are parsed anywhere in a message (``message_received``) and stripped
before the model sees the text. A message holding only directives sets them for
the session (session metadata ``directives``) and is answered by the plugin; a
directive inside a normal message applies to that turn only. ``/elevated`` is
always a session-level, time-limited grant (metadata ``elevated_until``), and
only when the agent's config permits it. Every change emits ``directive.change``.
"""

from __future__ import annotations

# The entry point names :mod:`clawkit_directives.plugin`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
from clawkit.lazy import lazy_exports

from .parse import VALUES, Parsed, parse

__all__ = ["DirectivesConfig", "ThinkContributor", "effective", "elevated_until", "parse", "session_directives"]

_EXPORTS = dict.fromkeys(
    ("DirectivesConfig", "ThinkContributor", "effective", "elevated_until", "session_directives", "status_text",
     "supports_reasoning", "STATE_KEY", "META_KEY", "ELEVATED_KEY", "THINK_TEXT"), "plugin"
)

__getattr__ = lazy_exports(__name__, _EXPORTS)
