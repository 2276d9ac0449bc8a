"""Plugins registered from their source without importing them (clawkit.lazyplugin)."""

from __future__ import annotations

import sys
import textwrap
import types
from importlib import metadata

import pluggy
import pytest

from clawkit import plugins as plugins_mod
from clawkit.hooks import HookRunner
from clawkit.lazyplugin import LazyPlugin, LazyPluginError, declare, lazy_plugin
from clawkit.plugins import get_plugin_manager

HEAVY = '''
from clawkit import hook_order, hookimpl, on_events

LOADED = True


@hookimpl(tryfirst=True)
@hook_order(7)
def before_llm_call(ctx, request):
    request.system = "heavy"


@hookimpl(
    hookwrapper=True,
)
def message_sending(ctx, outbound):
    outcome = yield
    outcome.get_result()


@hookimpl
@on_events("turn.end", "agent.*")
def on_event(event, extra=None):
    CALLS.append(event)


CALLS = []
'''
CLI = '''
from clawkit import hookimpl


@hookimpl
def register_commands(cli):
    cli.seen = True
'''
FRONT = '''
"""A front door: only the list of the plugin's hooks.

@maintainers: a line in a string that starts with "@" is not a decorator
"""
from .cli import register_commands  # noqa: F401  (a comment, with a comma)
from .heavy import (
    before_llm_call,
    message_sending,
    on_event,
)
'''


@pytest.fixture
def pkg(tmp_path, monkeypatch):
    root = tmp_path / "lazypkg_demo"
    root.mkdir()
    (root / "__init__.py").write_text('"""demo"""\n')
    (root / "heavy.py").write_text(HEAVY)
    (root / "cli.py").write_text(CLI)
    (root / "hooks.py").write_text(textwrap.dedent(FRONT))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in [m for m in sys.modules if m.startswith("lazypkg_demo")]:
        del sys.modules[name]


def _ep(value: str, name: str = "demo") -> metadata.EntryPoint:
    ep = metadata.EntryPoint(name=name, value=value, group="clawkit")
    return ep


def _pm(monkeypatch, value: str) -> pluggy.PluginManager:
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.delenv("CLAWKIT_EAGER_PLUGINS", raising=False)
    monkeypatch.setattr(plugins_mod, "_entry_points", lambda: [_ep(value)])
    return get_plugin_manager()


def test_hooks_are_read_from_the_source_and_imported_on_first_call(pkg, monkeypatch):
    pm = _pm(monkeypatch, "lazypkg_demo.hooks")
    plugin = pm.get_plugin("demo")
    assert isinstance(plugin, LazyPlugin)
    assert not any(m in sys.modules for m in ("lazypkg_demo.hooks", "lazypkg_demo.heavy", "lazypkg_demo.cli"))
    assert sorted(h.name for h in pm.get_hookcallers(plugin)) == [
        "before_llm_call", "message_sending", "on_event", "register_commands"]
    # the CLI hook imports the CLI module only
    cli = types.SimpleNamespace()
    HookRunner(pm).call_sync("register_commands", cli=cli)
    assert cli.seen and "lazypkg_demo.cli" in sys.modules and "lazypkg_demo.heavy" not in sys.modules
    # options, order, events and argument pruning as pluggy would have read them from the module
    impl = pm.hook.before_llm_call.get_hookimpls()[0]
    assert impl.tryfirst and impl.argnames == ("ctx", "request") and impl.function.clawkit_order == 7
    request = types.SimpleNamespace(system="")
    pm.hook.before_llm_call(ctx=None, request=request)
    assert request.system == "heavy" and sys.modules["lazypkg_demo.heavy"].LOADED
    wrapper = pm.hook.message_sending.get_hookimpls()[0]
    assert wrapper.hookwrapper and pm.hook.message_sending(ctx=None, outbound=None) == []
    event = types.SimpleNamespace(type="agent.close")
    runner = HookRunner(pm)
    runner.call_event(event)
    runner.call_event(types.SimpleNamespace(type="tool.end"))  # not among its events
    assert sys.modules["lazypkg_demo.heavy"].CALLS == [event]
    assert "lazypkg_demo.hooks" not in sys.modules  # the front door itself never had to run


def test_the_declaration_matches_what_pluggy_reads_from_the_module(pkg):
    lazy = declare("lazypkg_demo.hooks")
    import lazypkg_demo.hooks as front

    pm = pluggy.PluginManager("clawkit")
    for attr, decl in lazy.items():
        fn = getattr(front, attr)
        assert dict(pm.parse_hookimpl_opts(front, attr)) == decl.opts
        assert getattr(fn, "clawkit_order", None) == decl.order
        assert getattr(fn, "clawkit_events", None) == decl.events
    eager = {a for a in dir(front) if pm.parse_hookimpl_opts(front, a)}
    assert eager == set(lazy)


