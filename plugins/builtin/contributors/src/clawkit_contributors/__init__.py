"""clawkit-contributors: the standard system-prompt sections and user-defined ones.

* built-in sections: identity, instructions, tools, project-context, directives, runtime
  (turn any off with ``plugins.contributors.disable``);
* config-driven sections: the agent YAML's top-level ``contributors:`` list;
* workspace sections: ``.agents/prompts/*.md`` with YAML frontmatter, reloaded on change.

Every section is a :class:`clawkit.prompt.PromptContributor`; the kernel selects them
by the session's classification. See docs/plugins/contributors.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_exports, lazy_module

from .settings import register_config  # noqa: F401  (a hook: the kernel imports this package on a hook's first call)

if TYPE_CHECKING:
    from clawkit.prompt import PromptContributor

    from .workspace import WorkspacePrompts

__all__ = [
    "ContributorList", "ContributorSpec", "ContributorsConfig", "PromptFileError", "WorkspacePrompts",
    "close_all", "parse_prompt_file", "prompts_for", "workspace_prompts",
]

# ``clawkit --help`` imports every plugin: pydantic, clawkit.prompt and watchfiles load on
# first use. name -> submodule
_EXPORTS = {
    **dict.fromkeys(("ContributorList", "ContributorsConfig", "ContributorSpec", "settings_of", "specs_of"), "settings"),
    **dict.fromkeys(("PromptFileError", "WorkspacePrompts", "close_all", "parse_prompt_file", "prompts_for"), "workspace"),
    "builtin_contributors": "builtin",
}


__getattr__ = lazy_exports(__name__, _EXPORTS)
# imported by the first hook call (an import statement costs microseconds per call)
_settings = lazy_module(__name__, "settings")
_workspace = lazy_module(__name__, "workspace")


_BUILTINS: list[Any] | None = None
_from_config: dict[int, tuple[Any, list[PromptContributor]]] = {}


def _builtins() -> list[Any]:
    """The built-in sections, created on first use."""
    global _BUILTINS
    if _BUILTINS is None:
        from .builtin import builtin_contributors

        _BUILTINS = builtin_contributors()
    return _BUILTINS


def _config_contributors(agent: Any) -> list[PromptContributor]:
    """The agent's ``contributors:`` entries as contributors, built once per config object."""
    hit = _from_config.get(id(agent))
    if hit is not None and hit[0] is agent:
        return hit[1]
    from clawkit.prompt import StaticContributor

    from .settings import specs_of

    built: list[PromptContributor] = [
        StaticContributor(s.id, s.content, heading=s.heading, tags=s.tags, priority=s.priority, max_chars=s.max_chars)
        for s in specs_of(agent)
    ]
    if len(_from_config) > 64:
        _from_config.clear()
    _from_config[id(agent)] = (agent, built)
    return built


def workspace_prompts(agent: Any) -> WorkspacePrompts:
    """The (watched) workspace sections directory of ``agent``."""
    hit = _keys.get(id(agent))
    if hit is None or hit[0] is not agent:  # the config's part of the key, once per config object
        from .settings import settings_of

        cfg = settings_of(agent)
        if len(_keys) > 64:
            _keys.clear()
        hit = _keys[id(agent)] = (agent, (cfg.prompts_dir, str(agent.workspace), cfg.watch))
    key = hit[1]
    workspace = _workspace()
    wp = workspace.prompts_for_cached(key)  # two calls per turn: skip the path arithmetic
    if wp is None:
        directory = Path(key[0])
        if not directory.is_absolute():
            directory = Path(agent.workspace) / directory
        wp = workspace.prompts_for(directory, key[2], cache_key=key)
    _users[id(agent)] = wp
    return wp


_keys: dict[int, tuple[Any, tuple[str, str, bool]]] = {}  # agent config id -> (config, its prompts key)
_users: dict[int, WorkspacePrompts] = {}  # open agent config id -> the prompts directory it reads


@hookimpl
def agent_closing(agent):
    """Stop (and join) the watcher of this agent's prompts directory unless another open
    agent reads the same directory (it restarts if an agent uses it again)."""
    wp = _users.pop(id(agent), None)
    if wp is not None and not any(other is wp for other in _users.values()):
        wp.close()


@hookimpl
def register_prompt_contributor(register, agent):
    off = _settings().settings_of(agent).disable
    for c in _builtins():
        if c.id not in off:
            register(c)
    for c in _config_contributors(agent):
        register(c)
    for c in workspace_prompts(agent).contributors:
        register(c)


_reported: dict[str, int] = {}
_described: list[Any] = [None, None, {}]  # the last (tool registry, its visible list, descriptions)


def _descriptions(tools: Any) -> dict[str, str]:
    """Tool name -> description of the visible tools; rebuilt when the registry's visible
    list changes (it is a new list whenever a tool is added, removed or allowed)."""
    if tools is None:
        return {}
    visible = tools.visible()
    if _described[0] is tools and _described[1] is visible:
        return dict(_described[2])  # a copy: the turn's state is the turn's
    described = {t.name: t.definition.description for t in visible}
    _described[:] = [tools, visible, described]
    return dict(described)


@hookimpl
@hook_order(60)
def message_received(ctx, message):
    """Hands tool descriptions to the tools section and reports malformed workspace files."""
    ctx.state["contributors.tool_descriptions"] = _descriptions(ctx.tools)
    wp = workspace_prompts(ctx.agent)
    key = f"{ctx.session.id}:{wp.directory}"
    if wp.errors and _reported.get(key) != wp.generation:
        _reported[key] = wp.generation
        for err in wp.errors:
            ctx.emit("contributors.invalid", path=err.path, line=err.line, error=err.message)
