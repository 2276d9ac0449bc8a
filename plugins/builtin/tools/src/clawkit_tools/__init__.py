"""clawkit-tools: the standard tools every agent can list.

``read_file``, ``list_dir``, ``glob`` and ``web_fetch`` are ``safe`` (read-only);
``write_file`` and ``edit_file`` are ``guarded``; ``shell_exec`` is ``unsafe``.
File tools and ``shell_exec``'s working directory are confined to the agent's
workspace (see :mod:`clawkit_tools.paths`); ``web_fetch`` reaches public hosts only
(see :mod:`clawkit_tools.web`). Anything beyond is a capability grant that a
policy plugin writes into ``ctx.state["granted"][tool]`` — ``paths``, ``hosts`` —
for the turn; this plugin only enforces it.

Only the tools an agent lists in ``tools:`` are ever shown or run.
"""

from __future__ import annotations

from clawkit import hookimpl

from .files import edit_file, glob, list_dir, read_file, write_file
from .paths import PathRefused, resolve
from .settings import ToolsConfig
from .shell import scrubbed_env, shell_exec
from .web import FetchRefused, html_to_text, is_public, web_fetch

__all__ = [
    "ToolsConfig", "PathRefused", "FetchRefused", "resolve", "scrubbed_env", "is_public", "html_to_text",
    "read_file", "write_file", "edit_file", "list_dir", "glob", "shell_exec", "web_fetch", "TOOLS",
]

#: name -> (function, risk)
TOOLS = {
    "read_file": (read_file, "safe"),
    "write_file": (write_file, "guarded"),
    "edit_file": (edit_file, "guarded"),
    "list_dir": (list_dir, "safe"),
    "glob": (glob, "safe"),
    "shell_exec": (shell_exec, "unsafe"),
    "web_fetch": (web_fetch, "safe"),
}


@hookimpl
def register_config(register):
    register("tools", ToolsConfig)


@hookimpl
def register_tools(register, agent):
    for name, (fn, risk) in TOOLS.items():
        register(fn, name=name, risk=risk)
