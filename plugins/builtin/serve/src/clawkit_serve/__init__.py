"""clawkit-serve: ``clawkit serve AGENT.yaml…`` — agents as an HTTP service.

An OpenAI-compatible ``/v1/chat/completions``, a native API (sessions, live events,
approvals, the audit ledger), bearer API keys kept hashed in the state database
(``clawkit keys``), durable approvals, and a web panel at ``/panel``. Starlette and
uvicorn load only when the server starts: ``clawkit --help`` never imports them.
See docs/serve.md.
"""

from __future__ import annotations

from clawkit import hookimpl


@hookimpl
def register_config(register):
    from .config import ServeConfig

    register("serve", ServeConfig)


@hookimpl
def register_commands(cli):
    from .cli import register

    register(cli)


@hookimpl
def open_api_keys(db):
    """The keys of ``clawkit keys`` for another HTTP front-end (``clawkit mcp serve --http``)."""
    from .keys import KeyStore, connect

    return KeyStore(connect(db))


@hookimpl
def forget_sessions(store, session_ids):
    """The request log's rows (a reply's text is in ``outcome``) and the approvals asked in these
    sessions (the call's arguments) go with them."""
    from clawkit.forget import delete_keyed

    return {"requests": delete_keyed(store.conn, "serve_requests", "session_id", session_ids),
            "approvals": delete_keyed(store.conn, "serve_approvals", "session_id", session_ids)}
