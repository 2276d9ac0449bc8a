"""The error a route raises for an HTTP error response (its own module: the routes and the
app that mounts them both use it, and neither imports the other for it)."""

from __future__ import annotations

from starlette.responses import JSONResponse


class HttpError(Exception):
    def __init__(self, status: int, message: str, *, code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 405: "invalid_request_error", 408: "timeout_error", 409: "conflict_error",
               410: "gone_error", 413: "request_too_large",
               429: "rate_limit_error", 502: "upstream_error", 503: "unavailable"}


def error_response(status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    """OpenAI-style error bodies, so OpenAI clients raise their usual exceptions."""
    body = {"error": {"message": message, "type": ERROR_TYPES.get(status, "server_error"), "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)
