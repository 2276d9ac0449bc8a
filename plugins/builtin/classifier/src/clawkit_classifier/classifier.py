"""The classifier's implementation: config, the classifier call and the hook bodies.

The entry point names this module: the kernel reads its ``@hookimpl`` functions from the source
and imports it on the first hook call, so ``clawkit --help`` loads no pydantic or json_repair.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import OrderedDict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clawkit import hook_order, hookimpl, on_events
from clawkit.config import ModelConfig
from clawkit.types import LlmRequest, Message, SessionClassification

from .parse import COMPLEXITIES, TOPICS, ClassifierOutput, parse_classification

__all__ = ["ClassifierConfig", "ClassifierOutput", "SYSTEM_PROMPT", "classify", "parse_classification"]

log = logging.getLogger("clawkit.classifier")

SYSTEM_PROMPT = f"""You classify a conversation between a user and an AI agent, so the agent's \
system prompt can be fitted to it. Reply with one JSON object and nothing else:
{{"label": "what the session is about, at most 79 characters",
 "topic": one of {", ".join(TOPICS)},
 "complexity": one of {", ".join(COMPLEXITIES)},
 "domain": [0 to 3 short lowercase tags such as "security", "frontend", "python", "kubernetes"],
 "flags": [0 to 2 short lowercase flags such as "urgent", "sensitive"]}}"""


# clawkit's own share of a classification (request out -> answer parsed) measured 34-43 ms, at most 127 ms,
# on a 2-core machine at load 13.5: 1 s leaves a small hosted model ~850 ms to answer, and a classifier
# answering after 850 ms classified 3 of 3 one-shot runs (tests/benchmarks/bench_first_turn.py,
# docs/plugins/classifier.md)
WAIT_MS = 1000


class ClassifierConfig(BaseModel):
    """``plugins.classifier``."""

    model_config = ConfigDict(extra="forbid")

    model: ModelConfig | None = Field(
        None, description="the classifier's own model: a model string or a mapping like the agent's model; unset = no classification"
    )
    wait_ms: int = Field(WAIT_MS, ge=0, description="how long the first prompt waits for the classification, counted "
                                               "from the classifier's request (not its provider's set-up)")
    timeout: float = Field(10.0, gt=0, description="seconds one classifier call may take")
    reclassify_every: int = Field(0, ge=0, description="classify again every N turns (0: only after compaction)")
    reclassify_after_compaction: bool = True
    max_messages: int = Field(6, ge=1, description="latest messages shown to the classifier")
    max_chars: int = Field(4000, ge=200, description="character budget of the transcript shown to the classifier")
    max_attempts: int = Field(3, ge=1, description="failed classifications per session before giving up until the next re-classification")

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v


def settings(agent: Any) -> ClassifierConfig:
    raw = agent.plugin("classifier") if agent is not None and hasattr(agent, "plugin") else None
    if isinstance(raw, ClassifierConfig):
        return raw
    if isinstance(raw, dict):
        return ClassifierConfig.model_validate({k: v for k, v in raw.items() if k != "enabled"})
    return ClassifierConfig()


def classifier_model(cfg: ClassifierConfig) -> ModelConfig | None:
    """The classifier's model config, with classifier-friendly defaults where the user set none."""
    if cfg.model is None:
        return None
    m = cfg.model.model_copy()
    given = cfg.model.model_fields_set
    if "timeout" not in given:
        m.timeout = cfg.timeout
    if "max_retries" not in given:
        m.max_retries = 1  # a slow classifier is worth less than a fast unclassified turn
    if "temperature" not in given:
        m.temperature = 0.0
    if "max_tokens" not in given:
        m.max_tokens = 200
    return m


# What message_received saw last, per session: the turn context (emit, runtime) for the
# classification that follows, and for compaction events. Bounded: sessions come and go.
_live: "OrderedDict[str, Any]" = OrderedDict()
_providers: dict[tuple[int, str], tuple[Any, Any]] = {}
# agents already warned about a missing classifier model: per agent object, not per name (agents in
# one process share names, e.g. every test's "test-agent", and one must not silence the next)
# (an agent's config is unhashable: keyed by id, with a weak reference so a reused id is not "warned")
_warned: dict[int, "weakref.ref[Any]"] = {}


