"""The translation device's implementation: config, routing, profile filtering, outbound
scrubbing and transport encoding.

:mod:`clawkit_translation` (the entry point) holds only thin hookimpls that import this
module on first call, so ``clawkit --help`` loads no pydantic or regex patterns.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
import time
from functools import lru_cache
from typing import Any

from clawkit import hook_order, hookimpl
from clawkit.config import section_of
from clawkit.prompt import PromptContributor, PromptSection
from pydantic import BaseModel, ConfigDict, Field, field_validator

from . import ct1, metrics
from .clawdense import ClawDense, Lexicon
from .ct1 import CT1Error, CT1Message
from .router import PROFILES, IntentRouter, Route, SkillInfo
from .scrubber import OutboundScrubber, may_contain_artifacts, scrub

__all__ = [
    "TranslationConfig", "ProfileConfig", "CT1Message", "CT1Error", "ClawDense", "Lexicon", "IntentRouter", "Route",
    "OutboundScrubber", "scrub", "route_message", "transport_codec", "encode_for_transport", "decode_from_transport",
]

log = logging.getLogger("clawkit.translation")
SCRUBBER_KEY = "translation.scrubber"
ROUTE_META_KEY = "translation.route"


class ProfileConfig(BaseModel):
    """One profile's settings: a tool allowlist for its turns, a prompt text, a sub-agent, a model."""

    tools: list[str] | None = Field(None, description="tool names (globs) this profile may use; null: no restriction")
    prompt: str = Field("", description="text added to the system prompt on this profile's turns")
    subagent: str | None = Field(None, description="a sub-agent (declared under subagents:) that confident routes to "
                                 "this profile are dispatched to instead of the agent's own model")
    model: str | None = Field(None, alias="modelOverride", description="the model this profile's confident turns use "
                              "(wins over the agent's model)")
    fallback_models: list[str] = Field(default_factory=list, alias="fallbackModels",
                                       description="models tried in order when the chosen one fails")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class EscalationConfig(BaseModel):
    """A stronger model for turns the router is unsure about."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="the stronger model")
    below: float = Field(0.5, ge=0, le=1, description="route confidence below which the turn escalates")


class TranslationConfig(BaseModel):
    """``plugins: {translation: {...}}`` in the agent YAML."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    route: bool = Field(True, description="classify each inbound message (encode_inbound)")
    scrub: bool = Field(True, description="strip transport artifacts from every delivery (decode_outbound)")
    min_confidence: float = Field(0.35, ge=0, le=1, description="below this, a route restricts nothing and adds no profile text")
    dispatch_threshold: float = Field(0.7, ge=0, le=1, description="least route confidence that dispatches to a profile's "
                                      "sub-agent (the seed's 0.7)")
    escalation: EscalationConfig | None = Field(None, description="a stronger model for low-confidence routes")
    fallback_models: list[str] = Field(default_factory=list, alias="fallbackModels",
                                       description="models tried in order when a routed model fails")
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict, description="per-profile tools allowlist and prompt text")
    keywords: dict[str, list[str]] = Field(default_factory=dict, description="extra routing keywords per profile")
    skill_keywords: dict[str, list[str]] = Field(default_factory=dict, description="routing keywords per skill name")
    max_skills: int = Field(2, ge=0, description="most skills selected for one message")
    always_tools: list[str] = Field(default_factory=lambda: ["load_skill"], description="tools a profile never filters out")
    lexicon: dict[str, Any] = Field(default_factory=dict, description="transport lexicon: mappings, path_compressions, priority_markers")

    @field_validator("profiles", "keywords")
    @classmethod
    def _known_profiles(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - set(PROFILES))
        if unknown:
            raise ValueError(f"unknown profile(s) {', '.join(unknown)}; profiles are {', '.join(PROFILES)}")
        return value

    @field_validator("lexicon")
    @classmethod
    def _valid_lexicon(cls, value: dict[str, Any]) -> dict[str, Any]:
        Lexicon.from_block(value)  # raises CT1Error (a ValueError) naming the bad entry
        return value


