"""Plugin loading: a fresh pluggy manager per call, fed from the ``clawkit`` entry points.

Switches:

* ``CLAWKIT_LOAD_PLUGINS`` — comma list of distribution names to load (e.g.
  ``clawkit-litellm,clawkit-hello``); set but empty means no plugins at all.
* ``CLAWKIT_TRACE_PLUGINS=1`` — print every hook call with its timing to stderr.
* ``CLAWKIT_EAGER_PLUGINS=1`` — import every plugin module at start instead of registering it
  lazily (see :mod:`clawkit.lazyplugin`; for debugging a plugin's import-time behaviour).
* ``CLAWKIT_PLUGIN_CACHE=0`` — read the plugins' hooks from their sources on every start
  instead of from the cache of what was read (:mod:`clawkit.lazycache`).
* per agent: ``plugins: {name: {enabled: false}}`` (pass ``disabled=``).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Iterable

import pluggy

from . import hookspecs

GROUP = "clawkit"
log = logging.getLogger("clawkit.plugins")
_WARNED_EMPTY: set[str] = set()


class PluginError(Exception):
    """A plugin could not be loaded, or the plugin set is inconsistent."""


@dataclass(frozen=True)
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    hooks: tuple[str, ...]


def _wanted_distributions() -> set[str] | None:
    raw = os.environ.get("CLAWKIT_LOAD_PLUGINS")
    if raw is None:
        return None
    return {_norm(d) for d in raw.split(",") if d.strip()}


def _norm(dist: str) -> str:
    return dist.strip().lower().replace("_", "-").replace(".", "-")


def _entry_points() -> list[metadata.EntryPoint]:
    return list(metadata.entry_points(group=GROUP))


def get_plugin_manager(
    *,
    disabled: Iterable[str] = (),
    extra: Iterable[Any] = (),
    load_entry_points: bool = True,
) -> pluggy.PluginManager:
    """Build a new plugin manager: hookspecs, entry-point plugins, then ``extra`` objects.

    ``disabled`` names plugins (entry-point names) not to load. ``extra`` are plugin
    objects or modules to register as well (tests, embedding apps; a module its entry point
    already loaded is not registered twice). Raises
    :class:`PluginError` for duplicate plugin names, a plugin that fails to import,
    or a hook implementation that matches no hookspec.
    """
    pm = pluggy.PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    skip = set(disabled)
    if load_entry_points:
        wanted = _wanted_distributions()
        seen: dict[str, str] = {}
        for ep in _entry_points():
            dist = ep.dist.name if ep.dist else "?"
            if wanted is not None and _norm(dist) not in wanted:
                continue
            if ep.name in seen and seen[ep.name] != dist:
                raise PluginError(
                    f"two distributions register the clawkit plugin {ep.name!r}: {seen[ep.name]} and {dist}; "
                    "uninstall one or disable it with CLAWKIT_LOAD_PLUGINS"
                )
            if ep.name in seen:
                continue  # the same distribution seen twice on sys.path
            seen[ep.name] = dist
            if ep.name in skip:
                continue
            try:
                plugin = _load(ep)
            except Exception as exc:  # a broken plugin must say which one it is
                raise PluginError(f"plugin {ep.name!r} from {dist} failed to import: {exc!r}") from exc
            pm.register(plugin, name=ep.name)
            if not pm.get_hookcallers(plugin) and ep.name not in _WARNED_EMPTY:
                _WARNED_EMPTY.add(ep.name)  # once per process: managers are built per agent
                log.warning("plugin %r from %s implements no hooks: its entry point names %r — a stale install "
                            "(reinstall %s) or the wrong module", ep.name, dist, getattr(ep, "value", "?"), dist)
            pm._clawkit_dists = getattr(pm, "_clawkit_dists", {})  # type: ignore[attr-defined]
            pm._clawkit_dists[ep.name] = ep.dist  # type: ignore[attr-defined]
        if "clawkit.lazycache" in sys.modules:
            sys.modules["clawkit.lazycache"].flush()  # what was read from plugin sources, for the next start
    for obj in extra:
        name = getattr(obj, "name", None) if not isinstance(obj, type(sys)) else obj.__name__
        if name in skip or pm.is_registered(obj):
            continue  # disabled, or a module its entry point already loaded
        if _replaces_lazy(pm, obj, skip):
            continue
        pm.register(obj, name=name if isinstance(name, str) else None)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"unknown hook implementation: {exc}") from exc
    if os.environ.get("CLAWKIT_TRACE_PLUGINS") == "1":
        _enable_tracing(pm)
    return pm


def _load(ep: metadata.EntryPoint) -> Any:
    """The plugin an entry point names: a module is registered lazily when its hooks can be read
    from its source (:mod:`clawkit.lazyplugin`); ``module:attr`` and anything else is imported."""
    value = getattr(ep, "value", None)
    if isinstance(value, str) and ":" not in value and "[" not in value and os.environ.get("CLAWKIT_EAGER_PLUGINS") != "1":
        from .lazycache import cached_declare  # lazyplugin.declare, kept between runs
        from .lazyplugin import LazyPlugin

        hooks = cached_declare(value.strip())
        if hooks:
            return LazyPlugin(value.strip(), hooks)
    return ep.load()


def _replaces_lazy(pm: pluggy.PluginManager, obj: Any, skip: set[str]) -> bool:
    """``extra`` holds an installed plugin's module: it is that plugin, registered once.

    The module an entry point registered lazily takes the proxy's place under the same name (it
    is imported already). A plugin's package whose entry point names a submodule
    (``clawkit_x`` for ``x = "clawkit_x.hooks"``) stands for that plugin: nothing more is
    registered when the entry point is loaded, else the entry point's plugin is (lazily). Either
    way it is named as its entry point names it, so messages read the same in tests and the CLI.
    """
    from .lazyplugin import LazyPlugin

    if not isinstance(obj, type(sys)):
        return False
    module = obj.__name__
    for name, plugin in pm.list_name_plugin():
        if isinstance(plugin, LazyPlugin) and plugin._clawkit_module == module:
            pm.unregister(plugin)
            pm.register(obj, name=name)
            return True
        target = plugin._clawkit_module if isinstance(plugin, LazyPlugin) else getattr(plugin, "__name__", "")
        if isinstance(target, str) and target.startswith(module + "."):
            return True
    for ep in _entry_points():
        value = getattr(ep, "value", "")
        if not isinstance(value, str) or ep.name in skip or pm.get_plugin(ep.name) is not None:
            continue
        if value == module:  # under its plugin name, as the CLI names it ("blocked by guard:")
            pm.register(obj, name=ep.name)
            return True
        if value.startswith(module + ".") and hasattr(obj, "__path__"):
            pm.register(_load(ep), name=ep.name)
            return True
    return False


def plugin_infos(pm: pluggy.PluginManager) -> list[PluginInfo]:
    """Each registered plugin: name, distribution, version, and the hooks it implements."""
    dists = getattr(pm, "_clawkit_dists", {})
    out = []
    for name, plugin in pm.list_name_plugin():
        hooks = tuple(sorted(h.name for h in (pm.get_hookcallers(plugin) or [])))
        dist = dists.get(name)
        out.append(
            PluginInfo(
                name=name,
                distribution=dist.name if dist else None,
                version=dist.version if dist else None,
                hooks=hooks,
            )
        )
    return sorted(out, key=lambda p: p.name)


def _enable_tracing(pm: pluggy.PluginManager) -> None:
    """Direct ``pm.hook.x()`` calls are traced here; the kernel's own calls in hooks.py."""
    starts: list[float] = []

    def before(hook_name, hook_impls, kwargs):
        starts.append(time.perf_counter())

    def after(outcome, hook_name, hook_impls, kwargs):
        took = (time.perf_counter() - starts.pop()) * 1e3
        names = ",".join(i.plugin_name for i in hook_impls)
        print(f"[clawkit trace] {hook_name} [{names}] {took:.3f} ms", file=sys.stderr)

    pm.add_hookcall_monitoring(before, after)
    pm._clawkit_trace = True  # type: ignore[attr-defined]
