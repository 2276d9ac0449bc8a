"""The hook declarations read from plugin sources are kept between runs (clawkit.lazycache)
and never trusted once a source they came from has changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawkit import lazycache, lazyplugin

FRONT = "from .impl import on_event  # the front door re-exports\nfrom clawkit import hookimpl\n\n\n@hookimpl\ndef before_turn(ctx):\n    pass\n"
IMPL = "from clawkit import hookimpl\n\n\n@hookimpl\ndef on_event(event):\n    pass\n"


@pytest.fixture
def plug(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CLAWKIT_PLUGIN_CACHE", raising=False)
    site = tmp_path / "site"
    root = site / "cachepkg_demo"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text(FRONT)
    (root / "impl.py").write_text(IMPL)
    monkeypatch.syspath_prepend(str(site))
    lazycache.reset()
    yield root
    lazycache.reset()


def _declare(*, from_cache: bool = False):
    """A fresh process's view: what this process loaded is forgotten first."""
    lazycache.reset()
    with pytest.MonkeyPatch.context() as mp:
        if from_cache:
            mp.setattr(lazyplugin, "declare", lambda module: pytest.fail(f"{module} was read, not cached"))
        hooks = lazycache.cached_declare("cachepkg_demo")
    lazycache.flush()
    return hooks


def _edit(path: Path, text: str) -> None:
    """Write ``text`` with an mtime other than the file's (a coarse clock must not hide the edit)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def _cache_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "clawkit").glob("lazy-hooks-*.json"))


def test_a_second_start_reads_no_source_and_an_edit_is_picked_up(plug, tmp_path, monkeypatch):
    first = _declare()
    assert set(first) == {"before_turn", "on_event"} and first["on_event"].module == "cachepkg_demo.impl"
    assert len(_cache_files(tmp_path)) == 1
    assert _declare(from_cache=True) == first

    # the front door gains a hook: same folder, new size and mtime
    _edit(plug / "__init__.py", FRONT + "\n\n@hookimpl\ndef after_turn(ctx, reply):\n    pass\n")
    assert set(_declare()) == {"before_turn", "on_event", "after_turn"}
    assert _declare(from_cache=True)["after_turn"].argnames == ("ctx", "reply")

    # the re-exported module changes its arguments with the same size: the mtime tells
    _edit(plug / "impl.py", IMPL.replace("(event)", "(extra)"))
    assert _declare()["on_event"].argnames == ("extra",)
    _edit(plug / "impl.py", IMPL.replace("def on_event(event)", "@hookimpl(tryfirst=True)\ndef on_event(event)")
          .replace("@hookimpl\n@hookimpl", "@hookimpl"))
    assert _declare()["on_event"].opts["tryfirst"] is True


def test_a_package_installed_in_front_of_the_plugin_is_not_hidden_by_the_cache(plug, tmp_path, monkeypatch):
    assert set(_declare()) == {"before_turn", "on_event"}
    front = tmp_path / "front"
    front.mkdir()
    monkeypatch.syspath_prepend(str(front))
    _declare()  # the cache of this sys.path
    shadow = front / "cachepkg_demo"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("from clawkit import hookimpl\n\n\n@hookimpl\ndef on_config(ctx):\n    pass\n")
    assert set(_declare()) == {"on_config"}


def test_a_corrupt_or_foreign_cache_file_is_ignored_and_replaced(plug, tmp_path, monkeypatch):
    good = _declare()
    (cache,) = _cache_files(tmp_path)
    for bad in ("{not json", json.dumps({"context": {}, "modules": {}}), json.dumps([1, 2]), ""):
        cache.write_text(bad)
        assert _declare() == good
        assert json.loads(cache.read_text())["modules"]["cachepkg_demo"]["hooks"]  # rewritten whole
    data = json.loads(cache.read_text())
    data["modules"]["cachepkg_demo"]["hooks"] = {"on_event": {"module": 3}}  # a malformed entry
    cache.write_text(json.dumps(data))
    assert _declare() == good
    assert not list(cache.parent.glob("*.tmp"))  # no temporary file left behind


def test_an_unwritable_cache_folder_means_no_cache(plug, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert set(_declare()) == {"before_turn", "on_event"}
    monkeypatch.setenv("CLAWKIT_PLUGIN_CACHE", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "off"))
    assert set(_declare()) == {"before_turn", "on_event"}
    assert not (tmp_path / "off").exists()


def test_the_cli_writes_the_cache_once_and_the_eager_switch_skips_it(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("CLAWKIT_LOAD_PLUGINS", None)
    env.pop("CLAWKIT_PLUGIN_CACHE", None)
    run = [sys.executable, "-m", "clawkit", "--help"]
    eager = subprocess.run(run, env={**env, "CLAWKIT_EAGER_PLUGINS": "1"}, capture_output=True, text=True, cwd=tmp_path)
    assert eager.returncode == 0 and not (tmp_path / "cache").exists()
    outs = [subprocess.run(run, env=env, capture_output=True, text=True, cwd=tmp_path) for _ in range(2)]
    assert all(o.returncode == 0 for o in outs) and outs[0].stdout == outs[1].stdout == eager.stdout
    (cache,) = _cache_files(tmp_path)
    written = cache.stat().st_mtime_ns
    assert len(json.loads(cache.read_text())["modules"]) >= 20  # every builtin's front door
    assert cache.stat().st_mtime_ns == written  # the second start only read it
