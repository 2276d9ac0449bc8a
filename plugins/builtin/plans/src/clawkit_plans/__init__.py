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

from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_module

_plan = lazy_module(__name__, "plan")  # imported by the first hook call

# Thin hookimpls: ``clawkit --help`` imports every plugin; the implementation (pydantic)
# loads on first use.


@hookimpl
def register_config(register):
    from .plan import PlansConfig

    register("plans", PlansConfig)


@hookimpl
def register_tools(register, agent):
    """The ``update_plan`` tool."""
    from .plan import update_plan

    register(update_plan)


@hookimpl
def register_prompt_contributor(register, agent):
    """The ``## Plan`` section (or a one-line hint when there is no plan yet)."""
    register(_plan().PlanContributor())


@hookimpl(trylast=True)
@hook_order(95)
async def message_received(ctx, message):
    """Pre-analysis, after other plugins have stripped directives from the message."""
    from .analysis import pre_analyse

    await pre_analyse(ctx, message)
