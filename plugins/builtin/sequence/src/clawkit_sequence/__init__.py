"""clawkit-sequence: tool prerequisite rules.

Rules live in the agent YAML::

    plugins:
      sequence:
        rules:
          - tool: write_file
            requires: [read_file]
            match: path                 # the same path (resolved) as the prerequisite call
            existing_only: true         # new files need no read first
            message: Read {path} before you overwrite it.

A call whose prerequisites are missing from this session's history is blocked
with the rule's message, so the model can run the prerequisite and retry. The
history of successful calls is kept in the session database (table
``sequence_calls``), so it survives a restart. ``/elevated`` (session metadata
``elevated_until`` in the future) lets blocked calls through unless a rule sets
``elevated_bypass: false``; ``enforce: false`` makes a rule advisory (reported,
never blocking). When the same call keeps being blocked within one turn, the
block message tells the model to stop, and every later call of the turn is
blocked too, so the turn ends instead of spinning.

Seed 001: each rule is stated next to the tool it governs in the prompt's ``## Tools``
(Approach A; :mod:`.guidance`), ``checkpoints:`` adds ``think_about_*``-style tools that
return a templated prompt, and a tool result's ``__directives`` block (stripped by the
kernel) becomes session flags enforced on the next call (Approach C; :mod:`.directives`).
"""

from __future__ import annotations


from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_exports, lazy_module

# Thin hookimpls: ``clawkit --help`` imports every plugin, so pydantic loads (with
# :mod:`clawkit_sequence.rules`) only when a hook first runs.
_EXPORTS = dict.fromkeys(
    ("NAME", "TABLE", "SequenceRule", "SequenceConfig", "SequenceHistory", "normalise", "check", "record"), "rules"
)


__getattr__ = lazy_exports(__name__, _EXPORTS)
_rules = lazy_module(__name__, "rules")  # the implementation, imported by the first hook call


@hookimpl
def register_config(register):
    _rules().register_config(register)


@hookimpl
@hook_order(30)
def before_tool_call(ctx, call):
    """Block calls whose prerequisites have not run (an error here blocks: the kernel fails closed)."""
    return _rules().before_tool_call(ctx, call)


@hookimpl
@hook_order(40)
def after_tool_call(ctx, call, result):
    """Record prerequisite calls in the session database."""
    return _rules().after_tool_call(ctx, call, result)


@hookimpl
@hook_order(55)
def message_received(ctx, message):
    """State each rule next to the tool it governs (turn state ``tool_notes``, before the prompt)."""
    return _rules().message_received(ctx, message)


@hookimpl
def register_tools(register, agent):
    """Checkpoint tools from ``checkpoints:`` (the agent's ``tools:`` decides what is offered)."""
    _rules().register_tools(register, agent)
