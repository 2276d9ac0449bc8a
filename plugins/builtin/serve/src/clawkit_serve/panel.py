"""The web panel at ``/panel``: static pages whose JavaScript calls the same JSON API.

Why no server-side templates and no cookies: the panel signs in with an API key kept
in the tab's ``sessionStorage`` and sent as ``Authorization: Bearer`` on every call,
so the panel and the API share one auth path, one set of scopes and rate limits, and
there is no cookie a cross-site page could ride on (no CSRF surface). The pages carry
no data, so serving them needs no key. Plain JavaScript, no build step: the panel is
~350 lines in two files and has nothing an npm tool chain would add. What it reads beyond
the plain API (a scannable session list, a turn timeline) is in panel_api.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

HERE = Path(__file__).parent / "panel"
HEADERS = {"Content-Security-Policy": "default-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


def static_files() -> StaticFiles:
    return StaticFiles(directory=str(HERE))


def routes(server: Any) -> list[Route]:
    async def page(request: Request):
        return FileResponse(HERE / "index.html", headers=HEADERS)

    async def root(request: Request):
        return RedirectResponse("/panel/")

    return [Route("/panel", root), Route("/panel/", page), Route("/", root)]
