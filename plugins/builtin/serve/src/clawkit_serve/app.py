"""The ASGI application: auth, limits, errors, lifespan; the routes live in api_*.py."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from .approvals import ApprovalBroker
from .guard import LoopbackOnly, loads_bounded
from .keys import ApiKey, KeyStore, RateLimiter
from .httperror import ERROR_TYPES, HttpError, error_response  # noqa: F401  (app.error_response)

log = logging.getLogger("clawkit.serve")


@dataclass
class ServeOptions:
    max_body: int = 1_048_576
    rate_per_minute: int = 120
    cors_origins: list[str] = field(default_factory=list)
    dev: bool = False  # no keys: every request acts as a full key (loopback only; checked by the CLI)
    shutdown_timeout: float = 30.0
    sweep_every: float = 30.0
    header_timeout: float = 10.0  # seconds a connection has to send a request's headers (see guard.py)
    max_connections: int | None = None  # connections at once (default: what the open-file limit leaves)
    body_timeout: float = 30.0  # seconds a request body may take to arrive (a trickled body is a 408)


DEV_KEY = ApiKey(id="dev", name="development (no keys)", role="full")


class Server:
    """What the routes share: the runner, keys, approvals, options."""

    def __init__(self, runner: Any, keys: KeyStore, broker: ApprovalBroker, options: ServeOptions):
        self.runner, self.keys, self.broker, self.options = runner, keys, broker, options
        self.limiter = RateLimiter(options.rate_per_minute)
        from .replays import Replays
        from .request_log import RequestLog

        # retries of a chat completion attach to its turn (replays.py), also after a restart (request_log.py)
        self.replays = Replays(log=RequestLog(keys.conn, lock=getattr(keys, "_lock", None)))

    def authorize(self, request: Request, action: str = "read", agent: str | None = None) -> ApiKey:
        """The caller's key, or an HttpError: 401 (no/unknown key), 403 (role or agent), 429 (rate)."""
        key = request.scope.get("clawkit.key")
        if key is None:
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if self.options.dev:  # no keys exist; loopback only (LoopbackOnly): any bearer passes, as the SDKs send one
                key = DEV_KEY
            elif scheme.lower() != "bearer" or not token.strip():
                raise HttpError(401, "missing API key: send 'Authorization: Bearer <key>'", code="missing_api_key",
                                headers={"WWW-Authenticate": "Bearer"})
            else:
                key = self.keys.authenticate(token.strip())
                if key is None:
                    raise HttpError(401, "invalid or revoked API key", code="invalid_api_key",
                                    headers={"WWW-Authenticate": "Bearer"})
            ok, wait = self.limiter.allow(key)
            if not ok:
                raise HttpError(429, f"rate limit of key {key.id} exceeded; retry in {wait:.1f} s", code="rate_limited",
                                headers={"Retry-After": str(max(1, round(wait)))})
            request.scope["clawkit.key"] = key
        if not key.can(action):
            raise HttpError(403, f"key {key.id} (role {key.role}) may not {action}", code="forbidden_role")
        if agent is not None and not key.allows_agent(agent):
            raise HttpError(403, f"key {key.id} is not scoped to agent {agent!r}", code="forbidden_agent")
        return key

    async def read_json(self, request: Request) -> dict[str, Any]:
        """The body as a JSON object, at most ``max_body`` bytes (413 past it, counted as it streams)."""
        limit = self.options.max_body
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise HttpError(413, f"request body of {declared} bytes exceeds the limit of {limit} bytes", code="too_large")
        chunks: list[bytes] = []

        async def receive() -> None:
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise HttpError(413, f"request body exceeds the limit of {limit} bytes", code="too_large")
                chunks.append(chunk)

        try:
            await asyncio.wait_for(receive(), self.options.body_timeout)
        except asyncio.TimeoutError:
            raise HttpError(408, f"request body did not arrive within {self.options.body_timeout:g} s",
                            code="body_timeout", headers={"Connection": "close"}) from None
        try:
            body = loads_bounded(b"".join(chunks))
        except ValueError as exc:
            raise HttpError(400, f"request body is not JSON: {exc}", code="bad_json") from None
        if not isinstance(body, dict):
            raise HttpError(400, "request body must be a JSON object", code="bad_json")
        return body

    def agent_for_session(self, request: Request, session_id: str, action: str = "read") -> str:
        from .runner import UnknownSession

        self.authorize(request, action)
        try:
            agent = self.runner.agent_of(session_id)
        except UnknownSession:
            raise HttpError(404, f"no session {session_id}", code="session_not_found") from None
        self.authorize(request, action, agent)
        return agent

    def db_of(self, agent: str) -> str:
        return str(self.runner.agents[agent].store.path)


