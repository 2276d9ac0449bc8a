"""The hook contract: every hook a clawkit plugin can implement.

Each docstring is the hook's reference documentation (``docs/hooks.md`` is kept in
step with it by a meta-test). Common rules:

* Implementations are plain functions; where I/O is needed they may return an
  awaitable (e.g. be ``async def``) and the kernel awaits it.
* An implementation that raises is *isolated*: the error is logged, a
  ``hook.error`` event is emitted, and the turn goes on without that result —
  except the security gate ``before_tool_call``, which *fails closed*.
* ``ctx`` is a :class:`clawkit.context.TurnContext`: the agent, the session, the
  run ids (``trace_id``, ``task_id``, ``run_id``), per-turn ``state`` and
  ``emit(type, **data)``.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("clawkit")
hookimpl = pluggy.HookimplMarker("clawkit")

DEFAULT_ORDER = 100  # an implementation without ``hook_order``; ``tryfirst`` 0, ``trylast`` 200


def hook_order(position: int):
    """Place a hook implementation at ``position`` among every plugin's implementations of
    that hook: lower runs first. Without it an implementation sits at 100, or at 0 with
    ``tryfirst`` and 200 with ``trylast``; equal positions keep pluggy's order (last
    registered first). The builtin plugins' positions, and why, are in
    docs/hook-order.md::

        @hookimpl
        @hook_order(20)
        def after_tool_call(ctx, call, result): ...
    """

    def mark(fn):
        fn.clawkit_order = position
        return fn

    return mark


def on_events(*types: str):
    """Deliver only these event types to an ``on_event`` implementation (a type ending in ``*``
    matches by prefix: ``"compaction*"``). Without it an implementation sees every event — about
    ten per turn, each a call::

        @hookimpl
        @on_events("turn.end", "agent.close")
        def on_event(event): ...
    """
    wanted = frozenset(types)

    def mark(fn):
        fn.clawkit_events = wanted
        return fn

    return mark


def wants_event(fn: Any, type: str) -> bool:
    """Whether an ``on_event`` implementation takes events of ``type`` (see :func:`on_events`)."""
    wanted = getattr(fn, "clawkit_events", None)
    if wanted is None or type in wanted:
        return True
    return any(w.endswith("*") and type.startswith(w[:-1]) for w in wanted)


def order_of(impl: Any) -> int:
    """The position of a pluggy ``HookImpl`` (see :func:`hook_order`)."""
    explicit = getattr(impl.function, "clawkit_order", None)
    if explicit is not None:
        return explicit
    return 0 if impl.tryfirst else 200 if impl.trylast else DEFAULT_ORDER


# --- start-up: what plugins contribute ---------------------------------------------------


@hookspec
def register_config(register):
    """Declare this plugin's section of the agent YAML.

    Called once per config load. ``register(name, model, top_level=False)`` takes a
    pydantic model; its fields appear under ``plugins.<name>`` (or at the top level
    of the agent file with ``top_level=True``) and in ``schemas/agent.schema.json``.
    Every section also accepts ``enabled: bool``. Unknown keys are errors.
    Results: ignored. Failure: isolated (the section is missing, so its keys are errors).

    Example::

        @hookimpl
        def register_config(register):
            register("truncator", TruncatorConfig)
    """


@hookspec
def register_providers(register):
    """Register model providers.

    ``register(name, factory, serves=None)``: ``factory(model_config)`` returns an
    object with ``async complete(request, on_text=None) -> LlmResponse`` (see
    :class:`clawkit.providers.Provider`). An agent's ``model.provider`` picks one by
    name; the default ``auto`` takes the first provider whose ``serves(model_config)``
    is true, else a catch-all (registered without ``serves``; ``litellm`` first).
    Results: ignored. Failure: isolated.
    """


@hookspec
def register_tools(register, agent):
    """Register tools for ``agent`` (an :class:`clawkit.config.AgentConfig`).

    ``register(fn_or_toolbox, name=None, risk="safe", allow=False)``: a function becomes
    a tool from its signature and docstring (arguments validated by pydantic); an
    object whose public methods are tools is a toolbox. Only tools listed in the
    agent's ``tools`` allowlist are ever shown to the model — or tools the agent's
    config declares in a section of its own (``subagents:`` → ``agent_<name>``), which
    the plugin registers with ``allow=True``. ``register.group(name, patterns)``
    declares an allowlist group: ``tools: [name]`` admits every tool matching the glob
    ``patterns``, and names covered by them are accepted in ``tools:`` before the tools
    exist (tools added at run time through ``ctx.tools.add(tool)``). A tool returning a
    :class:`clawkit.types.ToolResult` with ``metadata["usage"]`` (tokens it spent on
    models) has that usage added to the turn's. Results: ignored.
    Failure: isolated (that plugin's tools are missing; an event says so) — except
    :class:`clawkit.errors.ConfigError`, which a plugin raises for configuration the
    user must fix (a declared sub-agent's file that does not validate): the agent is
    not built and the error reaches the user as one in the agent file does (``clawkit
    run`` exits 2 with its message, naming the file, line and field).
    """


@hookspec
def governing_paths(agent):
    """Paths that govern ``agent``'s later runs, beyond the kernel's own set.

    ``agent`` is the :class:`clawkit.config.AgentConfig`. Return an iterable of
    :class:`clawkit.governing.GoverningPath` (or ``(path, what)`` / ``(path, what,
    consent)`` tuples): files or folders whose content decides what later runs may do.
    The kernel adds them to its own set (the agent's YAML and the YAML files it names,
    ``.agents/``, ``.clawkit/``, the user's clawkit config, the audit home), published
    as ``Agent.governing`` and ``ctx.governing``: the file tools refuse to write them,
    the sandbox mounts them read-only and an unjailed command that changes them is
    reverted. ``consent=True`` (the skills plugin's skill folders) lets a file tool
    write there after an approval naming the file, never by a grant or elevation.
    Called once when the agent starts. Failure: isolated (reported; the kernel's own
    set still holds, that plugin's paths are missing).
    """


@hookspec
def register_prompt_contributor(register, agent):
    """Register :class:`clawkit.prompt.PromptContributor` objects for ``agent``.

    Called at every prompt build (cheap: keep contributors in the plugin and hand
    them over). ``register(contributor)``. Untagged contributors always apply;
    tagged ones when a tag matches the session's classification. With none
    registered the system prompt is the agent's ``instructions``.
    Results: ignored. Failure: isolated.
    """


@hookspec
def register_commands(cli):
    """Add subcommands to the ``clawkit`` CLI.

    ``cli.command(name, help)`` returns an ``argparse.ArgumentParser`` for the new
    subcommand; set its handler with ``parser.set_defaults(handler=fn)`` where
    ``fn(args) -> int`` returns the exit code. Results: ignored. Failure: isolated.
    """


@hookspec
def register_embedding_provider(register):
    """Register embedding providers for memory: ``register(name, factory)``.

    ``factory(config)`` returns an object with ``model`` (str), ``dimensions`` (int)
    and ``embed(texts: list[str]) -> list[list[float]]``. Results: ignored.
    Failure: isolated.
    """


@hookspec
def register_search_backend(register):
    """Register web search backends for the ``web_search`` tool: ``register(name, factory)``.

    ``factory(config)`` gets the agent's ``plugins.tools.search`` section and returns a backend
    with ``request(query, count, key) -> clawkit_tools.SearchRequest`` (method, path below the
    configured ``base_url``, params, headers, JSON body) and ``parse(data) -> list`` of objects with
    ``title``, ``url`` and ``snippet``; optional attributes ``default_base``, ``needs_key`` and
    ``default_key_env``. The backend never makes the call itself: clawkit-tools does, so every
    backend gets the same time and size limits, no redirects, and the key read from the
    environment and registered as a secret. The YAML picks a backend by ``backend: <name>``; a
    name registered here replaces a builtin of the same name. Results: ignored. Failure: isolated
    (that plugin's backends are missing; choosing one is then an error naming the known ones).
    """


@hookspec
def register_approvers(register):
    """Register approvers by name: ``register(name, approver)``.

    An approver is ``approver(call, reason, ctx) -> bool`` (or an awaitable of
    one), or returns a :class:`clawkit.approvals.Answer` naming who answered and the
    call hash they were shown (the ``tool.approval`` event carries both, and the audit
    ledger records them); it answers approval requests no ``request_approval`` hook answered. A
    front-end picks one by name (``clawkit chat`` on a terminal asks for
    ``"terminal"``; an HTTP server registers and picks its own), so front-ends
    never import the plugin that provides it. The kernel provides ``terminal`` (a
    plain y/N prompt) and ``deny``; a plugin registering the same name replaces the
    kernel's (the first plugin in hook order wins). Results: ignored.
    Failure: isolated (that plugin's approvers are missing); an approver that raises
    denies the call.
    """


@hookspec
def list_skills(ctx):
    """The skills a plugin can offer in this turn, for routers to choose among.

    Return a list of objects with ``name``, ``description``, ``trigger``,
    ``keywords``, ``weight`` and ``lexicon`` (a dict or None; transport only,
    never a prompt) — only skills the agent's ``tools:`` allowlist admits and
    whose requirements are met. A router (the translation device) puts chosen
    names in ``ctx.state["route"]["skills"]``. Called by other plugins through
    ``ctx.hooks.call_sync("list_skills", ctx=ctx)`` instead of importing the
    skills plugin. Failure: isolated (that plugin's skills are not offered).
    """


# --- one turn ----------------------------------------------------------------------------


@hookspec
def message_received(ctx, message):
    """An inbound user message, before anything else sees it.

    ``message`` is a :class:`clawkit.types.Message`. Implementations may rewrite
    ``message.content`` in place (e.g. strip ``/think``) or return a string that
    replaces it, and may set turn state (``ctx.state``) or session metadata. A
    returned string from one implementation is what the next one sees.
    An implementation that wants an effect (a router dispatching to a sub-agent)
    calls ``ctx.plan_tool_call(name, arguments, origin=...)``: the kernel makes
    the call before the first model call, through the same gates, approvals,
    audit and ``after_tool_call`` as the model's calls, and records it in the
    history as an assistant tool call marked with its origin.
    Failure: isolated.
    """


@hookspec(firstresult=True)
def classify_session(session, messages, ctx):
    """Classify a session from its messages, after the first user message.

    ``session`` is a :class:`clawkit.sessions.Session` (``.agent`` is its config);
    ``messages`` the conversation so far; ``ctx`` the turn that started it (for
    ``ctx.runtime.provider_for(...)`` and ``ctx.emit``). Runs concurrently with the
    turn; one-shot runs give it time to finish before they exit. Return a
    :class:`clawkit.types.SessionClassification` (or an awaitable of one), or None
    to pass. The first non-None result wins; it is persisted on the session and a
    ``session.classified`` event is emitted. Failure: isolated (unclassified).
    """


@hookspec
def before_llm_call(ctx, request):
    """Before each model call; ``request`` is a :class:`clawkit.types.LlmRequest`.

    Implementations modify the request in place (extra system text, model
    override, ``reasoning_effort``, compaction of ``messages``) or return a new
    request that replaces it. All run in order. Failure: isolated.
    """


@hookspec(firstresult=True)
def llm_call_failed(ctx, request, error):
    """A model call raised ``error`` after the provider's own retries.

    Return True to retry the call (after fixing ``request`` in place, e.g.
    compacting it when the context overflowed, or naming the next model of a
    router's fallback chain in ``request.model``); None to let the error stand.
    First True wins; a model call is retried this way at most 3 times (the hook
    is asked again after each failed retry). Failure: isolated (treated as None).
    """


@hookspec
def before_tool_call(ctx, call):
    """The security gate: before every tool execution.

    ``call`` is a :class:`clawkit.types.ToolCall`. Every implementation runs, in
    order; each may rewrite ``call.arguments`` in place (the next one sees the
    rewrite) or return a :class:`clawkit.types.Decision`: ``block(reason)`` or
    ``require_approval(reason)`` (None or ``allow`` lets the call through). Any
    block wins over approvals; approvals are asked once, with every reason.
    Failure: **fails closed** — an exception blocks the call, the model is told
    why, and a ``tool.blocked`` event records it.
    """


@hookspec(firstresult=True)
def request_approval(ctx, call, reason):
    """A gate asked for approval of ``call`` for ``reason``.

    Return True (approve), False (deny), a :class:`clawkit.approvals.Answer` (which
    also names who answered), or None (no opinion). The first non-None
    answer wins; with none, the agent's approver callback decides, and with no
    approver (a non-interactive run) the call is denied. May return an awaitable.
    Failure: fails closed (denied).
    """


@hookspec(firstresult=True)
def durable_steps(ctx):
    """Run this turn's model calls and tool executions as checkpointed steps.

    Called once at the start of every turn (and of a resumed one). Return a
    :class:`clawkit.steps.StepRunner` — ``await model(ctx, request, call)``,
    ``reserve(ctx, calls)`` with each model response's tool calls in order, and
    ``await tool(ctx, call, run)`` — or None to let the kernel call the model and the
    tools directly (the default, and the answer outside an execution engine). An
    engine (``clawkit-workers``: DBOS workflows) records each step's result and, when
    a crashed turn is recovered, returns the recorded result instead of calling again;
    while a durable tool step runs, ``ctx.idempotency_key`` is the step's stable key.
    Only gates and approvals run outside the steps. The first non-None result wins.
    Failure: isolated (the turn runs without durable steps; a ``hook.error`` event says so).
    """


@hookspec(firstresult=True)
def open_turn_queue(url):
    """Open the durable turn queue whose state lives at ``url`` (``postgresql://…``).

    Return an object with ``submit(agent, text, session_id=None, turn_id=None) -> turn id``,
    ``result(turn_id, timeout=None) -> dict`` (the turn's ``TurnResult.as_json()``),
    ``approvals(status="pending")``, ``answer(approval_id, approve, by=…)`` and
    ``close()``, or None when this plugin does not handle the URL's scheme. Front-ends
    (``clawkit serve --db postgresql://…``, :func:`clawkit.runtime.open_turn_queue`)
    enqueue turns through it instead of running them; ``clawkit worker`` processes run
    them. The first non-None result wins. Failure: isolated; with no plugin answering,
    the caller reports that no installed plugin runs turns on that URL.
    """


@hookspec(firstresult=True)
def open_storage(url, read_only):
    """Open a connection to the database at ``url``, a URL whose scheme names a server
    (``postgresql://…``); SQLite files are the kernel's own and never reach this hook.

    Return a connection with the ``sqlite3`` API the kernel's store and plugins write to
    (``execute(sql, params)`` with ``?`` placeholders, ``executemany``, ``fetchone``/``fetchall``,
    ``lastrowid``, ``in_transaction``, ``with conn:`` for a transaction, errors as ``sqlite3.Error``
    subclasses) plus ``dialect`` (e.g. ``"postgresql"``) and ``declare(tables)`` — see
    :mod:`clawkit.storage` — opened read-only when ``read_only``; or None when this plugin does
    not handle the URL's scheme. Called by :func:`clawkit.storage.connect` and the session store
    (``--db``, ``state_db``); ``clawkit-postgres`` answers ``postgresql://``. The first non-None
    result wins. Failure: an error opening the database propagates (a bad URL or an unreachable
    server is the caller's error to report); with no plugin answering, the caller reports that no
    installed plugin opens that URL (``install clawkit-postgres`` for ``postgresql://``).
    """


@hookspec(firstresult=True)
def open_api_keys(db):
    """Open the API keys that authenticate HTTP callers of the state database ``db`` (a SQLite
    path or a ``postgresql://`` URL): the keys ``clawkit keys create`` makes for ``clawkit serve``.

    Return an object with ``active_count() -> int`` and ``authenticate(token) -> key | None``
    (a key has ``id``, ``name``, ``role`` and ``can(action)`` for ``run``, ``approve`` and
    ``read``), or None when this plugin keeps no keys. Another front-end that serves an agent
    over HTTP (``clawkit mcp serve --http``) uses it to refuse a non-loopback bind while no key
    exists and to check each request's ``Authorization: Bearer`` key. The first non-None result
    wins. Failure: **fails closed** — raising, or no plugin answering, means no keys: the
    front-end refuses to serve beyond loopback.
    """


@hookspec(firstresult=True)
def confine_process(ctx, spec):
    """Confine a process a tool is about to start (the kernel's process-execution hook).

    ``spec`` is a :class:`clawkit.process.ProcessSpec` (tool name, argv, cwd, env,
    timeout, output cap) as the tool would run it unconfined. A sandbox returns a
    :class:`clawkit.process.ProcessLaunch` — the argv/env/cwd that run the same
    command inside its jail, a description of the jail for the audit ledger, and a
    cleanup — or an awaitable of one; None means no opinion. Tools call it through
    :func:`clawkit.process.confine`; with no implementation they run the spec as is.
    The first non-None answer wins. Failure: **fails closed** — raising (e.g. the
    jail cannot be built here) refuses the process, and the tool reports the reason;
    it never runs unconfined instead.
    """


@hookspec(firstresult=True)
def process_confinement(ctx, tool):
    """What a process started by ``tool`` (through :func:`clawkit.process.confine`) would be
    confined to, asked *before* the call runs — by a gate deciding whether the call can send data
    off the machine (the policy, while the session holds untrusted content).

    Return a dict ``{"confined": bool, "network": bool, "why": str}``: ``confined`` — the process
    runs in a jail (or is refused, never run unconfined); ``network`` — it can reach a network
    from there (a grant naming hosts, the host network); or None for no opinion. Must be
    synchronous and cheap (it runs inside ``before_tool_call``). Read it through
    :func:`clawkit.process.confinement`, which only believes it for tools whose
    :attr:`~clawkit.types.ToolDef.confined` is set. The first non-None answer wins.
    Failure: isolated, and the caller assumes the process is not confined (fails closed).
    """


@hookspec(firstresult=True)
def fetch_attachment(ctx, url, max_bytes):
    """Fetch the bytes of an ``https://`` URL the user attached to a message
    (``clawkit run -a URL``, ``/attach URL``, ``attachments=[URL]``; docs/attachments.md).

    Called only after the kernel ran the URL through the ``before_tool_call`` gates (and the
    approval path) as a ``web_fetch`` call with ``{"url": url}``, so the egress policy that governs
    ``web_fetch`` governs attachments too. Return ``(data: bytes, content_type: str)`` with at most
    ``max_bytes`` bytes (read one more to tell it is too large; the kernel then refuses it), or
    None for no opinion. The kernel types the bytes itself and marks the session untrusted
    (:func:`clawkit.provenance.mark_untrusted`, kind ``web``): the content comes from outside.
    The first non-None answer wins; with no implementation a URL attachment is refused.
    Failure: **fails closed** — raising refuses the attachment (the message names the URL and why).
    """


@hookspec
def after_tool_call(ctx, call, result):
    """After a tool ran, before its result enters the context.

    ``result`` is a :class:`clawkit.types.ToolResult`; return a new ToolResult to
    replace it (truncation, scanning, wrapping untrusted content) or modify it in
    place. Implementations chain: each sees the previous one's result.
    Failure: isolated (the result passes on unchanged).
    """


@hookspec
def message_sending(ctx, outbound):
    """At every delivery point: stream chunk, final reply, tool call/result display,
    routed or sub-agent message, notice.

    ``outbound`` is a :class:`clawkit.types.Outbound` (``kind`` says which point).
    Rewrite ``outbound.content`` in place or return a string that replaces it;
    ``outbound.cancel()`` stops delivery (the session still records the message).
    Failure: isolated (delivered as the previous implementations left it).
    """


@hookspec
def on_event(event):
    """Observe an :class:`clawkit.types.Event`: ``session.start``, ``turn.end``,
    ``session.classified``, ``tool.blocked``, ``tool.approval``, ``hook.error``,
    ``llm.retry``, ``llm.call`` (each model call's timing and usage, no content),
    ``llm.failed`` (a model call that failed for good: timing, ``error_type``, ``status``),
    ``llm.fallback`` (a failed model's request goes to the next of ``model.fallbacks``:
    ``from_model``, ``to_model``, ``error_type``, ``status``; see :mod:`clawkit.fallback`),
    ``turn.failed``, ``turn.resumed``, ``agent.close``, ``compaction``, ``directive.change``
    and any plugin's own.

    Observe-only: results are ignored; events are also persisted on the session.
    Failure: isolated (an error here never emits another event). An implementation that
    needs a few types declares them with ``@on_events("turn.end", …)`` (``from clawkit import
    on_events``) and is not called for the others.
    """


# --- deletion ------------------------------------------------------------------------------


@hookspec
def forget_sessions(store, session_ids, config):
    """Delete everything this plugin keeps about ``session_ids``: the user is deleting those
    conversations (``clawkit sessions delete|prune``, ``Agent.delete_session``, serve's
    ``DELETE /api/sessions/{id}``; docs/forget.md).

    ``store`` is the :class:`clawkit.sessions.SessionStore` (its rows for the sessions are still
    there: the kernel deletes them after every plugin has run); ``session_ids`` the sessions, their
    sub-agent sessions included; ``config`` the agent's config when the caller knows it (else None:
    find your data from ``store`` — ``store.path``, ``store.conn`` — or the default location).
    Delete it for good (rows, files, index entries, derived copies such as a summary that quotes
    a session) and return a dict of counts (kind -> number deleted) or None. Keep only what is
    kept by design and documented as such (the policy audit ledger). Must be idempotent.
    Failure: **not silent** — an exception is reported by the command, which exits non-zero and
    keeps the kernel's rows so the deletion can be run again; the other plugins still run.
    """


# --- shutdown ----------------------------------------------------------------------------


@hookspec
def agent_closing(agent, runtime):
    """``Agent.close()`` is running: release what this plugin started for the agent.

    ``agent`` is the agent's config (the object ``register_tools`` and ``ctx.agent``
    see); ``runtime`` the :class:`clawkit.loop.Agent` (``ctx.runtime``). Stop and
    *join* the threads, executors, file watchers and native runtimes you started for
    it — a daemon thread still inside native code when the interpreter exits aborts
    the process — and stop process-wide ones once no open agent needs them. Called
    once per agent (``close()`` is idempotent), after the last turn, before the
    session store closes. Keep it bounded (join with a timeout of a few seconds).
    Failure: isolated (logged; the other plugins still close).
    """
