"""pytest11 plugin: fixtures every clawkit plugin author gets by installing clawkit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .scripted import ScriptedProvider

try:  # the HTTP model server
    from .server import model_server  # noqa: F401
except ImportError:  # pragma: no cover - while the server module is being written
    pass


@pytest.fixture(autouse=True, scope="session")
def _clawkit_home(tmp_path_factory) -> None:
    """Tests never write the user's per-user clawkit state (the workspace index ``clawkit logs``
    reads): ``CLAWKIT_HOME`` points at a temporary folder unless the run set it."""
    import os

    if not os.environ.get("CLAWKIT_HOME"):
        os.environ["CLAWKIT_HOME"] = str(tmp_path_factory.mktemp("clawkit-home"))


def pytest_addoption(parser) -> None:
    parser.addoption("--record-cassettes", action="store_true", default=False,
                     help="clawkit: record model traffic into cassettes (default: replay them; or CLAWKIT_RECORD=1)")


def recording(config) -> bool:
    """Record when asked (``--record-cassettes`` or ``CLAWKIT_RECORD=1``); replay otherwise."""
    return bool(config.getoption("--record-cassettes", default=False)) or os.environ.get("CLAWKIT_RECORD", "").lower() in ("1", "true", "yes")


@pytest.fixture
def cassette(request):
    """``cassette(upstream=None, path=None)`` → a started :class:`clawkit.testing.cassette.CassetteServer`;
    give its ``url`` to the model as ``api_base``.

    Replays by default: the file must exist, nothing is forwarded, and any connection beyond
    loopback raises for the rest of the test. With ``--record-cassettes`` (or ``CLAWKIT_RECORD=1``)
    it forwards to ``upstream`` (default ``CLAWKIT_CASSETTE_UPSTREAM``) and writes the file at the
    end. The path comes from the argument, a ``@pytest.mark.cassette(path)`` marker, or
    ``cassettes/<test name>.json`` beside the test file. A replayed request that matches nothing
    fails the test with a diff against the nearest recorded request.
    """
    from .cassette import CassetteServer, loopback_only

    record = recording(request.config)
    servers: list[CassetteServer] = []
    guard = None
    if not record:
        guard = loopback_only().__enter__()

    def factory(upstream: str | None = None, path: str | Path | None = None) -> CassetteServer:
        marker = request.node.get_closest_marker("cassette")
        where = Path(path or (marker.args[0] if marker and marker.args else f"cassettes/{request.node.name}.json"))
        if not where.is_absolute():
            where = Path(request.node.path).parent / where
        server = CassetteServer(where, record=record, upstream=upstream or os.environ.get("CLAWKIT_CASSETTE_UPSTREAM")).start()
        servers.append(server)
        return server

    try:
        yield factory
    finally:
        if guard is not None:
            guard.__exit__(None, None, None)
        for server in servers:
            server.stop()
    for server in servers:
        server.check()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty agent workspace directory."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def make_agent(workspace: Path, request):
    """``make_agent(script=[...], tools=[...], plugins=[...], plugin_config={...}, narrow=None, **config)`` → an Agent.

    Loads **every installed plugin** (the ``clawkit`` entry points, as ``clawkit run`` does)
    plus the plugin objects/modules in ``plugins``; ``plugin_config`` is the agent YAML's
    ``plugins:`` mapping (per-plugin sections; ``{name: {enabled: false}}`` turns one off).
    ``narrow="<why>"`` (or a ``@pytest.mark.narrow("<why>")`` on the test or module) loads only
    ``plugins`` — for a unit test of one plugin's mechanics; see :mod:`clawkit.testing.install`.
    ``provider="config"`` uses the provider the config's ``model`` names instead of a scripted
    one. ``script`` feeds a :class:`ScriptedProvider` available as ``agent.provider``.
    """
    from ..config import validate_agent, collect_sections
    from ..hooks import HookRunner
    from ..loop import Agent
    from .install import plugin_manager, resolve_narrowing

    agents: list[Agent] = []

    def factory(script: Any = (), *, plugins: tuple = (), plugin_config: dict | None = None, narrow: str | None = None,
                load_entry_points: bool | None = None, provider: Any = None, approver: Any = None, **config: Any) -> Agent:
        data = {"name": "test-agent", "model": "scripted/test", "workspace": str(workspace), **config}
        if plugin_config:
            data["plugins"] = plugin_config
        reason = resolve_narrowing(narrow, load_entry_points, request.node)
        pm = plugin_manager(*plugins, narrow=reason, plugin_config=plugin_config)
        sections = collect_sections(HookRunner(pm))
        cfg = validate_agent(data, "<test>", {}, sections)
        if provider is None:
            provider = ScriptedProvider(script)
        elif provider == "config":
            provider = None  # the provider the config names, from the plugins' registry
        agent = Agent(cfg, pm=pm, provider=provider, approver=approver)
        agent.test_install = reason or "full"  # type: ignore[attr-defined]  # what this agent loaded, for asserts
        agents.append(agent)
        return agent

    yield factory
    for a in agents:
        a.close()


@pytest.fixture
def http_agent(make_agent, model_server):
    """``http_agent(*script, plugins=..., plugin_config=..., narrow=None, **config)`` → an Agent whose
    model is the loopback ``model_server`` (scripted with ``script``), reached over real HTTP through
    ``clawkit-http``, the provider ``clawkit run`` gives ``openai/…`` models (the test is skipped when
    it is not installed). Every installed plugin is loaded unless the test narrows (then clawkit-http
    and ``plugins``). Like ``make_agent``, its workspace is the ``workspace`` fixture's folder."""
    provider_plugin = pytest.importorskip("clawkit_http")

    def factory(*script: Any, plugins: tuple = (), **config: Any):
        if script:
            model_server.script(*script)
        config.setdefault(
            "model",
            {"name": "openai/test-model", "api_base": model_server.url, "api_key": "sk-test", "timeout": 10, "max_retries": 0},
        )
        return make_agent(plugins=(provider_plugin, *plugins), provider="config", **config)

    return factory