def create_app(server: Server) -> Starlette:
    from . import api_native, api_openai, panel, panel_api
    from .runner import Checkpointed

    async def on_http_error(request: Request, exc: HttpError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.code, exc.headers)

    async def on_starlette_error(request: Request, exc: Exception) -> JSONResponse:
        status = getattr(exc, "status_code", 500)
        if status == 404:
            message = f"no route {request.method} {request.url.path} (see docs/serve.md)"
        elif status == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
        else:
            message = str(getattr(exc, "detail", "") or exc)
        return error_response(status, message, {404: "unknown_route", 405: "method_not_allowed"}.get(status),
                              dict(getattr(exc, "headers", None) or {}))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    @asynccontextmanager
    async def lifespan(app: Starlette):
        loop = asyncio.get_running_loop()
        server.runner.hub.bind(loop)
        server.broker.on_orphan_answer = lambda row: server.runner.resume_later(row["agent"], row["session_id"])
        server.runner.waiting_sessions = server.broker.waiting_sessions
        server.runner.before_turn = server.broker.supersede
        await server.runner.warm()
        sweeper = asyncio.ensure_future(_sweep(server))
        try:
            yield
        finally:
            sweeper.cancel()
            await server.runner.shutdown(server.options.shutdown_timeout)  # once more: idempotent
            await server.runner.close()

    async def on_checkpointed(request: Request, exc: Exception) -> JSONResponse:
        return error_response(503, str(exc), "checkpointed", {"Retry-After": "5"})

    async def on_database_error(request: Request, exc: Exception) -> JSONResponse:
        from clawkit.cli import database_error

        log.error("clawkit serve: %s %s: %s", request.method, request.url.path, database_error(exc))
        return error_response(503, database_error(exc) or "the state database cannot be used", "database_unavailable",
                              {"Retry-After": "5"})

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        log.error("clawkit serve: %s %s failed", request.method, request.url.path, exc_info=exc)
        return error_response(500, f"internal error ({type(exc).__name__}); the server log has the details",
                              "internal_error")

    routes = [Route("/healthz", healthz), *api_openai.routes(server), *api_native.routes(server),
              *panel_api.routes(server), *panel.routes(server), Mount("/panel/static", app=panel.static_files(), name="panel-static")]
    import sqlite3  # the PostgreSQL backend's errors derive from sqlite3's

    from starlette.exceptions import HTTPException

    handlers = {HttpError: on_http_error, HTTPException: on_starlette_error, Checkpointed: on_checkpointed, sqlite3.DatabaseError: on_database_error,
                RecursionError: on_error, Exception: on_error}
    app = Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)
    app.add_middleware(TraceContext)
    if server.options.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=server.options.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type", "X-Clawkit-Session", "X-Clawkit-Wait", "traceparent"],
                           expose_headers=["X-Clawkit-Session"])
    if server.options.dev:  # no keys: only loopback names and origins (DNS rebinding), outermost
        app.add_middleware(LoopbackOnly, allowed_origins=server.options.cors_origins)
    app.state.server = server
    return app


class TraceContext:
    """The request's W3C ``traceparent`` header, for telemetry: the turns a request starts join the
    caller's trace (``clawkit.context.incoming_traceparent``; tasks copy it when they are created)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from clawkit.context import incoming_traceparent

        value = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"traceparent"), "")
        token = incoming_traceparent.set(value)
        try:
            await self.app(scope, receive, send)
        finally:
            incoming_traceparent.reset(token)


async def _sweep(server: Server) -> None:
    """Expire requests nobody answered in time, and resume their turns so the model is told."""
    while True:
        try:
            server.broker.sweep()
        except Exception:
            log.exception("approval sweep failed")
        await asyncio.sleep(server.options.sweep_every)


def uvicorn_server(app: Starlette, **config: Any) -> Any:
    """A uvicorn server whose shutdown first settles the turns: running ones get
    ``shutdown_timeout`` to finish, ones waiting for approval are checkpointed at once —
    before uvicorn waits for the open requests those turns hold."""
    import uvicorn

    class ClawkitServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            server: Server = app.state.server
            started = time.monotonic()
            await server.runner.shutdown(server.options.shutdown_timeout)
            log.info("clawkit serve: turns settled in %.1f s", time.monotonic() - started)
            await super().shutdown(sockets=sockets)

    from .guard import BACKLOG, connection_cap, guarded_protocol, raise_open_files

    options = app.state.server.options
    config.setdefault("timeout_graceful_shutdown", options.shutdown_timeout + 5)
    # idle and slow sockets cannot starve the server: header timeout, idle keep-alive, connection cap
    cap = connection_cap(options.max_connections, raise_open_files())
    config.setdefault("http", guarded_protocol(options.header_timeout, cap))
    config.setdefault("timeout_keep_alive", 5)
    config.setdefault("backlog", BACKLOG)  # what one accept burst may add on top of the cap
    return ClawkitServer(uvicorn.Config(app, **config))


def build(paths: list[str | Path], db: str | Path, options: ServeOptions, overrides: dict | None = None,
          approval_timeout: float = 3600.0) -> Starlette:
    """The app for ``clawkit serve``: agents from ``paths``, keys and approvals in ``db``."""
    from .keys import connect
    from .runner import InProcessRunner

    conn = connect(db)
    keys = KeyStore(conn)
    queued = _queue_backend(db, paths, overrides)
    if queued is not None:
        runner, broker = queued
        return create_app(Server(runner, keys, broker, options))
    broker = ApprovalBroker(conn, timeout=approval_timeout)
    runner = InProcessRunner(paths, broker.approver, overrides=overrides)
    broker.publish = runner.hub.publish
    return create_app(Server(runner, keys, broker, options))


def _queue_backend(db: str | Path, paths: list[str | Path], overrides: dict | None) -> tuple[Any, Any] | None:
    """With a ``postgresql://`` database and a plugin that runs a turn queue there
    (``open_turn_queue``; clawkit-workers), turns are enqueued for ``clawkit worker`` processes
    instead of run here: that plugin provides the runner and the approval broker."""
    if not str(db).startswith(("postgresql://", "postgres://")):
        return None
    from clawkit.plugins import get_plugin_manager

    queue = get_plugin_manager().hook.open_turn_queue(url=str(db))
    if queue is None or not hasattr(queue, "serve_backend"):
        return None
    from .approvals import ApprovalError
    from .runner import Checkpointed, EventHub, SessionBusy, UnknownSession

    errors = {"ApprovalError": ApprovalError, "Checkpointed": Checkpointed, "SessionBusy": SessionBusy,
              "UnknownSession": UnknownSession}
    overrides = {**(overrides or {}), "state_db": str(db)}  # the sessions the workers write
    return queue.serve_backend(list(paths), overrides=overrides, hub=EventHub(), errors=errors)
