"""clawkit-plans: the session's plan, kept by the model and shown to it.

* ``update_plan(steps, note)`` replaces the session's plan: a list of steps, each
  ``{"title", "status"}`` with status ``pending | in_progress | done | blocked``. The
  plan is session metadata (key ``plan``): it is committed with the turn's next message,
  survives a crash and ``--session`` resume, and appears in ``clawkit sessions show``
  and ``sessions export``.
* Every later request carries a ``## Plan`` section with the steps and an instruction
  to follow the plan and update it (a plan updated mid-turn is in the next round).
* Pre-analysis (``plugins.plans.pre_analysis.enabled``): before the turn, one call with
  a minimal "lead architect" prompt and the user's message alone returns
  ``{"is_complex", "reasoning", "plan"}``; a complex request starts with that plan in
  place, a simple one goes straight to execution. Its usage is recorded like any call.

* Parallel steps: a step's ``parallel_with`` (and a nested list in pre-analysis's plan) marks
  steps that can run at once; the section says to make their calls in one response, which the
  kernel's executor runs concurrently.

The tool is offered only when the agent's ``tools:`` allows ``update_plan``.
"""

from __future__ import annotations

# The entry point names :mod:`clawkit_plans.hooks`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
