"""``plugins.workers`` in the agent YAML: how ``clawkit worker`` runs this agent's queued turns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WorkersConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approval_timeout: float = Field(
        3600.0, gt=0, description="seconds a queued turn's approval request waits for an answer before the call is denied")
