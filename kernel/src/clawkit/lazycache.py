"""The hook declarations :mod:`clawkit.lazyplugin` read, kept between runs.

Reading 25 plugin sources costs ``clawkit --help`` about 10 ms; this keeps what was read in
``$XDG_CACHE_HOME/clawkit`` (else ``~/.cache/clawkit``), one small JSON file per interpreter
and ``sys.path``. An entry is used only when nothing it was read from has changed:

* every source file read for the module (the front door and the modules it re-exports from)
  has the same ``(path, size, mtime_ns)``, and each folder holding one has the same mtime
  (a module added beside them, which could now be the one imported, changes it);
* no ``sys.path`` folder whose mtime changed holds an entry named like a plugin's top package
  (one installed in front of the plugin would be imported instead), and the reader itself
  (``lazyplugin.py``, this file) is unchanged.

Anything else — a missing, unreadable, corrupt or foreign file, an unwritable folder — means
the sources are read as without a cache. Writers replace the whole file atomically (a temporary
file then ``os.replace``), so concurrent runs never see half a file; the last one wins.
``CLAWKIT_PLUGIN_CACHE=0`` turns the cache off.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import zlib
from typing import Any

from . import lazyplugin
from .lazyplugin import HookDecl

FORMAT = 1
KEEP = 16  # cache files kept (one per interpreter and sys.path)
_lock = threading.Lock()
_state: dict[str, Any] = {}  # "file", "modules" (module -> entry), "dirty"


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "clawkit")


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _stat(path: str) -> list[Any]:
    try:
        st = os.stat(path)
    except OSError:
        return [path, -1, -1]
    return [path, st.st_size, st.st_mtime_ns]


def _context() -> dict[str, Any]:
    """What every entry depends on: the interpreter, sys.path and its folders, the reader."""
    paths = [p or os.getcwd() for p in sys.path]
    return {
        "format": FORMAT,
        "python": sys.executable,
        "path": [[p, _mtime(p)] for p in paths],
        "reader": [_stat(lazyplugin.__file__), _stat(__file__)],
    }


def _open() -> dict[str, Any]:
    """The entries of this interpreter's cache file whose context still holds ({} otherwise)."""
    if _state and _state["sys_path"] == sys.path:
        return _state["modules"]
    if _state.get("dirty"):
        _write()  # what was read for the sys.path before
    context = _context()
    key = json.dumps([context["python"], [p for p, _ in context["path"]]])
    _state["file"] = os.path.join(cache_dir(), f"lazy-hooks-{zlib.crc32(key.encode()):08x}.json")
    _state["context"] = context
    _state["sys_path"] = list(sys.path)
    _state["dirty"] = False
    modules: dict[str, Any] = {}
    try:
        with open(_state["file"], encoding="utf-8") as fh:
            data = json.load(fh)
        if isinstance(data, dict) and isinstance(data.get("modules"), dict) and _same(data.get("context"), context,
                                                                                    data["modules"]):
            modules = data["modules"]
    except (OSError, ValueError):
        pass  # none yet, unreadable or corrupt: read the sources
    _state["modules"] = modules
    return modules


def _same(saved: Any, context: dict[str, Any], modules: dict[str, Any]) -> bool:
    """``saved`` holds for ``context``. A ``sys.path`` folder that changed since (the current
    directory often does) is read: it holds nothing named like a cached plugin's top package."""
    if not isinstance(saved, dict) or any(saved.get(k) != context[k] for k in ("format", "python", "reader")):
        return False
    if saved.get("path") == context["path"]:
        return True
    if [p for p, _ in saved.get("path") or ()] != [p for p, _ in context["path"]]:
        return False
    tops = {name.split(".")[0] for name in modules}
    for (folder, before), (_, now) in zip(saved["path"], context["path"]):
        if before != now:
            try:
                if any(entry.split(".")[0] in tops for entry in os.listdir(folder)):
                    return False  # a plugin's package may be shadowed (or moved): read the sources
            except OSError:
                pass  # gone or unreadable: nothing there to import either
    return True


def _fresh(entry: Any) -> bool:
    try:
        return all(_stat(f[0]) == f for f in entry["files"]) and all(_mtime(d) == m for d, m in entry["dirs"])
    except (KeyError, TypeError, ValueError, IndexError):
        return False


def _decode(hooks: Any) -> dict[str, HookDecl] | None:
    if hooks is None:
        return None
    return {
        attr: HookDecl(attr, d["module"], d["name"], dict(d["opts"]), tuple(d["argnames"]), d["order"],
                       None if d["events"] is None else frozenset(d["events"]))
        for attr, d in hooks.items()
    }


def _encode(hooks: dict[str, HookDecl] | None) -> Any:
    if hooks is None:
        return None
    return {
        attr: {"module": d.module, "name": d.name, "opts": d.opts, "argnames": list(d.argnames), "order": d.order,
               "events": None if d.events is None else sorted(d.events)}
        for attr, d in hooks.items()
    }


def cached_declare(module: str) -> dict[str, HookDecl] | None:
    """:func:`clawkit.lazyplugin.declare`, from the cache when its sources are unchanged."""
    if os.environ.get("CLAWKIT_PLUGIN_CACHE") == "0":
        return lazyplugin.declare(module)
    with _lock:
        modules = _open()
        entry = modules.get(module)
        if isinstance(entry, dict) and _fresh(entry):
            try:
                return _decode(entry["hooks"])
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # a malformed entry: read the sources
        lazyplugin._READ = read = []
        try:
            hooks = lazyplugin.declare(module)
        finally:
            lazyplugin._READ = None
        if read and "" not in read:  # every module it looked for was found and read
            files = list(dict.fromkeys(read))
            dirs = list(dict.fromkeys(os.path.dirname(f) for f in files))
            modules[module] = {"files": [_stat(f) for f in files], "dirs": [[d, _mtime(d)] for d in dirs],
                               "hooks": _encode(hooks)}
            _state["dirty"] = True
        return hooks


def flush() -> None:
    """Write the cache when something new was read (temporary file, then ``os.replace``)."""
    with _lock:
        if _state.get("dirty"):
            _write()


def _write() -> None:
    _state["dirty"] = False
    path = _state["file"]
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"context": _state["context"], "modules": _state["modules"]}, fh, separators=(",", ":"))
        os.replace(tmp, path)
        _prune(os.path.dirname(path))
    except (OSError, TypeError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass  # unwritable: no cache, nothing else changes


def _prune(folder: str) -> None:
    files = [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith("lazy-hooks-")]
    if len(files) > KEEP:
        for old in sorted(files, key=_mtime)[: len(files) - KEEP]:
            try:
                os.unlink(old)
            except OSError:
                pass


def reset() -> None:
    """Forget what this process loaded (tests)."""
    with _lock:
        _state.clear()
