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


def workspace_prompts(agent: Any, *, refresh: bool = True) -> WorkspacePrompts:
    """The (watched) workspace sections directory of ``agent``; ``refresh=False`` skips the check
    for the directory appearing or vanishing when the entry is known (the prompt build, later in
    the same turn, makes it)."""
    hit = _keys.get(id(agent))
    if hit is None or hit[0] is not agent:  # the config's part of the key, once per config object
        from .settings import settings_of

        cfg = settings_of(agent)
        if len(_keys) > 64:
            _keys.clear()
        hit = _keys[id(agent)] = (agent, (cfg.prompts_dir, str(agent.workspace), cfg.watch))
    key = hit[1]
    workspace = _workspace()
    wp = workspace.prompts_for_cached(key, refresh=refresh)  # two calls per turn: skip the path arithmetic
    if wp is None:
        directory = Path(key[0])
        if not directory.is_absolute():
            directory = Path(agent.workspace) / directory
        wp = workspace.prompts_for(directory, key[2], cache_key=key)
    if _users.get(id(agent)) is not wp:
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


# agent config id -> (config, its workspace sections snapshot, the contributors to register): the
# list is the same object every turn while the config and the workspace sections are
_lists: dict[int, tuple[Any, tuple, tuple[Any, ...]]] = {}


@hookimpl
def register_prompt_contributor(register, agent):
    workspace = workspace_prompts(agent).contributors  # (an immutable snapshot, replaced on reload)
    hit = _lists.get(id(agent))
    if hit is None or hit[0] is not agent or hit[1] is not workspace:
        off = _settings().settings_of(agent).disable
        found = (*(c for c in _builtins() if c.id not in off), *_config_contributors(agent), *workspace)
        if len(_lists) > 64:
            _lists.clear()
        hit = _lists[id(agent)] = (agent, workspace, found)
    for c in hit[2]:
        register(c)


_reported: dict[str, int] = {}


@hookimpl
@hook_order(60)
def message_received(ctx, message):
    """Reports malformed workspace files (``contributors.invalid``, once per session and reload)."""
    wp = workspace_prompts(ctx.agent, refresh=False)
    if not wp.errors:
        return
    key = f"{ctx.session.id}:{wp.directory}"
    if _reported.get(key) != wp.generation:
        _reported[key] = wp.generation
        for err in wp.errors:
            ctx.emit("contributors.invalid", path=err.path, line=err.line, error=err.message)
