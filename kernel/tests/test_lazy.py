"""clawkit.lazy: a plugin package's public names load on first use."""

import sys
import types

import pytest

from clawkit.lazy import lazy_exports


def test_lazy_exports_import_on_first_use_and_cache(monkeypatch):
    pkg = types.ModuleType("fakepkg")
    pkg.__path__ = []
    sub = types.ModuleType("fakepkg.heavy")
    sub.Thing = object()
    monkeypatch.setitem(sys.modules, "fakepkg", pkg)
    monkeypatch.setitem(sys.modules, "fakepkg.heavy", sub)
    pkg.__getattr__ = lazy_exports("fakepkg", {"Thing": "heavy"})
    assert pkg.Thing is sub.Thing
    assert pkg.__dict__["Thing"] is sub.Thing  # cached: __getattr__ is not asked again
    with pytest.raises(AttributeError, match="has no attribute 'Other'"):
        pkg.Other
