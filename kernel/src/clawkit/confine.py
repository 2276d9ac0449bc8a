"""Confining a path a model gave to a third-party tool to the agent's workspace.

The builtin file tools (clawkit-tools) resolve paths with more (capability grants, governed
files, device files); a tool of your own that takes a path uses this::

    from clawkit.confine import confine_path

    def read_note(name: str, ctx=None) -> str:
        path = confine_path(ctx, name)          # ToolError when it leaves the workspace
        return path.read_text()

A relative path is relative to ``ctx.workspace``; symbolic links are followed before the
check, so a link inside the workspace that points out of it is refused too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .tools import ToolError


def confine_path(ctx: Any, raw: str | os.PathLike) -> Path:
    """The real path of ``raw`` (relative to ``ctx.workspace``) inside the workspace, or
    :class:`~clawkit.tools.ToolError` naming the path and where it leads."""
    if not isinstance(raw, (str, os.PathLike)) or "\x00" in str(raw):
        raise ToolError("path must be a string without NUL characters")
    workspace = os.path.realpath(str(ctx.workspace))
    real = os.path.realpath(os.path.join(workspace, os.path.expanduser(str(raw))))
    if real != workspace and not real.startswith(workspace.rstrip(os.sep) + os.sep):
        raise ToolError(f"{str(raw)!r} is outside the workspace {workspace} (it resolves to {real}); refused")
    return Path(real)
