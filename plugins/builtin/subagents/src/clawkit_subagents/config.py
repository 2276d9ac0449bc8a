"""The ``subagents:`` section of an agent YAML (top level, so agent files stay portable)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,47}$")


class SubagentSpec(BaseModel):
    """One declared sub-agent; it becomes the tool ``agent_<name>`` taking ``{"task": ...}``."""

    model_config = ConfigDict(extra="forbid")

    agent: str | dict[str, Any] = Field(description="another agent file (relative to this one) or an inline agent mapping")
    description: str = Field("", description="what the sub-agent does: the tool description the parent's model sees")
    tools: list[str] | None = Field(None, description="optional narrowing of the child's tools (globs); never widens")
    output_schema: dict[str, Any] | None = Field(None, description="JSON Schema the child's final answer must satisfy "
                                                 "(a typed run: docs/typed-output.md); the parent gets the validated JSON")
    output_retries: int = Field(1, ge=0, description="times a child's answer that fails output_schema goes back to it "
                                "with the errors before the delegation is an error result")
    timeout: float = Field(300.0, gt=0, description="seconds the child's whole run may take")
    max_task_chars: int = Field(20_000, gt=0, description="longest task text accepted")

    @field_validator("output_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            import jsonschema

            try:
                jsonschema.validators.validator_for(value).check_schema(value)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"not a valid JSON Schema: {exc.message}") from None
        return value


class SubagentsConfig(RootModel[dict[str, SubagentSpec]]):
    """``subagents: {name: {agent, description, tools, output_schema, timeout}}``."""

    root: dict[str, SubagentSpec] = Field(default_factory=dict)

    @field_validator("root")
    @classmethod
    def _names(cls, value: dict[str, SubagentSpec]) -> dict[str, SubagentSpec]:
        for name in value:
            if not NAME.match(name):
                raise ValueError(f"sub-agent name {name!r} must be a letter then letters, digits, '_' or '-' (48 at most)")
        return value

    def items(self):
        return self.root.items()

    def get(self, name: str) -> SubagentSpec | None:
        return self.root.get(name)

    def __bool__(self) -> bool:
        return bool(self.root)


class SubagentsSettings(BaseModel):
    """``plugins.subagents``: limits over the whole tree of agents one user turn starts."""

    model_config = ConfigDict(extra="forbid")

    max_children_per_run: int = Field(
        16, gt=0, description="sub-agents one user turn may start in total, at every level of the tree (each is "
        "counted before it starts, so children started in parallel cannot overshoot); the one past it gets an error result")
