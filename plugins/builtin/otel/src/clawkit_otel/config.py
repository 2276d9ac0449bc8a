"""``plugins.otel`` in the agent YAML."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class OtelConfig(BaseModel):
    """OpenTelemetry export for this agent (exporters themselves follow the ``OTEL_*`` variables)."""

    model_config = ConfigDict(extra="forbid")

    export: bool = Field(False, description="emit spans and metrics (also on with CLAWKIT_OTEL=1); off: nothing is imported or sent")
    capture_content: bool = Field(False, description="record message text, tool arguments and results on spans (off: never)")
