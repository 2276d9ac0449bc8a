"""clawkit: a plugin-first framework for LLM agents.

Import what plugins need from here: ``hookimpl``, the types, ``Decision``,
``PromptContributor``. Heavy pieces (the loop, the CLI) load on first use.
"""

from .hookspecs import hookimpl
from .types import (
    ContentBlock,
    Decision,
    Event,
    LlmRequest,
    LlmResponse,
    Message,
    Outbound,
    Risk,
    SessionClassification,
    ToolCall,
    ToolDef,
    ToolResult,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "hookimpl", "ContentBlock", "Decision", "Event", "LlmRequest", "LlmResponse", "Message", "Outbound",
    "Risk", "SessionClassification", "ToolCall", "ToolDef", "ToolResult", "Usage", "__version__",
]
