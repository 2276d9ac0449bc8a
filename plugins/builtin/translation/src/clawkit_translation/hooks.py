"""The translation device's hooks (the entry point names this module; the kernel reads it without
importing it, and each hook's first call imports only its module: ``clawkit --help`` loads the CLI,
not the device)."""

from .cli import add_commands
from .device import (
    before_llm_call,
    llm_call_failed,
    message_received,
    message_sending,
    register_config,
    register_prompt_contributor,
)
