"""Lazy public names for plugin packages.

``clawkit --help`` imports every plugin's entry-point module, so a plugin keeps that
module thin and loads its real modules on first use::

    from clawkit.lazy import lazy_exports

    __getattr__ = lazy_exports(__name__, {"TruncatorConfig": "plugin", "cut": "cut"})

``pkg.TruncatorConfig`` then imports ``pkg.plugin`` the first time it is asked for.

Thin hookimpls reach their implementation through :func:`lazy_module`: a ``from .plugin
import impl`` statement inside a hook costs microseconds on every call (the import
machinery runs each time), the accessor a function call::

    _plugin = lazy_module(__name__, "plugin")

    @hookimpl
    def before_llm_call(ctx, request):
        return _plugin().before_llm_call(ctx, request)
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``package.<exports[name]>`` and caches ``name``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def lazy_module(package: str, name: str) -> Callable[[], ModuleType]:
    """An accessor for ``package.<name>``, imported by its first call and kept."""
    module: ModuleType | None = None

    def get() -> ModuleType:
        nonlocal module
        if module is None:
            module = import_module(f".{name}", package)
        return module

    return get


def loaded(name: str) -> ModuleType | None:
    """Module ``name`` if something in this process imported it, else None — without importing it.

    A module another thread is still importing is already in ``sys.modules``, half initialised
    (a plugin's background thread loading its service while the agent closes): this waits for
    that import to finish instead of handing it out.
    """
    if name not in sys.modules:
        return None
    return import_module(name)