def settings(agent_config: Any) -> TranslationConfig:
    """The agent's section (validated; remembered per agent config: :func:`clawkit.config.section_of`)."""
    return section_of(agent_config, "translation", TranslationConfig)


@lru_cache(maxsize=32)
def _router(keywords: tuple[tuple[str, tuple[str, ...]], ...]) -> IntentRouter:
    return IntentRouter({p: list(k) for p, k in keywords} or None)


_routers: dict[int, tuple[TranslationConfig, IntentRouter]] = {}


def router_for(cfg: TranslationConfig) -> IntentRouter:
    hit = _routers.get(id(cfg))
    if hit is not None and hit[0] is cfg:
        return hit[1]
    router = _router(tuple(sorted((p, tuple(k)) for p, k in cfg.keywords.items())))
    if not cfg.keywords:  # (keywords could be edited in place: only the keyword-free router is remembered by config)
        if len(_routers) >= 64:
            _routers.clear()
        _routers[id(cfg)] = (cfg, router)
    return router


@lru_cache(maxsize=32)
def _codec(lexicon_key: str) -> ClawDense:
    return ClawDense(Lexicon.from_block(json.loads(lexicon_key)) if lexicon_key != "{}" else None)


def _codec_for(cfg: TranslationConfig, skill_lexicon: dict[str, Any] | None = None) -> ClawDense:
    merged = dict(cfg.lexicon)
    for part in ("mappings", "path_compressions", "priority_markers"):
        if skill_lexicon and isinstance(skill_lexicon.get(part), dict):
            merged[part] = {**(merged.get(part) or {}), **skill_lexicon[part]}
    return _codec(json.dumps(merged, sort_keys=True, default=str))


# --- skills, through the list_skills hook (no import of the skills plugin) ------------------------


def _listed_skills(ctx: Any) -> list[Any]:
    hooks = getattr(ctx, "hooks", None)
    if hooks is None:
        return []
    return [sk for found in hooks.call_sync("list_skills", ctx=ctx) for sk in (found or [])]  # (none: no call)


_infos_cache: list[tuple[TranslationConfig, list[Any], list[SkillInfo]]] = []  # the last (config, skills) seen


def _skill_infos(ctx: Any, cfg: TranslationConfig) -> list[SkillInfo]:
    listed = _listed_skills(ctx)
    if not listed and not cfg.skill_keywords:
        return []  # no skill to route to (none listed for this agent's tools)
    # the skills plugin hands out the same compiled objects until a file changes: reuse the infos
    for c_cfg, c_listed, c_infos in _infos_cache:
        if c_cfg is cfg and len(c_listed) == len(listed) and all(a is b for a, b in zip(c_listed, listed)):
            return c_infos
    infos = _build_skill_infos(listed, cfg)
    _infos_cache[:] = [(cfg, listed, infos)]
    return infos


def _build_skill_infos(listed: list[Any], cfg: TranslationConfig) -> list[SkillInfo]:
    infos: dict[str, SkillInfo] = {}
    for sk in listed:
        if sk.name not in infos:
            kws = tuple(cfg.skill_keywords.get(sk.name, ())) + tuple(getattr(sk, "keywords", None) or ())
            infos[sk.name] = SkillInfo(str(sk.name), str(sk.description or ""), kws, float(getattr(sk, "weight", 1.0) or 1.0),
                                       str(getattr(sk, "trigger", "") or ""), str(getattr(sk, "source", "") or ""),
                                       str(getattr(sk, "model", "") or ""), tuple(getattr(sk, "fallback_models", ()) or ()))
    for name, kws in cfg.skill_keywords.items():
        if name not in infos:
            infos[name] = SkillInfo(str(name), "", tuple(kws))
    return list(infos.values())


# --- encode_inbound -------------------------------------------------------------------------------


