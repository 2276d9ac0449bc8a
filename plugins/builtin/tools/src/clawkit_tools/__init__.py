"""clawkit-tools: the standard tools every agent can list.

``read_file``, ``list_dir``, ``glob``, ``web_fetch`` and ``web_search`` are ``safe`` (read-only);
``write_file`` and ``edit_file`` are ``guarded``; ``shell_exec`` is ``unsafe``.
File tools and ``shell_exec``'s working directory are confined to the agent's
workspace (see :mod:`clawkit_tools.paths`); ``web_fetch`` reaches public hosts only
(see :mod:`clawkit_tools.web`); ``web_search`` asks the backend the YAML names (see
:mod:`clawkit_tools.search`). Anything beyond is a capability grant that a
policy plugin writes into ``ctx.state["granted"][tool]`` — ``paths``, ``hosts`` —
for the turn; this plugin only enforces it.

Only the tools an agent lists in ``tools:`` are ever shown or run.
"""

from __future__ import annotations

from typing import Any

from clawkit import hook_order, hookimpl

# ``clawkit --help`` imports every plugin: the tool modules (pydantic, clawkit.tools,
# asyncio) load on first use. name -> submodule
_EXPORTS = {
    **dict.fromkeys(("edit_file", "glob", "list_dir", "read_file", "write_file"), "files"),
    **dict.fromkeys(("PathRefused", "resolve"), "paths"),
    **dict.fromkeys(("ToolsConfig", "WebSearchConfig"), "settings"),
    **dict.fromkeys(("web_search", "SearchRequest", "SearchResult"), "search"),
    **dict.fromkeys(("scrubbed_env", "shell_exec"), "shell"),
    **dict.fromkeys(("FetchRefused", "html_to_text", "is_public", "web_fetch"), "web"),
}
__all__ = [
    "ToolsConfig", "PathRefused", "FetchRefused", "resolve", "scrubbed_env", "is_public", "html_to_text",
    "read_file", "write_file", "edit_file", "list_dir", "glob", "shell_exec", "web_fetch", "web_search",
    "WebSearchConfig", "SearchRequest", "SearchResult", "TOOLS",
]

#: name -> risk; ``TOOLS`` (name -> (function, risk)) is built on first use
RISKS = {
    "read_file": "safe", "write_file": "guarded", "edit_file": "guarded", "list_dir": "safe", "glob": "safe",
    "shell_exec": "unsafe", "web_fetch": "safe", "web_search": "safe",
}


def __getattr__(name: str) -> Any:
    """The public names (and ``TOOLS``), imported on first use."""
    if name == "TOOLS":
        value: Any = {tool: (__getattr__(tool), risk) for tool, risk in RISKS.items()}
    else:
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


@hookimpl
def register_config(register):
    from .settings import ToolsConfig

    register("tools", ToolsConfig)


@hookimpl
@hook_order(25)  # after the policy's decision (it records this one as tool.blocked / the approval)
def before_tool_call(ctx, call):
    """Writes into a skill folder need an approval naming the file, every time (docs/security.md,
    "Confinement"); the tools refuse every other path that governs the agent's next run."""
    if call.name not in ("write_file", "edit_file"):
        return None
    from .paths import consent_needed

    return consent_needed(ctx, call)


@hookimpl
async def fetch_attachment(ctx, url, max_bytes):
    """A URL attachment's bytes, fetched as ``web_fetch`` fetches (public hosts or granted ones,
    each redirect checked, the same timeout); the kernel has already gated it as a web_fetch call."""
    from .web import fetch_attachment_bytes

    return await fetch_attachment_bytes(ctx, url, max_bytes)


@hookimpl
def register_tools(register, agent):
    tools = globals().get("TOOLS") or __getattr__("TOOLS")
    for name, (fn, risk) in tools.items():
        register(fn, name=name, risk=risk)
