"""The ``agent_<name>`` tool a declared sub-agent becomes."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from clawkit.types import ToolResult

from .config import SubagentSpec


def agent_tool(name: str, spec: SubagentSpec) -> Any:
    async def delegate(task: str, ctx: Any) -> ToolResult:
        from .spawn import as_tool_result, delegate as run

        return as_tool_result(ctx, await run(ctx, name, spec, task))

    what = spec.description.strip() or f"Hand a task to the {name} sub-agent and get its answer."
    schema_hint = " Its answer is JSON matching a fixed schema." if spec.output_schema else ""
    delegate.__doc__ = (
        f"{what}{schema_hint} The sub-agent works on its own with its own tools and answers once.\n\n"
        "Args:\n    task: what the sub-agent should do, in plain words, with every detail it needs\n"
    )
    # set directly (not as strings): the limit differs per declaration
    delegate.__annotations__ = {
        "task": Annotated[str, Field(min_length=1, max_length=spec.max_task_chars, pattern=r"\S")],
        "ctx": Any,
        "return": ToolResult,
    }
    delegate.__name__ = f"agent_{name}"
    delegate.__clawkit_inherits_provenance__ = True  # the child starts with the parent's provenance (spawn.delegate)
    return delegate