def route_message(text: str, cfg: TranslationConfig | None = None, skills: list[SkillInfo] = (), tools: list[str] = ()) -> Route:
    """The routing decision for ``text`` (pure code; no I/O)."""
    cfg = cfg or TranslationConfig()
    intent, profile, confidence, chosen, kept, (model, chain, why) = _decide(text, cfg, skills, tools)
    route = Route(intent, profile, confidence, chosen, kept)
    route.model, route.fallback_models, route.model_reason = model, chain, why
    return route


def _decide(text: str, cfg: TranslationConfig, skills: list[SkillInfo], tools: list[str]) -> tuple:
    """``(intent, profile, confidence, skills, tools, (model, fallbacks, why))`` for ``text``; ``tools``
    a new list."""
    router = router_for(cfg)
    intent, profile, confidence = router.classify(text)
    sure = profile if confidence >= cfg.min_confidence or profile == "conversation" else None
    chosen = router.match_skills(text, skills, cfg.max_skills, sure) if skills else []
    pc = cfg.profiles.get(profile) if cfg.profiles else None
    if pc is not None and pc.tools is not None and confidence >= cfg.min_confidence:
        tools = [t for t in tools if t in cfg.always_tools or any(fnmatch.fnmatchcase(t, p) for p in pc.tools)]
    else:
        tools = list(tools)
    if not (chosen or cfg.profiles or cfg.escalation is not None):  # no skill, profile or escalation picks a model
        return intent, profile, confidence, chosen, tools, (None, [], None)
    return intent, profile, confidence, chosen, tools, choose_model(cfg, profile, confidence, chosen, skills)


def choose_model(cfg: TranslationConfig, profile: str, confidence: float, chosen: list[str],
                 skills: list[SkillInfo] = ()) -> tuple[str | None, list[str], str | None]:
    """(model, fallback chain, why) for a routed turn, or (None, [], None): the agent's model.

    A routed skill's ``modelOverride`` first, then the confident profile's ``modelOverride``;
    a route less confident than ``escalation.below`` escalates to the stronger model. The
    fallback chain is the skill's, else the profile's, then the device's ``fallbackModels``."""
    by_name = {s.name: s for s in skills}
    model, why, chain = None, None, []
    for name in chosen:
        sk = by_name.get(name)
        if sk is not None and sk.model:
            model, why, chain = sk.model, f"skill:{name}", list(sk.fallback_models)
            break
    pc = cfg.profiles.get(profile)
    if model is None and pc is not None and pc.model and confidence >= cfg.min_confidence:
        model, why, chain = pc.model, f"profile:{profile}", list(pc.fallback_models)
    if cfg.escalation is not None and confidence < cfg.escalation.below:
        model, why = cfg.escalation.model, f"escalation:{confidence:g}<{cfg.escalation.below:g}"
    if model is None:
        return None, [], None
    chain += [m for m in cfg.fallback_models if m not in chain and m != model]
    return model, chain, why


@hookimpl
def register_config(register):
    register("translation", TranslationConfig)


@hookimpl
@hook_order(40)
def message_received(ctx, message):
    cfg = settings(ctx.agent)
    if not cfg.route:
        return None
    t0 = time.perf_counter()
    infos = _skill_infos(ctx, cfg)
    text = message.content
    intent, profile, confidence, chosen, tools, (model, chain, why) = _decide(text, cfg, infos, _visible_names(ctx.tools))
    route: dict[str, Any] = {"intent": intent, "profile": profile, "confidence": confidence, "skills": chosen, "tools": tools}
    if model:
        route.update(model=model, fallback_models=chain, model_reason=why)
    decoded = _decode_dispatch(ctx)
    if decoded is not None:  # a sub-agent's turn: the skills its parent dispatched it for come first
        sent = [n.strip() for n in str(decoded["params"].get("skills") or "").split(",") if n.strip()]
        route["skills"] = sent + [n for n in route["skills"] if n not in sent]
    # whole microseconds: a route event repeating an earlier one's text is one the store's redaction remembers
    elapsed_us = int((time.perf_counter() - t0) * 1e6 + 0.5)
    dispatch = plan_dispatch(text, cfg, route, infos) if cfg.profiles else []
    if dispatch:
        route["dispatch"] = dispatch
    ctx.state["route"] = route
    _save_route(ctx.session, route)
    ctx.emit("translation.route", elapsed_us=elapsed_us, **route)
    counts = [(f"profile:{profile}", 1.0)]
    if dispatch:
        counts.append(("dispatch_routes", 1.0))
        if len(dispatch) > 1:
            counts.append(("dispatch_multi", 1.0))
    metrics.bump_with_turn(ctx.session.store, "routed", 1.0, *counts)
    return None


