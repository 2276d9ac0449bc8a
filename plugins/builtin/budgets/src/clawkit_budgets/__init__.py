"""clawkit-budgets: hard caps, not dashboards.

Per run (one turn) and per session, in the agent YAML::

    plugins:
      budgets:
        run:     {tokens: 200000, cost: 0.50, model_calls: 30, tool_calls: 60, wall_time: 600}
        session: {tokens: 2000000, cost: 5.00}
        warn_at: 0.8

or on the command line: ``--set plugins.budgets.run.cost=0.5``. Unset caps are unlimited;
cost is in the currency of the provider's price table (USD for litellm's). Before each
tool call and each model call the usage so far is checked: reaching a cap blocks the
call, emits ``budget.exceeded`` and stops the turn with the kernel's wrap-up round (no
tools, a summary of what was done and what is left); ``clawkit run`` then exits 5 and
says which cap was reached. Nothing is lost: the session continues with a raised budget
(``--session ID --set …``). Past ``warn_at`` of any cap, the next request carries a
wrap-up notice (``budget.warning``). A session whose budget is already spent is answered
without a model call. Sub-agents' usage counts against the parent's run when their
plugin adds it to the parent's ``ctx.usage``.
"""

from __future__ import annotations

from clawkit import hook_order, hookimpl
from clawkit.lazy import lazy_module

_plugin = lazy_module(__name__, "plugin")  # the implementation, imported by the first hook call


@hookimpl
def register_config(register):
    from .plugin import BudgetsConfig

    register("budgets", BudgetsConfig)


@hookimpl(tryfirst=True)
@hook_order(15)
def message_received(ctx, message):
    """Record the session's usage before this run; refuse the turn if it is already spent."""
    _plugin().start(ctx)


@hookimpl(tryfirst=True)
@hook_order(15)
def before_tool_call(ctx, call):
    """Block the call (and stop the turn) once a cap is reached."""
    return _plugin().gate(ctx, call)


@hookimpl
@hook_order(50)
def after_tool_call(ctx, call, result):
    """Count the session's tool calls."""
    _plugin().count_tool(ctx)


@hookimpl(trylast=True)
@hook_order(80)
def before_llm_call(ctx, request):
    """Stop before a model call past a cap; warn near one."""
    _plugin().before_model(ctx, request)
