"""clawkit-budgets: hard caps, not dashboards.

Per run (one turn) and per session, in the agent YAML::

    plugins:
      budgets:
        run:     {tokens: 200000, cost: 0.50, model_calls: 30, tool_calls: 60, wall_time: 600}
        session: {tokens: 2000000, cost: 5.00}
        warn_at: 0.8

or on the command line: ``--set plugins.budgets.run.cost=0.5``. Unset caps are unlimited;
cost is in the currency of the provider's price table (USD for litellm's). Calls are
reserved before they start: each tool call in ``before_tool_call`` (so of forty parallel
calls in one response, only as many as the cap leaves run; the rest get a result naming
the budget), each model call in ``before_llm_call``; tokens and cost are checked before
the next model call against the running total (usage the provider did not report is
estimated, ``usage.estimated``). A run's caps cover its sub-agents: a child's tool calls,
model calls, tokens and cost are reserved against its parent's run caps too, live.
Reaching a cap blocks the call, emits ``budget.exceeded`` and stops the turn with the
kernel's wrap-up round (no tools, a summary of what was done and what is left);
``clawkit run`` then exits 5 and says which cap was reached. Nothing is lost: the session continues with a raised budget
(``--session ID --set …``). Past ``warn_at`` of any cap, the next request carries a
wrap-up notice (``budget.warning``). A session whose budget is already spent, or a child whose parent's run budget
is, is answered without a model call. Usage a tool reports in its result's ``metadata["usage"]``
(a tool that ran models itself) counts against the run as well.
"""

from __future__ import annotations

from clawkit import hook_order, hookimpl, on_events
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
    """Reserve the call against every cap, or block it (and stop the turn) once a cap is reached."""
    return _plugin().gate(ctx, call)


@hookimpl
@hook_order(50)
def after_tool_call(ctx, call, result):
    """Count usage the tool reports (a tool that ran models); keep the session's tool-call count."""
    _plugin().after_tool(ctx, call, result)


@hookimpl(trylast=True)
@hook_order(80)
def before_llm_call(ctx, request):
    """Stop before a model call past a cap; warn near one."""
    _plugin().before_model(ctx, request)


@hookimpl
@on_events("llm.call", "tool.blocked", "tool.approval")
def on_event(event):
    """Add each model call's usage to its run (and the ancestors'); give back the reservation of a
    tool call another gate blocked or whose approval was denied."""
    if event.type not in ("llm.call", "tool.blocked", "tool.approval"):  # called for every event without the filter
        return
    from . import plugin

    plugin.observe(event)
