"""``DELETE /api/sessions/{session_id}``: forget a conversation (docs/serve.md, docs/forget.md).

The key must be allowed to run turns (role ``full``) for the session's agent. 204 when the session,
its sub-agent sessions and everything every plugin keeps about them are deleted; 404 for an unknown
session; 409 while a turn runs on it (here or in another process); 500 ``forget_incomplete`` naming
the plugin when one could not delete its part (the session is then kept, so the call can be repeated).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .httperror import HttpError


def delete_route(server: Any):
    runner = server.runner

    async def delete_session(request: Request) -> Response:
        from clawkit.forget import BusySessions, ForgetFailed, UnknownSessions

        sid = request.path_params["session_id"]
        agent = server.agent_for_session(request, sid, "run")
        if runner.busy(sid):
            raise HttpError(409, f"session {sid} is running a turn; delete it when the turn ends", code="session_busy")
        try:
            report = runner.agents[agent].delete_session(sid)
        except UnknownSessions:
            raise HttpError(404, f"no session {sid}", code="session_not_found") from None
        except BusySessions as exc:
            raise HttpError(409, str(exc), code="session_busy") from None
        except ForgetFailed as exc:
            return JSONResponse({"error": {"code": "forget_incomplete", "message": str(exc),
                                           "report": exc.report.as_json()}}, status_code=500)
        # the server's own database (--db) may not be the agent's store the hook reached
        server.replays.forget_sessions(report.sessions)  # no retry replays a forgotten answer
        server.broker.forget_sessions(report.sessions)
        owner = getattr(runner, "_owner", None)
        for s in report.sessions:
            if isinstance(owner, dict):
                owner.pop(s, None)
        return Response(status_code=204)

    return delete_session
