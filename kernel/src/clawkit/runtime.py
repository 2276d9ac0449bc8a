"""From an agent YAML file to a running :class:`clawkit.loop.Agent`, with every plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import AgentConfig, collect_sections, load_agent
from .hooks import HookRunner
from .plugins import get_plugin_manager


def load_config(path: str | Path, overrides: dict[str, Any] | None = None, pm=None) -> tuple[AgentConfig, Any]:
    """Validate ``path`` against the kernel's and every installed plugin's sections.

    Returns the config and the plugin manager it was validated with.
    """
    pm = pm or get_plugin_manager()
    cfg = load_agent(path, sections=collect_sections(HookRunner(pm)), overrides=overrides)
    return cfg, pm


def open_agent(path: str | Path, overrides: dict[str, Any] | None = None, approver: Any = None,
               extra_plugins: tuple = (), **kwargs: Any):
    """Load ``path`` and build the agent; plugins the file disables are not loaded.

    ``extra_plugins`` are plugin objects added after the installed ones (the CLI's
    own observers, e.g. the one printing retries on stderr).
    """
    from .loop import Agent

    cfg, pm = load_config(path, overrides)
    off = cfg.disabled_plugins()
    if off or extra_plugins:
        pm = get_plugin_manager(disabled=off, extra=extra_plugins)
    return Agent(cfg, pm=pm, approver=approver, **kwargs)


def open_turn_queue(url: str, pm=None) -> Any:
    """The durable turn queue at ``url`` (``postgresql://…``), from the plugin that runs one
    (``open_turn_queue``; ``clawkit-workers`` installs it): ``submit`` turns, read their
    ``result``, list and ``answer`` approvals. Raises :class:`clawkit.errors.ConfigError`
    when no installed plugin handles the URL."""
    from .errors import ConfigError

    queue = (pm or get_plugin_manager()).hook.open_turn_queue(url=url)
    if queue is None:
        scheme = url.split(":", 1)[0]
        raise ConfigError(f"{scheme}: no installed plugin runs turns on this URL (install clawkit-workers for postgresql://)")
    return queue
