"""clawkit-healing: interventions when a run goes wrong (Rust-Claw §10).

* **Stop and think.** After ``consecutive_failures`` (default 3) failing tool results in
  a row, the next request carries a note asking the model to analyse the errors
  before it retries.
* **Stagnation.** After ``stagnation_steps`` (default 15) tool calls without progress —
  progress is a tool call not made before in the session, or one more plan step done in
  the session's ``plan`` metadata (kept by clawkit-plans) — an
  alert asks the model to change approach or stop and report.
* **Focus booster.** When the history takes more than ``focus_share`` of the window, a
  short note ties the model to the latest user instruction.

The notes go where the model looks last: appended to the request's final message when it is the
user's, else as a user message after the tool results (never the top of the system prompt).
Each intervention is an event (``healing.stop_and_think``, ``healing.stagnation``,
``healing.focus``) and a notice shown under ``/verbose``. Counters live in session
metadata (``healing``), so they carry across turns and survive a restart.
"""

from __future__ import annotations

# The entry point names :mod:`clawkit_healing.plugin`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
