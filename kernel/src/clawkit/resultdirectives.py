"""Tool-response directives (seed 001, Approach C): the kernel's strip step.

A tool result whose content is a JSON object with a ``__directives`` key carries
instructions for the *harness*, not for the model::

    {"status": "migrated", "__directives": {"requireBeforeNext": ["run_tests"],
                                            "escalateToOwner": false, "expires": {"calls": 3}}}

Right after a tool runs, before any ``after_tool_call`` plugin (truncation, scanning,
wrapping) sees the result, :func:`strip` removes the block from the content and moves
it to ``result.metadata["directives"]`` as ``{"block": {...}, "untrusted_source": bool}``
— ``untrusted_source`` is whether the tool itself marked its result untrusted (an MCP
server, a web fetch) before any plugin could mark it. The model never sees the block;
whether it is obeyed (and how) is a plugin's decision (the ``sequence`` plugin).
"""

from __future__ import annotations

import json
from typing import Any

KEY = "__directives"


def strip(result: Any) -> Any:
    """``result`` with a top-level ``__directives`` block moved out of its content (same object)."""
    content = result.content
    if not isinstance(content, str) or KEY not in content:
        return result
    text = content.strip()
    if not text.startswith("{"):
        return result
    try:
        data = json.loads(text)
    except ValueError:
        return result
    if not isinstance(data, dict) or KEY not in data:
        return result
    block = data.pop(KEY)
    result.content = json.dumps(data, ensure_ascii=False, indent=2 if "\n" in text else None)
    result.metadata["directives"] = {"block": block, "untrusted_source": result.metadata.get("untrusted") is True}
    return result
