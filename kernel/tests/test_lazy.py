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


def test_loaded_never_imports_and_waits_for_another_threads_import(tmp_path, monkeypatch):
    """``loaded`` answers None for a module nobody imported (importing nothing), and for one
    another thread is still importing it waits for the import instead of handing out the
    half-initialised module."""
    import builtins
    import threading

    from clawkit.lazy import loaded

    (tmp_path / "slowmod_for_loaded.py").write_text(
        "import threading, time\nSTARTED.set()\ntime.sleep(0.3)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert loaded("slowmod_for_loaded") is None and "slowmod_for_loaded" not in sys.modules
    started = threading.Event()
    monkeypatch.setattr(builtins, "STARTED", started, raising=False)
    importer = threading.Thread(target=__import__, args=("slowmod_for_loaded",))
    importer.start()
    try:
        assert started.wait(10)
        module = loaded("slowmod_for_loaded")  # mid-import in the other thread
        assert module is not None and module.DONE is True
    finally:
        importer.join(10)
        sys.modules.pop("slowmod_for_loaded", None)