_names: list[Any] = [None, []]  # [the tool registry's visible list last seen, its names]


def _visible_names(tools: Any) -> list[str]:
    """The names of the agent's visible tools (the registry keeps one visible list until its tools change)."""
    visible = tools.visible()
    cached = _names
    if cached[0] is not visible:
        names = [t.name for t in visible]
        _names[:] = [visible, names]
        return names
    return cached[1]


DISPATCH_KEY = "translation.dispatch"  # turn state in a sub-agent: the decoded dispatch record


def _decode_dispatch(ctx: Any) -> dict[str, Any] | None:
    """In a sub-agent's session, the parent's dispatch record (session metadata ``subagent``:
    ``dispatch`` text, ``transport``) decoded from ClawDense with this agent's lexicon — into
    turn state ``translation.dispatch`` and a ``translation.decoded`` event. None elsewhere, or
    when the record is not ClawDense (it then stays as stored; an undecodable one is reported)."""
    meta = ctx.session.get("subagent")
    if not isinstance(meta, dict) or meta.get("transport") != "clawdense" or not meta.get("dispatch"):
        return None
    try:
        message = decode_from_transport(ctx, str(meta["dispatch"]))
    except (CT1Error, ValueError) as exc:
        ctx.emit("translation.decode_failed", error=str(exc)[:200])
        return None
    decoded = message.to_dict()
    decoded.setdefault("params", {})
    ctx.state[DISPATCH_KEY] = decoded
    ctx.emit("translation.decoded", **decoded)
    return decoded


_CLAUSES = re.compile(r"\s*(?:;|\n+|(?<=[.!?])\s+|,?\s+\band\s+(?:then\s+|also\s+)?)\s*", re.I)


def plan_dispatch(text: str, cfg: TranslationConfig, route: dict[str, Any],
                  skills: list[SkillInfo] = ()) -> list[dict[str, Any]]:
    """Sub-agent dispatches for ``text``: one per intent when the message decomposes into
    several clauses each routed confidently to a profile naming a sub-agent (MULTI), else
    one for the whole message when its route's profile names one, else none.

    Each names the skills routed for its task (``skills``): the sub-agents plugin checks
    their manifests before it spawns the child. A dispatch is a plan, not an effect: it
    becomes an ``agent_<name>`` call made through the gates."""
    targets = {p: pc.subagent for p, pc in cfg.profiles.items() if pc.subagent}
    if not targets:
        return []
    parts = [c.strip(" ,.") for c in _CLAUSES.split(text) if c and c.strip(" ,.")]
    if len(parts) > 1:
        router = router_for(cfg)
        items = []
        for part in parts:
            intent, profile, confidence = router.classify(part)
            if profile not in targets or confidence < cfg.dispatch_threshold:
                items = []
                break
            chosen = router.match_skills(part, skills, cfg.max_skills, profile) if skills else []
            items.append({"agent": targets[profile], "task": part, "intent": intent, "profile": profile, "skills": chosen})
        if len({i["intent"] for i in items}) > 1:
            return items
    profile = route.get("profile")
    if profile in targets and route.get("confidence", 0) >= cfg.dispatch_threshold:
        return [{"agent": targets[profile], "task": text, "intent": route.get("intent"), "profile": profile,
                 "skills": list(route.get("skills") or [])}]
    return []


