"""The agent's model side: provider warm-up, session classification, the prompt, the model
call, and delivery through ``message_sending``. Mixed into :class:`clawkit.loop.Agent` (kept
apart so the loop module stays readable); these methods use the agent's ``config``, ``hooks``,
``provider``, ``tools`` and ``store``."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from . import fallback
from .context import TurnContext
from .hooks import isawaitable, maybe_await
from .prompt import ContributorContext, PromptContributor, StaticContributor, assemble
from .providers import ProviderError
from .types import LlmRequest, LlmResponse, Message, Outbound, SessionClassification, new_id

log = logging.getLogger("clawkit.loop")

Deliver = Callable[[Outbound], "Awaitable[None] | None"]
WARM_LIMIT = 60.0  # seconds the first classification may wait for providers to load
INTERRUPTED_NOTE = "\n\n[This reply was interrupted before it was finished.]"


def _as_the_model_sees_it(m: Message) -> Message:
    """An interrupted reply is shown to the model as partial, so it does not build on it as if whole."""
    if m.role == "assistant" and m.metadata.get("interrupted"):
        return m.model_copy(update={"content": (m.content or "") + INTERRUPTED_NOTE})
    return m


MAX_FAILED_RETRIES = 3  # llm_call_failed retries of one model call

# (window, id(context config)) -> (the context config, the prompt's per-source budgets, their sum): the same
# arithmetic every turn for an agent (config objects are not changed once loaded)
_BUDGETS: dict[tuple[int, int], tuple[Any, dict[str, int], int]] = {}


def _prompt_budgets(ctx: TurnContext) -> tuple[dict[str, int], int]:
    """``ctx.budget.prompt_chars()`` and its sum, worked out once per window and context config
    (the dict is shared: :func:`clawkit.prompt.assemble` only reads it)."""
    agent = ctx.agent
    context = agent.context
    key = (agent.model.context_window or agent.limits.context_window, id(context))  # (ctx.budget's window)
    hit = _BUDGETS.get(key)
    if hit is not None and hit[0] is context:
        return hit[1], hit[2]
    chars = ctx.budget.prompt_chars()
    if len(_BUDGETS) >= 256:
        _BUDGETS.clear()
    hit = _BUDGETS[key] = (context, chars, sum(chars.values()))
    return hit[1], hit[2]


class ModelSide:
    """Warm-up, classification, prompt, model call and delivery of an :class:`~clawkit.loop.Agent`."""

    async def _prepare_provider(self) -> None:
        """Once per agent, before the first classification: the provider's optional ``warm()``
        (litellm's multi-second import) runs off the event loop — awaited when it is async, in
        a thread when not — so no model call's time budget, a classifier's few seconds, pays for it."""
        if self._prepared:
            return
        self._prepared = True
        try:
            warm = getattr(self.provider, "warm", None)
            if inspect.iscoroutinefunction(warm):
                await warm()
            elif callable(warm):
                await asyncio.to_thread(warm)
        except Exception as exc:  # the model call itself reports a broken provider
            log.debug("provider warm-up failed: %r", exc)

    # classification -----------------------------------------------------------------------

    def _start_classification(self, ctx: TurnContext) -> asyncio.Task | None:
        session = ctx.session
        if not self.hooks.has("classify_session"):
            return None
        if session.classification is not None and not session.get("reclassify"):
            return None

        # each implementation is called here: one that answers None at once (nothing to classify
        # with) costs no task; the first awaitable runs in the background, the later ones after it
        impls = self.hooks.impls("classify_session")
        kw = {"session": session, "messages": list(session.history), "ctx": ctx}
        first: Any = None
        rest = 0
        for i, (plugin, fn, argnames) in enumerate(impls):
            try:
                first = self.hooks._invoke("classify_session", plugin, fn, argnames, kw)
            except Exception as exc:
                self.hooks.report("classify_session", plugin, exc)
                continue
            if first is not None:
                rest = i + 1
                break
        if first is None:
            if session.get("reclassify"):
                session.set("reclassify", False)
            return None

        async def classify() -> None:
            c = None
            try:
                c = await first if isawaitable(first) else first
            except Exception as exc:
                self.hooks.report("classify_session", impls[rest - 1][0], exc)
            for plugin, fn, argnames in impls[rest:] if c is None else ():
                try:
                    c = await maybe_await(self.hooks._invoke("classify_session", plugin, fn, argnames, kw))
                except Exception as exc:
                    self.hooks.report("classify_session", plugin, exc)
                    continue
                if c is not None:
                    break
            if session.get("reclassify"):
                session.set("reclassify", False)
            if isinstance(c, SessionClassification):
                session.classification = c
                session.store.save_classification(session.id, c)
                ctx.emit("session.classified", **c.model_dump())

        task = asyncio.ensure_future(classify())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _await_classification(self, ctx: TurnContext, task: asyncio.Task) -> None:
        """Wait (bounded) for the first classification so it can shape this very turn.

        The budget (``ctx.state["classify_wait"]``, the classifier's ``wait_ms``) counts
        from when the classifier's request leaves (``ctx.state["classify_sent"]``, an
        ``asyncio.Event``), not from a provider's first import; meanwhile the turn's own
        provider loads too (``provider.warm()``), so the wait costs no extra time.
        """
        budget = float(ctx.state.get("classify_wait", 0.3))
        sent = ctx.state.get("classify_sent")
        if isinstance(sent, asyncio.Event) and not sent.is_set():
            try:
                warm = getattr(self.provider, "warm", None)
            except Exception:  # no provider: the model call reports it
                warm = None
            if warm is not None:
                warming = asyncio.ensure_future(self._warm(warm))
                self._background.add(warming)
                warming.add_done_callback(self._background.discard)
            sent_wait = asyncio.ensure_future(sent.wait())
            try:
                await asyncio.wait({task, sent_wait}, timeout=WARM_LIMIT, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sent_wait.cancel()
        if not task.done():
            await asyncio.wait({task}, timeout=budget)

    async def _warm(self, warm: Callable[[], Any]) -> None:
        try:
            await maybe_await(warm())
        except Exception as exc:  # the model call itself will report it properly
            log.debug("provider warm-up failed: %r", exc)

    # prompt and model ---------------------------------------------------------------------

    def contributors(self) -> list[PromptContributor]:
        """The registered contributors; the agent's ``instructions`` are always among them
        (the kernel's own ``instructions`` section unless a plugin registers that id)."""
        found: list[PromptContributor] = []
        if self.hooks.has("register_prompt_contributor"):
            self.hooks.call_sync("register_prompt_contributor", register=found.append, agent=self.config)
        instructions = self.config.instructions.strip()
        if instructions:
            for c in found:
                if c.id == "instructions":
                    return found
            own = self.__dict__.get("_instructions")  # one per text: a stable contributor, rendered once
            if own is None or own.content != instructions:
                own = self._instructions = StaticContributor("instructions", instructions, priority=10)
            found.append(own)
        return found

    def contributor_context(self, ctx: TurnContext, message: str | None = None) -> ContributorContext:
        offered = self.tools.offered(ctx)
        workspace = self.config.workspace
        return ContributorContext(
            agent_id=self.config.name,
            session_id=ctx.session.id,
            classification=ctx.session.classification,
            tools=[t.name for t in offered],
            tool_descriptions={t.name: t.definition.description for t in offered},
            registry=self.tools,
            channel=ctx.channel,
            workspace=workspace if isinstance(workspace, Path) else Path(workspace),  # (validated configs: a Path already)
            model=self.config.model.name,
            message=message,
            agent=self.config,
            session=ctx.session,
            state=ctx.state,
        )

    async def _prepare(self, preparing: list[PromptContributor], cctx: ContributorContext) -> None:
        """Each contributor's ``prepare(cctx)``: called at once, and what is awaitable awaited concurrently —
        a ``prepare`` with nothing to wait for (returns None) costs no task, and a single awaitable is
        awaited in place (a task and an event-loop round trip less per turn). Failures are reported."""
        waiting: list[tuple[PromptContributor, Any]] = []
        for c in preparing:
            try:
                res = c.prepare(cctx)
            except Exception as exc:
                self.hooks.report("contributor.prepare", c.id, exc)
                continue
            if isawaitable(res):
                waiting.append((c, res))
        if len(waiting) == 1:
            c, res = waiting[0]
            try:
                await res
            except Exception as exc:
                self.hooks.report("contributor.prepare", c.id, exc)
        elif waiting:
            outcomes = await asyncio.gather(*(maybe_await(res) for _, res in waiting), return_exceptions=True)
            for (c, _), out in zip(waiting, outcomes):
                if isinstance(out, Exception):
                    self.hooks.report("contributor.prepare", c.id, out)

    async def system_prompt(self, ctx: TurnContext):
        """The assembled prompt (text + inclusion report), or None with no contributors.

        Contributors with an ``async prepare(ctx)`` (I/O such as memory recall) are
        awaited concurrently first, so the event loop is never blocked; assembly
        itself stays synchronous and deterministic.
        """
        contributors = self.contributors()
        if not contributors:
            return None
        last_user = next((m.content for m in reversed(ctx.session.history) if m.role == "user"), None)
        cctx = self.contributor_context(ctx, last_user)
        preparing = [c for c in contributors if hasattr(c, "prepare")]
        if preparing:
            await self._prepare(preparing, cctx)
        budgets, total = _prompt_budgets(ctx)
        assembled = assemble(contributors, cctx, total_chars=total, budgets=budgets,
                             on_error=lambda c, e: self.hooks.report("contributor", c.id, e))
        touched = any(i.chars_before for i in assembled.report)  # cut or trimmed (most turns: none)
        for inc in assembled.cut + assembled.trimmed if touched else ():  # nothing is dropped silently
            ctx.emit("context.cut", source=inc.source, section=inc.id, action="dropped" if not inc.included else "trimmed",
                     tokens_before=inc.chars_before // 4, tokens_after=inc.chars // 4 if inc.included else 0,
                     tools=list(inc.tools))
        return assembled

    async def _build_request(self, ctx: TurnContext, tools_on: bool) -> LlmRequest:
        system = ctx.state.get("_system")
        if system is None:  # once per turn: every round of a turn sees the same prompt (and caches)
            assembled = ctx.state["_assembled"] = await self.system_prompt(ctx)
            system = ctx.state["_system"] = assembled.text if assembled is not None else self.config.instructions
            ctx.state["_dropped_tools"] = assembled.dropped_tools if assembled is not None else set()
        if ctx.state.get("_has_attachments") or any(m.blocks for m in ctx.session.history):
            from .attachments import blob_store, hydrate

            ctx.state["_has_attachments"] = True
            hydrate(ctx.session.history, blob_store(self))  # a resumed session's attachments: their bytes, once
        request = LlmRequest(
            model=self.config.model.name,
            messages=[_as_the_model_sees_it(m) for m in ctx.session.history],
            system=system,
            tools=[t.definition for t in self.tools.offered(ctx) if t.name not in ctx.state.get("_dropped_tools", ())] if tools_on else [],
            metadata={"context_window": self.config.model.context_window or self.config.limits.context_window},
        )
        if self.hooks.has("before_llm_call"):
            request = await self.hooks.call_chain("before_llm_call", "request", LlmRequest, ctx=ctx, request=request)
            if not tools_on:
                request.tools = []  # the wrap-up round offers no tools, whatever a plugin added
        return request

    async def _call_model(self, ctx: TurnContext, request: LlmRequest, deliver: Deliver | None,
                          heard: list[str] | None = None) -> LlmResponse:
        on_text = None
        if deliver is not None and request.stream:

            async def on_text(delta: str) -> None:
                if heard is not None:
                    heard.append(delta)
                await self._send(ctx, Outbound(kind="stream_chunk", content=delta), deliver)

        started = time.time()

        async def call() -> LlmResponse:
            retries = 0
            while True:
                try:
                    return await fallback.complete(self, ctx, request, on_text, heard)
                except ProviderError as exc:
                    # a fix-up (compaction) or the next model of a fallback chain: a few tries, never a loop
                    if retries >= MAX_FAILED_RETRIES or not self.hooks.has("llm_call_failed"):
                        raise
                    retries += 1
                    again = await self.hooks.call_first("llm_call_failed", ctx=ctx, request=request, error=exc)
                    if again is not True:
                        raise
                    ctx.emit("llm.retry", reason=str(exc))

        try:
            response = await (call() if ctx.steps is None else ctx.steps.model(ctx, request, call))
        except ProviderError as exc:  # observers (telemetry) see failed calls too, with their timing
            ctx.emit("llm.failed", model=request.model, started=started, duration=time.time() - started,
                     error_type=exc.kind, status=exc.status,
                     endpoint=exc.endpoint or request.metadata.get("fallback.endpoint") or self.config.model.api_base,
                     stream=request.stream)
            raise
        if not response.usage.total_tokens and not response.usage.estimated:
            # the provider reported no usage (and did not count it itself): counted here, marked
            # estimated, so budgets, --json and telemetry never read 0 for a call that was made
            from .tokens import estimate_usage

            response.usage = estimate_usage(request, response)
        if on_text is not None:
            await self._send(ctx, Outbound(kind="stream_chunk", content="", metadata={"final": True}), deliver)
        started = request.metadata.get("fallback.started", started)  # the answering model's own call
        store = ctx.session.store
        store.record_usage(ctx.session.id, ctx.run_id, response.model or request.model, response.usage)
        store.step(ctx.run_id, new_id("step"), "llm", response.model or request.model, started, time.time(), "ok",
                   {"usage": response.usage.model_dump(exclude_defaults=True)})
        # observers (telemetry, logs) see each model call with its timing; content stays out of events
        ctx.emit("llm.call", model=request.model, response_model=response.model, response_id=response.id,
                 endpoint=request.metadata.get("fallback.endpoint") or self.config.model.api_base, started=started,
                 **({"fallback_from": request.metadata["fallback_from"]} if request.metadata.get("fallback_from") else {}),
                 duration=time.time() - started, usage=response.usage.model_dump(), finish_reason=response.finish_reason,
                 tool_calls=len(response.tool_calls), stream=request.stream)
        return response

    async def _complete_within_deadline(self, request: LlmRequest, on_text: Any, heard: list[str] | None,
                                        provider: Any = None, model_config: Any = None) -> LlmResponse:
        """``provider.complete`` bounded by ``model.call_timeout`` in all.

        A provider's own timeout is per read: a stream that trickles a byte every few
        seconds never trips it, so the kernel bounds the whole call, whichever provider.
        """
        limit = self.config.model.call_timeout
        if not limit:
            return await self._provider_complete(request, on_text, provider, model_config)
        try:
            async with asyncio.timeout(limit):
                return await self._provider_complete(request, on_text, provider, model_config)
        except TimeoutError:
            partial = "".join(heard or ())
            message = (f"model {request.model or self.config.model.name}: no complete answer within "
                       f"model.call_timeout = {limit:g}s" + (f" ({len(partial)} characters had arrived)" if partial else ""))
            raise ProviderError(message, kind="stream_cut" if partial else "timeout", retryable=False,
                                partial_text=partial or None, model=request.model or self.config.model.name,
                                endpoint=(model_config or self.config.model).api_base,
                                reason="model.call_timeout exceeded") from None

    async def _provider_complete(self, request: LlmRequest, on_text: Any, provider: Any = None,
                                 model_config: Any = None) -> LlmResponse:
        """``provider.complete``; a model without native tool calling (``supports_tools: false`` in
        the model mapping or litellm's table, :mod:`clawkit.capabilities`) gets its tools through
        the text protocol of :mod:`clawkit.tooltext` instead of a ``tools`` field it would refuse.
        ``provider``/``model_config``: a fallback model's (:mod:`clawkit.fallback`), else the agent's."""
        provider = self.provider if provider is None else provider
        model_config = self.config.model if model_config is None else model_config
        if request.tools:
            from .capabilities import model_capabilities

            model = request.model or model_config.name
            text_tools: set[str] = self.__dict__.setdefault("_text_tools", set())
            if model in text_tools or not model_capabilities(model_config, request.model or None).supports_tools:
                from . import tooltext

                return await tooltext.complete(provider.complete, request, on_text)
            try:
                return await provider.complete(request, on_text)
            except ProviderError as exc:
                from . import tooltext

                if not tooltext.refuses_tools(exc):
                    raise
                # a server that says the model takes no tools (Ollama: "… does not support tools"): the
                # text protocol from now on for this model, this call included
                text_tools.add(model)
                log.warning("model %s refused native tool calling (%s): tools go through the text protocol", model, exc)
                return await tooltext.complete(provider.complete, request, on_text)
        return await provider.complete(request, on_text)

    # delivery -----------------------------------------------------------------------------

    async def _send(self, ctx: TurnContext, outbound: Outbound, deliver: Deliver | None) -> Outbound:
        """Pass ``outbound`` through ``message_sending`` and deliver it unless cancelled."""
        if self.hooks.has("message_sending"):
            kw = {"ctx": ctx, "outbound": outbound}
            for plugin, fn, argnames in self.hooks.impls("message_sending"):
                try:
                    res = self.hooks._invoke("message_sending", plugin, fn, argnames, kw)
                    if isawaitable(res):
                        res = await res
                    if isinstance(res, str):
                        outbound.content = res
                except Exception as exc:
                    self.hooks.report("message_sending", plugin, exc)
        if deliver is not None and not outbound.cancelled:
            await maybe_await(deliver(outbound))
        return outbound

    async def _deliver_final(self, ctx: TurnContext, text: str, deliver: Deliver | None, *, streamed: bool, persist: bool = False) -> str:
        if persist:
            self._append(ctx.session, Message(role="assistant", content=text, metadata={"handled_by_plugin": True}), ctx, defer=True)
        out = await self._send(ctx, Outbound(kind="final_reply", content=text, metadata={"streamed": streamed}), deliver)
        return "" if out.cancelled else out.content

    async def send(self, ctx: TurnContext, kind: str, content: str, deliver: Deliver | None, **metadata: Any) -> Outbound:
        """For plugins and sub-agents: deliver a ``routed`` or ``notice`` message through the hooks."""
        return await self._send(ctx, Outbound(kind=kind, content=content, metadata=metadata), deliver)  # type: ignore[arg-type]

