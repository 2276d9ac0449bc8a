"""clawkit's test kit, for the kernel, the builtin plugins and third-party authors.

* :class:`ScriptedProvider` — an in-process model for fast unit tests.
* ``model_server`` (pytest fixture) — a real OpenAI-compatible HTTP server on
  127.0.0.1, scripted per test, with fault injection (see :mod:`clawkit.testing.server`).
* ``make_agent`` (pytest fixture) — an :class:`clawkit.loop.Agent` from a dict config
  in a temporary workspace, with every installed plugin unless the test narrows it
  (``narrow="<why>"``; :mod:`clawkit.testing.install`).
* :func:`plugin_manager` — the same plugin set as a plugin manager.
* :func:`unwrapped` — a tool result without the shield's data wrapper, for exact asserts.
"""

from .install import plugin_manager, unwrapped
from .scripted import ScriptedProvider, ScriptedReply, call

__all__ = ["ScriptedProvider", "ScriptedReply", "call", "plugin_manager", "unwrapped"]