def _save_route(session: Any, route: dict[str, Any]) -> None:
    """``session.set(ROUTE_META_KEY, route)``, committed with the user message that follows.

    The metadata in memory changes now; on disk only this key is updated (``store.queue_metadata_key``,
    so a full metadata write by another plugin in between loses nothing), queued on the
    store: it lands in the same transaction as the message it routes, not a commit of
    its own. Unchanged routes (a chat repeating itself) are not written again. A route is JSON as
    it is — strings, a finite confidence, lists of names (skill names are ``str`` from
    :func:`_build_skill_infos` on) and dispatch records of those — so it is handed to the store
    without a check or a copy (SQLite's ``json()`` would refuse a NaN; none can occur).
    """
    if session.get(ROUTE_META_KEY) == route:
        return
    write_key = getattr(session.store, "queue_metadata_key", None)
    if write_key is None or type(getattr(session, "metadata", None)) is not dict:
        session.set(ROUTE_META_KEY, route)
        return
    session.metadata[ROUTE_META_KEY] = route
    write_key(session.id, ROUTE_META_KEY, route)


def _restricting_profile(ctx: Any, cfg: TranslationConfig) -> ProfileConfig | None:
    route = ctx.state.get("route")
    if not route or route.get("confidence", 0) < cfg.min_confidence:
        return None
    pc = cfg.profiles.get(route.get("profile"))
    return pc if pc is not None and pc.tools is not None else None


@hookimpl
@hook_order(30)
def before_llm_call(ctx, request):
    cfg = settings(ctx.agent)
    route = ctx.state.get("route")
    if route and route.get("model"):  # the device's model choice wins over the agent's default
        request.model = route["model"]
        if route.get("fallback_models"):
            request.metadata["fallback_models"] = list(route["fallback_models"])
    if not cfg.profiles:  # no profile restricts tools: nothing to do
        return None
    pc = _restricting_profile(ctx, cfg)
    if pc is None:
        return None
    keep, removed = [], []
    for t in request.tools:
        tool = ctx.tools.get(t.name) if hasattr(ctx.tools, "get") else None
        if t.name in cfg.always_tools or getattr(tool, "skill_name", None) or any(fnmatch.fnmatchcase(t.name, p) for p in pc.tools):
            keep.append(t)
        else:
            removed.append(t.name)
    request.tools = keep
    if removed and not ctx.state.get("translation.filtered_emitted"):
        ctx.state["translation.filtered_emitted"] = True
        ctx.emit("translation.tools_filtered", profile=ctx.state["route"]["profile"], removed=removed)
    return None


@hookimpl
def llm_call_failed(ctx, request, error):
    """The next model of the fallback chain (``request.metadata["fallback_models"]``), unless the
    failure is one a fallback cannot help (the context overflowed: compaction's; text already shown)."""
    chain = request.metadata.get("fallback_models")
    if not chain or getattr(error, "context_overflow", False) or getattr(error, "kind", "") == "stream_cut":
        return None
    failed, request.model = request.model, chain.pop(0)
    ctx.emit("translation.model_fallback", failed=failed, model=request.model, kind=getattr(error, "kind", None))
    return True


class ProfilePromptContributor(PromptContributor):
    """The routed profile's configured prompt text — never the routing decision itself."""

    id = "translation.profile"
    priority = 60

    def contribute(self, ctx: Any) -> PromptSection | None:
        route = (ctx.state or {}).get("route")
        if not route:
            return None
        cfg = settings(ctx.agent)
        pc = cfg.profiles.get(route.get("profile"))
        if pc is None or not pc.prompt or route.get("confidence", 0) < cfg.min_confidence:
            return None
        return PromptSection("", pc.prompt)


@hookimpl
def register_prompt_contributor(register, agent):
    if settings(agent).profiles:
        register(ProfilePromptContributor())


# --- decode_outbound ----------------------------------------------------------------------------


