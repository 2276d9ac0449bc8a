"""The plans plugin's hooks (the entry point names this module; the kernel reads it without
importing it and imports each hook's module on its first call)."""

from .analysis import pre_analyse
from .plan import register_config, register_prompt_contributor, register_tools
