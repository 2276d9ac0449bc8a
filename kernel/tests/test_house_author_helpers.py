"""Helpers the docs promise a plugin author: ``clawkit.confine.confine_path`` and
``RecordedRequest.system`` (docs/testing.md, docs/hooks.md)."""

from __future__ import annotations

import os
import types

import pytest

from clawkit.confine import confine_path
from clawkit.testing.server import RecordedRequest
from clawkit.tools import ToolError


def test_confine_path_keeps_a_tool_inside_the_workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    os.symlink(tmp_path, ws / "out")
    ctx = types.SimpleNamespace(workspace=ws)
    assert confine_path(ctx, "data") == (ws / "data").resolve()
    assert confine_path(ctx, str(ws / "data" / "x.txt")) == (ws / "data" / "x.txt").resolve()
    for bad in ("../secret", "/etc/passwd", "out/anything", "data/../../x"):
        with pytest.raises(ToolError, match="outside the workspace"):
            confine_path(ctx, bad)


def test_recorded_request_system_in_both_wire_formats():
    openai = RecordedRequest("POST", "/v1/chat/completions", {}, {"messages": [
        {"role": "system", "content": "classify this"}, {"role": "user", "content": "hi"}]})
    anthropic = RecordedRequest("POST", "/v1/messages", {}, {"system": [{"type": "text", "text": "classify this"}],
                                                            "messages": [{"role": "user", "content": "hi"}]})
    assert openai.system == anthropic.system == "classify this"