def _warn_once(agent: Any) -> bool:
    """True the first time for this agent config object (then remembered while it lives)."""
    seen = _warned.get(id(agent))
    if seen is not None and seen() is agent:  # (every session of such an agent: nothing else to look at)
        return False
    for key in [k for k, ref in _warned.items() if ref() is None]:
        del _warned[key]
    _warned[id(agent)] = weakref.ref(agent)
    return True
LIVE_LIMIT = 512
WARM_LIMIT = 60.0  # seconds a provider may take to load (a cold import on a busy machine) before giving up
# the kernel's generic `compaction` event, and clawkit-compaction's report of a finished one
COMPACTION_EVENTS = ("compaction", "compaction.after")


def _remember(ctx: Any) -> None:
    """Keep the turn's context while the turn runs (a classification started in it captures it; a
    compaction event during it finds it), and drop it when the run ends: a finished turn's context
    holds its whole history, which a server must not keep for hundreds of sessions — nor after the
    session is deleted (``clawkit sessions delete``)."""
    sid = ctx.session.id
    _live[sid] = ctx
    _live.move_to_end(sid)
    while len(_live) > LIVE_LIMIT:
        _live.popitem(last=False)
    at_end = getattr(ctx, "at_end", None)
    if callable(at_end):
        at_end(lambda: _live.pop(sid, None) if _live.get(sid) is ctx else None)


@hookimpl
def register_config(register):
    register("classifier", ClassifierConfig)


@hookimpl
@hook_order(70)
def message_received(ctx, message):
    """Sets the bounded wait, counts turns, and asks for re-classification every N turns."""
    cfg = settings(ctx.agent)
    ctx.state["classify_wait"] = cfg.wait_ms / 1000.0
    if cfg.model is None:
        # nothing will be sent: no event for the kernel to wait on, and no context to keep for a classification
        # or a compaction's re-classification flag — but for the agent's first session in the process, whose
        # classify_session records classifier.skipped through it
        seen = _warned.get(id(ctx.agent))
        if seen is None or seen() is not ctx.agent:
            _remember(ctx)
        return
    _remember(ctx)
    # set when the classifier's request leaves: the kernel's wait (and our timeout) count from there,
    # never from a provider's first import
    ctx.state["classify_sent"] = asyncio.Event()
    n = cfg.reclassify_every
    if not n:
        return
    session = ctx.session
    turns = int(session.get("classifier.turns", 0) or 0) + 1
    session.set("classifier.turns", turns)
    if turns > 1 and (turns - 1) % n == 0 and session.classification is not None:
        session.set("reclassify", True)


@hookimpl
@on_events("compaction", "compaction.after")
def on_event(event):
    """After a compaction the conversation changed: classify it again next turn."""
    if event.type not in COMPACTION_EVENTS or not event.session_id:
        return
    ctx = _live.get(event.session_id)
    if ctx is None:
        return
    cfg = settings(ctx.agent)
    if cfg.model is None or not cfg.reclassify_after_compaction:  # (no classifier model: nothing is ever classified)
        return
    ctx.session.set("reclassify", True)
    ctx.session.set("classifier.attempts", 0)


def transcript(messages: list[Message], max_messages: int, max_chars: int) -> str:
    """The latest user/assistant messages as plain text, newest kept when over budget."""
    lines: list[str] = []
    used = 0
    picked = [m for m in messages if m.role in ("user", "assistant") and m.content and not m.metadata.get("kernel_note")]
    for m in reversed(picked[-max_messages:]):
        line = f"{m.role.capitalize()}: {m.content.strip()}"
        room = max_chars - used
        if room <= 0:
            break
        if len(line) > room:
            line = line[: max(0, room - 1)] + "…"
        lines.append(line)
        used += len(line) + 1
    return "\n".join(reversed(lines))


