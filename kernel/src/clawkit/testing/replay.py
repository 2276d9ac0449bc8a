"""``clawkit run --record/--replay``: a cassette run is hermetic, so its replay is the same run.

What a run depends on besides the model's answers, and how a cassette run pins it
(docs/testing.md, "Record and replay from the command line"):

* **state** — earlier sessions, memory recall of them, anything a plugin keeps between
  runs: the recording and every replay start from a fresh, temporary state (the session
  database and each plugin section's ``db`` file point into a temporary folder, removed
  afterwards). So the recorded session is never recalled into its own replay.
* **place** — the workspace's absolute path, the temporary state folder, the home folder
  and the host's OS line are replaced by placeholders (``<workspace>``…) in the cassette,
  in both the requests and the responses, so a cassette replays in another folder.
* **the world the tools saw** — the recording keeps each tool's raw result (before
  ``after_tool_call``) in the cassette; a replay still runs the gates (policy, shield,
  approvals) and the post-processing, but answers the execution from the cassette: no
  side effect happens twice, and a listing that now shows the cassette file itself does
  not change the run. A call the recording never made is a mismatch, with a diff.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import platform
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..hookspecs import hookimpl
from ..types import ToolResult
from .cassette import Cassette, CassetteError, pin, unpin


def place_pins(workspace: str | Path, state_dir: str | Path) -> dict[str, str]:
    """This run's place-dependent values and their placeholders."""
    ws = os.path.abspath(workspace)
    pins = {ws: "<workspace>", os.path.realpath(ws): "<workspace>", str(state_dir): "<state>",
            os.path.realpath(state_dir): "<state>",
            f"{platform.system()} {platform.release()} ({platform.machine()})".strip(): "<os>"}
    home = os.path.expanduser("~")
    if len(home) > 1:
        pins.setdefault(home, "<home>")  # longest first: a workspace under home is pinned whole
    return pins


def hermetic_overrides(pm: Any, state_dir: Path) -> dict[str, Any]:
    """Config overrides pointing the session database and every plugin section's ``db`` file
    into ``state_dir`` (``--set``-style dotted keys)."""
    from ..config import collect_sections
    from ..hooks import HookRunner

    out: dict[str, Any] = {"state_db": str(state_dir / "state.db")}
    for name, model, top_level in collect_sections(HookRunner(pm)):
        if not top_level and "db" in getattr(model, "model_fields", {}):
            out[f"plugins.{name}.db"] = str(state_dir / f"{name}.db")
    return out


class TemporaryState:
    """A temporary state folder, removed on exit."""

    def __enter__(self) -> Path:
        self.path = Path(tempfile.mkdtemp(prefix="clawkit-cassette-"))
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _call_form(call: Any, pins: dict[str, str]) -> dict[str, Any]:
    return {"name": call.name, "arguments": json.loads(pin(json.dumps(call.arguments, sort_keys=True), pins))}


class ToolTape:
    """The ``durable_steps`` plugin of a cassette run: the model calls run as usual (the cassette
    server answers them); each tool execution is recorded, or answered from the cassette."""

    def __init__(self, cassette: Cassette, *, record: bool, pins: dict[str, str]):
        self.cassette, self.record, self.pins = cassette, record, pins
        self.mismatches: list[str] = []
        self._used: set[int] = set()
        self._lock = asyncio.Lock()

    @hookimpl
    def durable_steps(self, ctx: Any) -> "ToolTape":
        return self

    async def model(self, ctx: Any, request: Any, call: Any) -> Any:
        return await call()

    def reserve(self, ctx: Any, calls: list[Any]) -> None:
        pass

    async def tool(self, ctx: Any, call: Any, run: Any) -> ToolResult:
        form = _call_form(call, self.pins)
        if self.record:
            res = await run()
            self.cassette.tools.append({**form, "content": pin(res.content, self.pins), "is_error": res.is_error})
            return res
        if self.cassette.tools is None:  # recorded without tool results: the tools run, as they always did
            return await run()
        async with self._lock:
            tape = self.cassette.tools
            index = next((i for i, t in enumerate(tape) if i not in self._used
                          and {"name": t.get("name"), "arguments": t.get("arguments")} == form), None)
            if index is None:
                self.mismatches.append(self._mismatch(form))
                raise CassetteError(self.mismatches[-1])
            self._used.add(index)
        found = tape[index]
        return ToolResult(call_id=call.id, name=call.name, content=unpin(str(found.get("content", "")), self.pins),
                          is_error=bool(found.get("is_error")))

    def _mismatch(self, form: dict[str, Any]) -> str:
        mine = json.dumps(form, sort_keys=True, indent=1).splitlines()
        tape = self.cassette.tools
        head = f"cassette {self.cassette.path}: the recording made no tool call like this one"
        if not tape:
            return head + " (it recorded no tool calls)"
        forms = [json.dumps({"name": t.get("name"), "arguments": t.get("arguments")}, sort_keys=True, indent=1).splitlines()
                 for t in tape]
        best = max(range(len(forms)), key=lambda i: difflib.SequenceMatcher(None, forms[i], mine).ratio())
        diff = difflib.unified_diff(forms[best], mine, f"recorded tool call #{best + 1}", "this tool call", lineterm="", n=2)
        return head + "; diff against the nearest:\n" + "\n".join(diff)