def test_a_module_the_reader_does_not_understand_is_imported(pkg, monkeypatch):
    (pkg / "odd.py").write_text("import functools\nfrom clawkit import hookimpl\n\n\n@hookimpl\n@functools.wraps(print)\n"
                                "def on_event(event):\n    pass\n")
    assert lazy_plugin("lazypkg_demo.odd") is None
    pm = _pm(monkeypatch, "lazypkg_demo.odd")
    assert isinstance(pm.get_plugin("demo"), types.ModuleType)


def test_a_module_that_differs_from_its_source_fails_loudly(pkg, monkeypatch):
    (pkg / "late.py").write_text("from clawkit import hookimpl\n\n\n@hookimpl\ndef on_event(event):\n    pass\n\n\n"
                                 "on_event = hookimpl(tryfirst=True)(lambda event: None)\n")
    pm = _pm(monkeypatch, "lazypkg_demo.late")
    with pytest.raises(LazyPluginError, match="lazypkg_demo.late.on_event: options"):
        pm.hook.on_event(event=None)


def test_the_module_passed_as_extra_takes_the_proxys_place(pkg, monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.setattr(plugins_mod, "_entry_points", lambda: [_ep("lazypkg_demo.heavy")])
    import lazypkg_demo.heavy as heavy

    pm = get_plugin_manager(extra=(heavy,))
    assert pm.get_plugin("demo") is heavy and len(pm.hook.before_llm_call.get_hookimpls()) == 1


def test_eager_switch_imports_every_plugin(pkg, monkeypatch):
    monkeypatch.setattr(plugins_mod, "_entry_points", lambda: [_ep("lazypkg_demo.hooks")])
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.setenv("CLAWKIT_EAGER_PLUGINS", "1")
    pm = get_plugin_manager()
    assert isinstance(pm.get_plugin("demo"), types.ModuleType) and "lazypkg_demo.heavy" in sys.modules


def test_every_installed_plugin_is_registered_lazily_as_pluggy_would_read_it(monkeypatch):
    """Each installed entry point: a LazyPlugin whose hooks, options, order, events and argument
    names are those of the imported module (no plugin falls back to an import at start)."""
    monkeypatch.delenv("CLAWKIT_EAGER_PLUGINS", raising=False)
    from importlib import import_module

    from pluggy._hooks import varnames

    reader = pluggy.PluginManager("clawkit")
    eager_only = []
    for ep in metadata.entry_points(group="clawkit"):
        lazy = lazy_plugin(ep.value)
        if lazy is None:
            eager_only.append(ep.name)
            continue
        module = import_module(ep.value)
        eager = {a: reader.parse_hookimpl_opts(module, a) for a in dir(module)}
        eager = {a: o for a, o in eager.items() if o}
        assert set(eager) == set(lazy._clawkit_hooks), ep.name
        for attr, decl in lazy._clawkit_hooks.items():
            fn = getattr(module, attr)
            assert (dict(eager[attr]), getattr(fn, "clawkit_order", None), getattr(fn, "clawkit_events", None),
                    tuple(varnames(fn)[0])) == (decl.opts, decl.order, decl.events, decl.argnames), (ep.name, attr)
    assert eager_only == []


def test_an_entry_point_naming_a_module_without_hooks_is_reported(pkg, monkeypatch, caplog):
    """A stale install (the entry point names the package, the hooks moved to a submodule) used to
    register a plugin that does nothing, silently: its config section then "does not exist"."""
    monkeypatch.setattr(plugins_mod, "_WARNED_EMPTY", set())
    with caplog.at_level("WARNING", logger="clawkit.plugins"):
        pm = _pm(monkeypatch, "lazypkg_demo")
        _pm(monkeypatch, "lazypkg_demo")  # managers are built per agent: said once
    assert pm.get_plugin("demo") is not None
    said = [r.getMessage() for r in caplog.records if r.name == "clawkit.plugins"]
    assert len(said) == 1 and "'demo'" in said[0] and "implements no hooks" in said[0] and "'lazypkg_demo'" in said[0]
    caplog.clear()
    with caplog.at_level("WARNING", logger="clawkit.plugins"):
        _pm(monkeypatch, "lazypkg_demo.hooks")
    assert not [r for r in caplog.records if r.name == "clawkit.plugins"]