def _provider(runtime: Any, model: ModelConfig) -> Any:
    key = (id(runtime), model.model_dump_json())
    hit = _providers.get(key)
    if hit is not None and hit[0] is runtime:
        return hit[1]
    provider = runtime.provider_for(model)
    if len(_providers) > 64:
        _providers.clear()
    _providers[key] = (runtime, provider)
    return provider


def _emit(ctx: Any, type: str, **data: Any) -> None:
    if ctx is not None:
        ctx.emit(type, **data)


async def classify(provider: Any, model: ModelConfig, messages: list[Message], cfg: ClassifierConfig) -> tuple[SessionClassification | None, str]:
    """One classifier call: ``(classification, "")`` or ``(None, reason)``; never raises."""
    request = LlmRequest(
        model=model.name,
        system=SYSTEM_PROMPT,
        messages=[Message(role="user", content=transcript(messages, cfg.max_messages, cfg.max_chars))],
        stream=False,
        metadata={"purpose": "classification"},
    )
    try:
        response = await asyncio.wait_for(provider.complete(request), cfg.timeout)
    except asyncio.TimeoutError:
        return None, f"classifier model {model.name} took longer than {cfg.timeout:g}s"
    except Exception as exc:  # ProviderError and anything a provider leaks
        return None, f"classifier model {model.name} failed: {type(exc).__name__}: {exc}"
    return parse_classification(response.content)


@hookimpl
def classify_session(session, messages):
    """None at once when there is nothing to do (no classifier model, attempts spent, no running
    agent) — the kernel then starts no task — else the classification's coroutine."""
    cfg = settings(session.agent)
    ctx = _live.get(session.id)
    model = classifier_model(cfg)
    if model is None:
        if _warn_once(session.agent):
            # info, not a warning: unconfigured is the default of every full install (a Python agent would print
            # it on every run). The classifier.skipped event records it on the first session the agent serves in
            # this process — every session of a one-shot `clawkit run`, once per start of a server: a record per
            # session of a feature left off cost each of a server's sessions a stored, redacted, broadcast event
            # and a metadata key (issue 29, goal 5)
            log.info("agent %s: session classification skipped: no classifier model "
                        "(set plugins.classifier.model; the main model is never used for it)", session.agent.name)
            _emit(ctx, "classifier.skipped", reason="no classifier model configured (plugins.classifier.model)")
        return None
    reclassifying = bool(session.get("reclassify"))
    attempts = int(session.get("classifier.attempts", 0) or 0)
    if attempts >= cfg.max_attempts and not reclassifying:
        return None
    if ctx is None or getattr(ctx, "runtime", None) is None:
        log.warning("session %s: classification skipped: no running agent to call the classifier model with", session.id)
        return None
    return _classify_now(session, messages, cfg, ctx, model, attempts)


async def _classify_now(session: Any, messages: list[Message], cfg: ClassifierConfig, ctx: Any, model: ModelConfig,
                        attempts: int) -> SessionClassification | None:
    """The classifier model's call; None (unclassified) on any failure."""
    t0 = time.perf_counter()
    try:
        provider = _provider(ctx.runtime, model)
        warm = getattr(provider, "warm", None)
        if warm is not None:
            await asyncio.wait_for(warm(), WARM_LIMIT)  # imports are not the classifier's latency
    except Exception as exc:
        result, why = None, f"no provider for the classifier model {model.name}: {type(exc).__name__}: {exc}"
    else:
        sent = ctx.state.get("classify_sent")
        if isinstance(sent, asyncio.Event):
            sent.set()
        t1 = time.perf_counter()
        result, why = await classify(provider, model, messages, cfg)
        # where the time went: the provider's set-up, then the request (the clock wait_ms counts on)
        _emit(ctx, "classifier.timing", warm_ms=round((t1 - t0) * 1000, 1),
              request_ms=round((time.perf_counter() - t1) * 1000, 1), ok=result is not None)
    if result is None:
        session.set("classifier.attempts", attempts + 1)
        log.warning("session %s: classification failed: %s", session.id, why)
        _emit(ctx, "classifier.failed", reason=why, attempt=attempts + 1)
        return None
    if attempts:
        session.set("classifier.attempts", 0)
    return result
