"""``clawkit demo``: a full agent turn with no API key and no network.

A loopback OpenAI-compatible server (the test kit's ``ModelServer``) plays a small
scripted model; the agent reaches it through the real provider plugin (clawkit-http, or litellm without it),
calls a real tool in the current directory, streams its answer and persists the
session — every part of clawkit but the intelligence. Point an agent YAML at a
real model (``clawkit run agent.yaml "…"``) for that.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any


def register(cli) -> None:
    p = cli.command("demo", help="run an agent turn against a built-in offline demo model (no API key needed)")
    p.add_argument("message", nargs="?", default="What is in this folder?")
    p.add_argument("--json", action="store_true", help="print the turn result as JSON")
    p.set_defaults(handler=cmd_demo)


_MARKER = re.compile(r"^\[(?:END )?[A-Z][A-Z ]* DATA\b.*\]$")


def demo_model(request: Any) -> Any:
    """The scripted "model": list the folder once, then describe what came back."""
    from ..testing.replies import Reply

    messages = request.messages
    tool_results = [m for m in messages if m.get("role") == "tool"]
    offered = {t["function"]["name"] for t in request.tools}
    if not tool_results and "list_dir" in offered:
        return Reply.tool_calls([("list_dir", {"path": "."})])
    if tool_results:
        # a data wrapper around the listing (the shield marks file names as untrusted) is not an entry
        listing = [line for line in str(tool_results[-1].get("content", "")).splitlines()
                   if line.strip() and not _MARKER.match(line)]
        shown = ", ".join(line.split()[0] for line in listing[:8])
        more = f" and {len(listing) - 8} more" if len(listing) > 8 else ""
        return Reply.text(f"This folder holds {len(listing)} entries: {shown}{more}. (Answered by the offline demo model.)")
    return Reply.text("Hello from the offline demo model. Install clawkit-tools to let me look around.")


def cmd_demo(args) -> int:
    from ..config import collect_sections, validate_agent
    from ..hooks import HookRunner
    from ..loop import Agent
    from ..testing.server import ModelServer
    from .core import run_and_report

    with ModelServer() as server:
        server.script(demo_model)
        pm = args.pm
        data = {
            "name": "demo",
            "model": {"name": "openai/clawkit-demo", "api_base": server.url, "api_key": "demo", "max_retries": 1},
            "instructions": "You are the clawkit demo agent.",
            "tools": ["list_dir"],
            "workspace": str(Path.cwd()),
        }
        cfg = validate_agent(data, "<demo>", {}, collect_sections(HookRunner(pm)))
        agent = Agent(cfg, pm=pm)
        def trailer(result) -> str:
            return f" · {len(result.tool_calls)} tool call(s) · saved in {agent.store.path}"

        return run_and_report(agent, args.message, as_json=args.json, trailer=trailer)
