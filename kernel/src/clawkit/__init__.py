"""clawkit: a plugin-first framework for LLM agents.

Plugins import what they need from here: ``hookimpl``, the types (``Message``,
``ToolCall``, ``Decision``…). Names load on first use, so ``clawkit --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .hookspecs import hook_order, hookimpl, on_events
from .lazy import lazy_exports

__version__ = "0.1.0"

_TYPES = (
    "ContentBlock", "Decision", "Event", "LlmRequest", "LlmResponse", "Message", "Outbound", "Risk",
    "SessionClassification", "ToolCall", "ToolDef", "ToolResult", "Usage",
)
_LAZY = {name: "types" for name in _TYPES} | {
    "PromptContributor": "prompt", "PromptSection": "prompt", "StaticContributor": "prompt", "Tag": "prompt",
    "ContributorContext": "prompt", "tool": "tools", "ToolError": "tools", "Agent": "loop", "TurnContext": "context",
    "ProviderError": "providers", "ConfigError": "config", "PluginSection": "config",
    "OutputValidationError": "output", "Attachment": "attachments", "AttachmentError": "attachments",
}

__all__ = ["hookimpl", "hook_order", "on_events", "__version__", *_LAZY]

if TYPE_CHECKING:  # pragma: no cover
    from .config import ConfigError, PluginSection
    from .context import TurnContext
    from .attachments import Attachment, AttachmentError
    from .loop import Agent
    from .output import OutputValidationError
    from .prompt import ContributorContext, PromptContributor, PromptSection, StaticContributor, Tag
    from .providers import ProviderError
    from .tools import ToolError, tool
    from .types import (ContentBlock, Decision, Event, LlmRequest, LlmResponse, Message, Outbound, Risk,
                        SessionClassification, ToolCall, ToolDef, ToolResult, Usage)


__getattr__ = lazy_exports(__name__, _LAZY)


def __dir__() -> list[str]:
    """The lazy names too: ``dir(clawkit)`` shows Decision, SessionClassification… before first use."""
    return sorted(set(globals()) | set(_LAZY))