def pytest_configure(config: Any) -> None:
    """Register the ``cassette`` marker; keep the audit key and anchors of test runs out of the
    user's config directory. (One function: a second ``pytest_configure`` in this module would
    replace the first.)"""
    import os
    import tempfile

    config.addinivalue_line("markers", "cassette(path): this test's cassette file (default: cassettes/<test name>.json beside the test)")
    config.addinivalue_line("markers", "narrow(reason): make_agent/http_agent in this test load only the plugins it passes, "
                            "not the full install (the default); the reason says why")

    if not os.environ.get("CLAWKIT_AUDIT_HOME"):
        os.environ["CLAWKIT_AUDIT_HOME"] = tempfile.mkdtemp(prefix="clawkit-audit-")


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session → its URL ``postgresql://clawkit@127.0.0.1:PORT/clawkit``.

    Debian's server binaries (``apt-get install postgresql``) in a temporary data directory on a
    free loopback port, stopped and removed at the session's end (see
    :mod:`clawkit.testing.postgres`). Skipped, with the reason, only when the binaries are not
    installed — and never under ``CI=true``, where their absence fails the test instead. The URL is a
    ``str`` whose ``.server`` is the :class:`~clawkit.testing.postgres.PostgresServer`. With
    pytest-xdist each worker process runs its own server. Tests that need an empty database use
    ``postgres_db``.
    """
    from .postgres import PostgresServer, PostgresUnavailable, PostgresURL

    try:
        server = PostgresServer()
    except PostgresUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{exc} (CI=true: PostgreSQL tests must run)")
        pytest.skip(str(exc))
    server.start()
    try:
        yield PostgresURL(server.url, server)
    finally:
        server.stop()


@pytest.fixture
def postgres_db(postgres_server):
    """A fresh, empty database on the session's ``postgres_server`` → its URL (one per test)."""
    return postgres_server.server.create_database()