@hookimpl(tryfirst=True)
@hook_order(10)
def message_sending(ctx, outbound):
    meta = outbound.metadata
    if outbound.kind == "routed" and meta.get("ct1") is not None and (outbound.target != "user" or meta.get("to")):
        message = _ct1_of(meta["ct1"])
        meta["transport"] = "clawdense"
        if meta.get("dispatch"):  # a task handed to a sub-agent (its dispatch record)
            metrics.bump_with_turn(ctx.session.store, "subagent_dispatches")
        return encode_for_transport(ctx, message, skill=meta.get("skill"))
    if outbound.kind != "stream_chunk" and not may_contain_artifacts(outbound.content):
        return None  # what scrub() would conclude, whatever the config (the usual delivery: no config, no codec)
    cfg = settings(ctx.agent)
    if not cfg.scrub or meta.get("transport") in ("ct1", "clawdense"):
        return None
    codec = _codec_for(cfg)
    if outbound.kind == "stream_chunk":
        scrubber = ctx.state.get(SCRUBBER_KEY)
        if scrubber is None:
            scrubber = ctx.state[SCRUBBER_KEY] = OutboundScrubber(codec)
        before = scrubber.stripped
        if meta.get("final"):
            out = scrubber.flush()
            ctx.state.pop(SCRUBBER_KEY, None)  # the next model call streams a new message
        else:
            out = scrubber.feed(outbound.content)
        _count_stripped(ctx, outbound.kind, scrubber.stripped - before)
        return out
    out, n = scrub(outbound.content, codec)
    if n:
        _count_stripped(ctx, outbound.kind, n)
        return out
    return None


def _ct1_of(value: Any) -> CT1Message:
    """``metadata["ct1"]``: a :class:`CT1Message`, its :meth:`~CT1Message.to_dict` mapping (what a plugin
    that cannot import this one sends: no text to parse on the dispatch path) or CT/1 text."""
    if isinstance(value, CT1Message):
        return value
    if isinstance(value, dict):
        params = tuple((value.get("params") or {}).items()) + tuple((f, ct1.FLAG) for f in value.get("flags") or ())
        return CT1Message(str(value["verb"]), value.get("action"), params, value.get("payload", ct1.NO_PAYLOAD))
    return ct1.parse(str(value))


def _count_stripped(ctx: Any, kind: str, n: int) -> None:
    if n <= 0:
        return
    metrics.bump_with_turn(ctx.session.store, "artifacts_stripped", n)
    ctx.emit("translation.stripped", kind=kind, count=n)


# --- transport ------------------------------------------------------------------------------------


def transport_codec(ctx: Any = None, skill: str | None = None) -> ClawDense:
    """The ClawDense codec for a link: defaults + the agent's ``lexicon`` + ``skill``'s Lexicon."""
    cfg = settings(ctx.agent) if ctx is not None else TranslationConfig()
    skill_lexicon = None
    if skill and ctx is not None:
        found = next((sk for sk in _listed_skills(ctx) if sk.name == skill), None)
        skill_lexicon = getattr(found, "lexicon", None)
    return _codec_for(cfg, skill_lexicon)


def encode_for_transport(ctx: Any, message: CT1Message, skill: str | None = None) -> str:
    """ClawDense text of ``message`` for another agent; counted in the metrics."""
    dense = transport_codec(ctx, skill).encode(message)
    if ctx is not None:  # committed with the turn's next write: no commit of their own on the dispatch path
        metrics.bump_with_turn(ctx.session.store, "messages_encoded", 1.0, ("transport_chars_dense", len(dense)),
                               ("transport_chars_ct1", len(ct1.serialize(message))),
                               ("transport_chars_json", len(message.to_json())))
    return dense


def decode_from_transport(ctx: Any, text: str, skill: str | None = None) -> CT1Message:
    """The message a ClawDense text carries (the same lexicon as the sender's)."""
    message = transport_codec(ctx, skill).decode(text)
    if ctx is not None:
        metrics.bump_with_turn(ctx.session.store, "messages_decoded")  # committed with the turn
    return message
