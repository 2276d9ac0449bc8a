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

# The entry point names :mod:`clawkit_sequence.rules`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
from clawkit.lazy import lazy_exports

_EXPORTS = dict.fromkeys(
    ("NAME", "TABLE", "SequenceRule", "SequenceConfig", "SequenceHistory", "normalise", "check", "record"), "rules"
)

__getattr__ = lazy_exports(__name__, _EXPORTS)
