"""Plugin loading: entry points, switches, tracing, and loud failures."""

from __future__ import annotations

import types

import pytest

from clawkit import hookimpl
from clawkit import plugins as plugins_mod
from clawkit.hooks import HookRunner
from clawkit.plugins import PluginError, get_plugin_manager, plugin_infos


def test_a_fresh_manager_per_call():
    class A:
        @hookimpl
        def on_event(self, event):
            pass

    # narrow: the loader's own test (a fresh manager per call)
    pm1 = get_plugin_manager(extra=(A(),), load_entry_points=False)
    pm2 = get_plugin_manager(load_entry_points=False)  # narrow: the loader with nothing at all
    assert pm1 is not pm2
    assert pm1.hook.on_event.get_hookimpls() and not pm2.hook.on_event.get_hookimpls()


def test_entry_point_plugins_load_and_report_their_hooks(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    pm = get_plugin_manager()
    infos = {i.name: i for i in plugin_infos(pm)}
    assert infos["litellm"].distribution == "clawkit-litellm"
    assert "register_providers" in infos["litellm"].hooks


def test_load_plugins_switch(monkeypatch):
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "")
    assert plugin_infos(get_plugin_manager()) == []
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit-litellm")
    assert [i.name for i in plugin_infos(get_plugin_manager())] == ["litellm"]
    monkeypatch.setenv("CLAWKIT_LOAD_PLUGINS", "clawkit_litellm, nothing-else")  # normalised names
    assert [i.name for i in plugin_infos(get_plugin_manager())] == ["litellm"]


def test_per_agent_disable(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    assert "litellm" not in [i.name for i in plugin_infos(get_plugin_manager(disabled=["litellm"]))]


def test_misspelled_hook_implementation_fails_loudly():
    class Typo:
        @hookimpl
        def before_tool_cal(self, ctx, call):
            pass

    with pytest.raises(PluginError, match="before_tool_cal"):
        # narrow: the loader's own test (a misspelled hook fails loudly)
        get_plugin_manager(extra=(Typo(),), load_entry_points=False)


class FakeEP:
    def __init__(self, name, dist, obj=None, error=None):
        self.name = name
        self.dist = types.SimpleNamespace(name=dist, version="1.0")
        self._obj, self._error = obj, error

    def load(self):
        if self._error:
            raise self._error
        return self._obj or types.SimpleNamespace()


def test_duplicate_plugin_names_are_an_error(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.setattr(plugins_mod, "_entry_points", lambda: [FakeEP("memory", "clawkit-memory"), FakeEP("memory", "acme-memory")])
    with pytest.raises(PluginError, match="two distributions register the clawkit plugin 'memory': clawkit-memory and acme-memory"):
        get_plugin_manager()


def test_a_plugin_that_fails_to_import_is_named(monkeypatch):
    monkeypatch.delenv("CLAWKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.setattr(plugins_mod, "_entry_points", lambda: [FakeEP("broken", "clawkit-broken", error=ImportError("no module named zlibx"))])
    with pytest.raises(PluginError, match="plugin 'broken' from clawkit-broken failed to import"):
        get_plugin_manager()


def test_trace_prints_every_hook_call_with_timing(monkeypatch, capsys):
    monkeypatch.setenv("CLAWKIT_TRACE_PLUGINS", "1")

    class Watch:
        @hookimpl
        def on_event(self, event):
            pass

    # narrow: the loader's tracing of one probe plugin
    pm = get_plugin_manager(extra=(Watch(),), load_entry_points=False)
    HookRunner(pm).call_sync("on_event", event=None)  # the kernel's own calls
    pm.hook.on_event(event=None)  # direct pluggy calls
    err = capsys.readouterr().err
    assert err.count("[clawkit trace] on_event") == 2 and " ms" in err


def test_hook_runner_orders_like_pluggy():
    order = []

    class First:
        @hookimpl(tryfirst=True)
        def on_event(self, event):
            order.append("first")

    class Plain:
        @hookimpl
        def on_event(self, event):
            order.append("plain")

    class Last:
        @hookimpl(trylast=True)
        def on_event(self, event):
            order.append("last")

    # narrow: hook ordering among three probes only
    pm = get_plugin_manager(extra=(Last(), Plain(), First()), load_entry_points=False)
    HookRunner(pm).call_sync("on_event", event=None)
    kernel_order = list(order)
    order.clear()
    pm.hook.on_event(event=None)
    assert kernel_order == order == ["first", "plain", "last"]
