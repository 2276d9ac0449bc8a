"""Agent.close(): plugins stop and join what they started (``agent_closing``), once, isolated;
an agent nobody closed is closed at interpreter exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from clawkit import hookimpl


class ThreadPlugin:
    """Starts a worker thread per agent and joins it when the agent closes."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.closed: list[tuple[str, object]] = []

    @hookimpl
    def register_tools(self, register, agent):
        self.thread = threading.Thread(target=self.stop.wait, name="test-plugin-worker", daemon=True)
        self.thread.start()

    @hookimpl
    def agent_closing(self, agent, runtime):
        self.closed.append((agent.name, runtime))
        self.stop.set()
        self.thread.join(timeout=2)


class BrokenCloser:
    @hookimpl
    def agent_closing(self, agent):
        raise RuntimeError("cannot close")


def test_close_joins_plugin_threads_once_and_isolates_failures(make_agent):
    plugin = ThreadPlugin()
    agent = make_agent(["hi"], plugins=(BrokenCloser(), plugin))
    assert agent.run("hello").reply == "hi"
    assert plugin.thread.is_alive()
    events: list[str] = []
    agent.pm.register(type("Watch", (), {"on_event": hookimpl(lambda self, event: events.append(event.type))})())
    agent.hooks._cache.clear()
    agent.close()
    agent.close()  # idempotent
    assert plugin.closed == [("test-agent", agent)] and not plugin.thread.is_alive()
    assert "hook.error" in events and "agent.close" in events


def test_an_agent_never_closed_is_closed_at_exit(tmp_path):
    code = textwrap.dedent(f"""
        import threading
        from clawkit import hookimpl
        from clawkit.testing.scripted import ScriptedProvider
        from clawkit.config import validate_agent
        from clawkit.loop import Agent
        from clawkit.plugins import get_plugin_manager

        class P:
            @hookimpl
            def agent_closing(self, agent):
                print("closed", agent.name, flush=True)

        pm = get_plugin_manager(extra=[P()], load_entry_points=False)
        cfg = validate_agent({{"name": "forgotten", "model": "m", "workspace": {str(tmp_path)!r}}}, "<t>", {{}})
        agent = Agent(cfg, pm=pm, provider=ScriptedProvider(["ok"]))
        agent.run("hi")
        print("exiting", flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["exiting", "closed forgotten"]


def test_an_agent_closes_only_a_store_it_opened(make_agent):
    """A store passed in (a sub-agent shares its parent's) stays open for its owner."""
    from clawkit.loop import Agent

    parent = make_agent(["parent reply"])
    child = Agent(parent.config, pm=parent.pm, provider=parent.provider, store=parent.store)
    child.close()
    assert parent.run("still there?").reply == "parent reply"  # the store still works
    parent.close()
    try:
        parent.store.conn.execute("SELECT 1")
    except Exception as exc:
        assert "closed" in str(exc)
    else:
        raise AssertionError("the owner's close left its store open")
