"""``plugins.serve`` in the agent YAML: how ``clawkit serve`` treats this agent."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ServeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approval_timeout: float | None = Field(
        None, gt=0, description="seconds an approval request of this agent waits before it is denied (default: serve --approval-timeout)")
