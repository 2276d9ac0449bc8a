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

# The entry point names :mod:`clawkit_budgets.plugin`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
