"""clawkit-shield: the Kernel Shield, a security gate around every tool call.

* Layer 1 (structural, ``before_tool_call``): arguments validated against the
  tool's JSON Schema; the active skills' manifest capabilities
  (``ctx.state["capability_requests"]``) matched against the call's real paths,
  hosts and commands — deny wins.
* Layer 2 (semantic): a risk score from the tool's risk level, the sensitivity of
  the data it touches and the session's trust; config thresholds decide allow /
  log / require approval. While the session is tainted, guarded and unsafe calls
  need approval.
* ``after_tool_call``: results from untrusted sources are scanned for prompt
  injection, wrapped in data delimiters, and a detection taints the session.
* Layer 3 (attestation): a documented no-op (:mod:`clawkit_shield.attestation`).

Modes: ``permissive`` (default), ``strict``, ``audit-only``. Every finding is
reported as a ``shield.*`` event (recorded by the policy plugin's audit ledger).
The shield fails closed: an internal error blocks the call or withholds the result.
"""

from __future__ import annotations

import fnmatch
import re
import os
from typing import TYPE_CHECKING, Any

from clawkit import hook_order, hookimpl

if TYPE_CHECKING:
    import jsonschema

    from clawkit.effects import capability_of
    from clawkit.types import Decision, ToolCall, ToolResult

    from .attestation import Attestation, Attestor, NoopAttestor
    from .capabilities import check, extract_resources, parse_permissions, pii_scanning
    from .config import ShieldConfig
    from .risk import Assessment, SensitivePaths, assess
    from .scanner import SEVERITY_WEIGHT, Detection, InjectionScanner, redact, taint_score, wrap

# ``clawkit --help`` imports every plugin: jsonschema, wcmatch, pydantic and the big
# patterns load on first use instead (see :func:`_load`). name -> (module, attribute)
_LAZY: dict[str, tuple[str, str | None]] = {
    **{n: ("clawkit.types", n) for n in ("Decision", "ToolCall", "ToolResult")},
    "capability_of": ("clawkit.effects", "capability_of"),
    **{n: (".attestation", n) for n in ("Attestation", "Attestor", "NoopAttestor")},
    **{n: (".capabilities", n) for n in ("check", "extract_resources", "parse_permissions",
                                         "pii_scanning")},
    "ShieldConfig": (".config", "ShieldConfig"),
    **{n: (".risk", n) for n in ("Assessment", "SensitivePaths", "assess")},
    **{n: (".scanner", n) for n in ("Detection", "InjectionScanner", "redact", "taint_score", "wrap", "SEVERITY_WEIGHT")},
}
_loaded = False


def _load() -> None:
    """Import the shield's dependencies into this module's globals (once).

    Names already set are kept, so ``monkeypatch.setattr(clawkit_shield, "assess", ...)``
    works as with plain module-level imports."""
    global _loaded
    if _loaded:
        return
    from importlib import import_module

    g = globals()
    for name, (module, attr) in _LAZY.items():
        if name not in g:
            mod = import_module(module, __name__)
            g[name] = getattr(mod, attr) if attr else mod
    if "_DEFAULT" not in g:
        g["_DEFAULT"] = g["ShieldConfig"]()
    _loaded = True


def __getattr__(name: str) -> Any:
    if name in _LAZY or name == "_DEFAULT":
        _load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Shield", "ShieldConfig", "InjectionScanner", "Detection", "Attestation", "Attestor", "NoopAttestor", "shield_for"]

NAME = "shield"
TAIL_CHARS = 600  # untrusted text kept from one result to catch an injection split into the next
APPROVAL_RISKS = ("guarded", "unsafe")


class Shield:
    """The shield for one configuration; stateless across sessions (state lives in session metadata)."""

    def __init__(self, config: ShieldConfig):
        _load()
        self.config = config
        self.scanner = InjectionScanner(max_chars=config.max_scan_chars)
        self.sensitive = SensitivePaths(list(config.sensitive_paths) + list(config.extra_sensitive_paths))
        self.attestor: Attestor = NoopAttestor()
        self._validators: dict[str, tuple[int, Any]] = {}
        self._workspaces: dict[str, str] = {}
        self._untrusted_rx: tuple[tuple[str, ...], Any] | None = None
        self._prompt_scans: dict[tuple[str, tuple[str, ...]], list[Any]] = {}

    @property
    def enforcing(self) -> bool:
        return self.config.mode != "audit-only"

    # --- before the call -------------------------------------------------------------------

    def gate(self, ctx: Any, call: ToolCall) -> Decision | None:
        tool = ctx.tools.get(call.name)
        if tool is None:
            return None  # the kernel answers unknown tools itself
        definition = tool.definition
        risk = getattr(definition.risk, "value", str(definition.risk))
        problem = self.validate(definition, call)
        if problem:
            return self._block(ctx, call, "schema", f"invalid arguments for {call.name}: {problem}")
        workspace = os.fspath(ctx.agent.workspace)
        capability = capability_of(call.name, definition, self.config.capability_map)
        resources = extract_resources(call.arguments, workspace)
        if capability in ("fs.read", "fs.write", "shell.exec") and not resources.paths:
            resources.paths.append(self._real_workspace(workspace))  # the tools' default directory
        requests = ctx.state.get("capability_requests")
        ungranted = None
        if requests and capability:
            permissions = parse_permissions(requests)
            refusal = check(call.name, capability, resources, permissions, workspace)
            if refusal is not None and (refusal.kind == "denied" or self.config.mode == "strict"):
                return self._block(ctx, call, "capability", refusal.reason)
            if refusal is not None:
                ungranted = refusal.reason
            scanning = pii_scanning(call.name, capability, permissions)
            if scanning:
                refused = self._pii_in_arguments(ctx, call, capability, scanning)
                if refused is not None:
                    return refused
        advisory = ctx.state.get("advisory_capability_requests")  # routed skills, skills' routed_manifests: ask
        if advisory and capability and ungranted is None:
            refusal = check(call.name, capability, resources, parse_permissions(advisory), workspace)
            if refusal is not None:  # guidance, not a veto: the user is asked
                ungranted = f"a skill the router chose for this message would not allow it ({refusal.reason}); it only guides"
        attestation = self.attestor.attest(ctx, call)
        if attestation.verified is False:
            return self._block(ctx, call, "attestation", attestation.detail or "attestation failed")

        session = ctx.session
        trust = _trust(session)
        tainted = bool(session.get("tainted"))
        a = assess(risk=risk, capability=capability, arguments=call.arguments, resources=resources, trust=trust,
                   weights=self.config.weights, sensitive=self.sensitive)
        ctx.state.setdefault("shield", {})[call.id] = {"score": a.score, "reasons": a.reasons}
        t = self.config.thresholds
        reasons = [ungranted] if ungranted else []
        if tainted and risk in APPROVAL_RISKS:
            reasons.append(f"the session is tainted by untrusted content that carried an injection, so {risk} calls need approval")
        if a.score >= t.approve or (self.config.mode == "strict" and a.score >= t.log):
            reasons.append(f"risk score {a.score:.2f} ({', '.join(a.reasons)})")
        if reasons:
            ctx.emit("shield.approval_required", tool=call.name, call_id=call.id, layer=2, score=a.score,
                     factors=a.reasons, tainted=tainted, reason="; ".join(reasons), mode=self.config.mode, enforced=self.enforcing)
            return Decision.require_approval("; ".join(reasons)) if self.enforcing else None
        if a.score >= t.log:
            # recorded once the call has run, with its outcome: one event instead of two, and
            # nothing written to the database on the way to execution
            ctx.state.setdefault("shield.logged", {})[call.id] = {"score": a.score, "factors": a.reasons}
        return None

    def _real_workspace(self, workspace: str) -> str:
        real = self._workspaces.get(workspace)
        if real is None:
            real = self._workspaces[workspace] = os.path.realpath(workspace)
        return real

    def validate(self, definition: Any, call: ToolCall) -> str | None:
        """Layer 1a: the call's arguments against the tool's JSON Schema; the first problems, or None."""
        if call.argument_error:
            return f"the arguments are not valid JSON ({call.argument_error})"
        if not self.config.validate_arguments:
            return None
        schema = definition.parameters or {"type": "object"}
        cached = self._validators.get(definition.name)
        if cached is None or cached[0] is not schema:
            import jsonschema  # only when a tool call is checked: a turn without tools never pays for it

            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)  # a broken schema is an internal error: fail closed
            cached = (schema, cls(schema), _plain_spec(schema), _schema_key(schema))
            self._validators[definition.name] = cached
        elif cached[2] is not None and _schema_key(schema) != cached[3]:  # the same dict, edited in place
            cached = (schema, cached[1], _plain_spec(schema), _schema_key(schema))
            self._validators[definition.name] = cached
        validator = cached[1]
        if _plainly_valid_spec(cached[2], call.arguments) or validator.is_valid(call.arguments):
            return None
        errors = sorted(validator.iter_errors(call.arguments), key=lambda e: list(e.absolute_path))[:3]
        parts = []
        for e in errors:
            where = ".".join(str(p) for p in e.absolute_path) or "arguments"
            msg = e.message if len(e.message) <= 160 else e.message[:157] + "..."
            parts.append(f"{where}: {msg}")
        return "; ".join(parts)

    def _pii_in_arguments(self, ctx: Any, call: ToolCall, capability: str, skills: list[str]) -> Decision | None:
        """``pii_scan`` (a skill's manifest): personal data in the arguments would leave through
        the tool — refuse the call; and mark it so its result is redacted."""
        from . import pii

        counts: dict[str, int] = {}
        for value in pii.values(call.arguments):
            for kind, n in pii.kinds(pii.find(value)).items():
                counts[kind] = counts.get(kind, 0) + n
        ctx.state.setdefault("shield.pii", {})[call.id] = skills
        if not counts:
            return None
        ctx.emit("shield.pii", tool=call.name, call_id=call.id, where="arguments", kinds=counts, skills=skills,
                 enforced=self.enforcing)
        found = ", ".join(f"{kind} ×{n}" for kind, n in sorted(counts.items()))
        return self._block(ctx, call, "pii", f"the arguments carry personal data ({found}); the active skill "
                           f"{', '.join(skills)} has {capability} values scanned (pii_scan in its manifest)")

    def _block(self, ctx: Any, call: ToolCall, check_name: str, reason: str) -> Decision | None:
        ctx.emit("shield.blocked", tool=call.name, call_id=call.id, layer=1, check=check_name, reason=reason,
                 mode=self.config.mode, enforced=self.enforcing)
        return Decision.block(reason) if self.enforcing else None

    # --- after the call --------------------------------------------------------------------

    def session_score(self, ctx: Any, call: Any, content: str, detections: list, names: list[str]) -> float:
        """The taint score of everything untrusted this session has seen: the strongest finding of each
        rule across results, plus injections split across the end of one result and the start of the next."""
        session = ctx.session
        stored = session.get("shield.rules")
        rules: dict[str, float] = dict(stored) if isinstance(stored, dict) else {}
        before = dict(rules)
        for d in detections:
            if d.severity != "low":
                rules[d.rule] = max(rules.get(d.rule, 0.0), SEVERITY_WEIGHT[d.severity])
        from .normalise import normalise as normalised  # the package attribute ``normalise`` is the submodule

        tail = session.get("shield.tail")
        clean = normalised(content)
        if isinstance(tail, str) and tail:
            joined = tail + "\n" + clean[:TAIL_CHARS]
            for d in self.scanner.scan(joined, names):
                if d.severity != "low" and d.start < len(tail) < d.end:
                    ctx.emit("shield.detection", tool=call.name, call_id=call.id, source=call.name, split=True,
                             mode=self.config.mode, **d.as_event())
                    rules[d.rule] = max(rules.get(d.rule, 0.0), SEVERITY_WEIGHT[d.severity])
        if rules != before:
            session.set("shield.rules", rules)
        session.set("shield.tail", clean[-TAIL_CHARS:])
        return sum(rules.values())

    def scan_prompt_data(self, ctx: Any) -> None:
        """Untrusted text another plugin put into the prompt (``ctx.state["untrusted_content"]``: project
        files, recalled memories): scanned like a tool result; a detection taints the session."""
        entries = ctx.state.get("untrusted_content")
        if not entries:
            return
        done = ctx.state.setdefault("shield.scanned_prompt", set())
        names = [t.name for t in ctx.tools.visible()] if ctx.tools is not None else []
        for entry in entries:
            source, text = str(entry.get("source", "prompt")), str(entry.get("text", ""))
            key = (source, hash(text))
            if key in done:
                continue
            done.add(key)
            detections = self._scan_prompt_text(text, names)
            for d in detections:
                ctx.emit("shield.detection", tool=None, source=source, mode=self.config.mode, **d.as_event())
            score = taint_score(detections)
            if score >= self.config.taint_threshold and not ctx.session.get("tainted"):
                ctx.session.set("tainted", True)
                ctx.session.set("trust", min(_trust(ctx.session), self.config.trust.after_detection))
                ctx.emit("shield.tainted", source=source, score=score,
                         categories=sorted({d.category for d in detections if d.severity != "low"}))

    def _scan_prompt_text(self, text: str, names: list[str]) -> list[Any]:
        """``scanner.scan``, remembered per (text, tool names): the same project files and
        recalled memories come back turn after turn, and the scan is a function of these
        two (its detections are reported every turn as before)."""
        key = (text, tuple(names))
        hit = self._prompt_scans.get(key)
        if hit is None:
            hit = self.scanner.scan(text, names)
            if len(self._prompt_scans) >= 64:
                self._prompt_scans.clear()
            self._prompt_scans[key] = hit
        return list(hit)

    def untrusted(self, call: ToolCall, result: ToolResult) -> bool:
        meta = result.metadata
        if meta.get("trusted") is True:
            return False
        if meta.get("untrusted") is True:
            return True
        patterns = tuple(self.config.untrusted_tools)
        if self._untrusted_rx is None or self._untrusted_rx[0] != patterns:  # compiled once per list
            rx = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)) if patterns else None
            self._untrusted_rx = (patterns, rx)
        rx = self._untrusted_rx[1]
        return rx is not None and rx.match(call.name) is not None

    def inspect_result(self, ctx: Any, call: ToolCall, result: ToolResult) -> ToolResult | None:
        """Personal data redacted (``pii_scan``), then untrusted content scanned and wrapped."""
        redacted = self._redact_pii(ctx, call, result)
        checked = self._inspect_untrusted(ctx, call, redacted or result)
        return checked or redacted

    def _redact_pii(self, ctx: Any, call: ToolCall, result: ToolResult) -> ToolResult | None:
        marked = ctx.state.get("shield.pii") or {}
        skills = marked.pop(call.id, None)
        if skills is None and call.name == "read_tool_output" and ctx.state.get("shield.pii.seen"):
            skills = ctx.state["shield.pii.seen"]  # a part of an output that was scanned when whole
        if not skills:
            return None
        ctx.state["shield.pii.seen"] = skills
        from . import pii

        content, counts = pii.redact(result.content)
        if not counts:
            return None
        ctx.emit("shield.pii", tool=call.name, call_id=call.id, where="result", kinds=counts, skills=skills,
                 enforced=self.enforcing)
        if not self.enforcing:
            return None
        return result.model_copy(update={"content": content, "metadata": {**result.metadata, "pii_redacted": counts}})

    def _inspect_untrusted(self, ctx: Any, call: ToolCall, result: ToolResult) -> ToolResult | None:
        logged = ctx.state.get("shield.logged")
        if logged and call.id in logged:
            entry = logged.pop(call.id)
            ctx.emit("shield.logged", tool=call.name, call_id=call.id, layer=2, mode=self.config.mode,
                     outcome="error" if result.is_error else "ok", **entry)
        if not self.untrusted(call, result):
            return None
        names = [t.name for t in ctx.tools.visible()]
        detections = self.scanner.scan(result.content, names)
        for d in detections:
            ctx.emit("shield.detection", tool=call.name, call_id=call.id, source=call.name, mode=self.config.mode, **d.as_event())
        score = self.session_score(ctx, call, result.content, detections, names)
        session = ctx.session
        trust = _trust(session)
        new_trust = min(trust, self.config.trust.after_untrusted)
        taints = score >= self.config.taint_threshold
        if taints:
            new_trust = min(new_trust, self.config.trust.after_detection)
            if not session.get("tainted"):
                session.set("tainted", True)
                ctx.emit("shield.tainted", tool=call.name, call_id=call.id, score=score,
                         categories=sorted({d.category for d in detections if d.severity != "low"}), trust=new_trust)
        if new_trust != trust:
            session.set("trust", new_trust)
        if not self.enforcing or _read_by_host():
            return None  # a host proxy (a Wasm module) computes on the raw result; the model reads the module's, wrapped
        serious = [d for d in detections if d.severity != "low"]
        content = result.content
        if self.config.mode == "strict" and serious:
            content = redact(content, detections)
        wrap_it = self.config.wrap == "always" or (self.config.wrap == "detected" and serious)
        if wrap_it:
            content = wrap(content, call.name, serious or None)
        elif serious:  # never let a detected injection through without the warning
            content = wrap(content, call.name, serious)
        if content is result.content:
            return None
        info = {"source": call.name, "detections": len(detections), "score": score, "tainted": bool(session.get("tainted"))}
        return result.model_copy(update={"content": content, "metadata": {**result.metadata, "shield": info}})


_SIMPLE_TYPES: dict[str, Any] = {"string": str, "boolean": bool, "array": list, "object": dict}
_PLAIN_KEYS = {"type", "description", "default", "title"}


def _plainly_valid(schema: dict[str, Any], args: dict[str, Any]) -> bool:
    """A shortcut for the flat schemas tools usually have (``properties`` of plain types,
    ``required``, ``additionalProperties: false``): True only when the arguments are
    certainly valid. Anything else — unsupported keywords, a doubtful value — returns
    False and jsonschema decides (and explains)."""
    if set(schema) - {"type", "properties", "required", "additionalProperties", "title", "description"} or schema.get("type") != "object":
        return False
    props = schema.get("properties") or {}
    if schema.get("additionalProperties") not in (False, None, True) or not isinstance(props, dict):
        return False
    if schema.get("additionalProperties") is False and any(k not in props for k in args):
        return False
    if any(k not in args for k in schema.get("required") or ()):
        return False
    for key, value in args.items():
        sub = props.get(key)
        if sub is None:
            continue
        if not isinstance(sub, dict) or set(sub) - _PLAIN_KEYS:
            return False
        kind = sub.get("type")
        if kind in _SIMPLE_TYPES:
            if type(value) is not _SIMPLE_TYPES[kind]:
                return False
        elif kind == "integer":
            if type(value) is not int:
                return False
        elif kind == "number":
            if type(value) not in (int, float):
                return False
        elif kind is not None:
            return False
    return True


def _schema_key(schema: dict[str, Any]) -> Any:
    props = schema.get("properties")
    return (len(schema), len(props) if isinstance(props, dict) else -1, id(props))


def _plain_spec(schema: dict[str, Any]) -> tuple[bool, dict[str, Any], tuple[str, ...]] | None:
    """What :func:`_plainly_valid` reads of a flat schema, worked out once per schema: (no
    additional properties, property -> Python type(s) or None, required names); None when
    the schema is not that simple (jsonschema always decides then)."""
    if set(schema) - {"type", "properties", "required", "additionalProperties", "title", "description"} or schema.get("type") != "object":
        return None
    props = schema.get("properties") or {}
    if schema.get("additionalProperties") not in (False, None, True) or not isinstance(props, dict):
        return None
    kinds: dict[str, Any] = {}
    for key, sub in props.items():
        if not isinstance(sub, dict) or set(sub) - _PLAIN_KEYS:
            return None
        kind = sub.get("type")
        if kind in _SIMPLE_TYPES:
            kinds[key] = (_SIMPLE_TYPES[kind],)
        elif kind == "integer":
            kinds[key] = (int,)
        elif kind == "number":
            kinds[key] = (int, float)
        elif kind is None:
            kinds[key] = None
        else:
            return None
    return schema.get("additionalProperties") is False, kinds, tuple(schema.get("required") or ())


def _plainly_valid_spec(spec: tuple[bool, dict[str, Any], tuple[str, ...]] | None, args: dict[str, Any]) -> bool:
    """:func:`_plainly_valid` with the schema's part worked out beforehand (:func:`_plain_spec`)."""
    if spec is None or not isinstance(args, dict):
        return False
    closed, kinds, required = spec
    for k in required:
        if k not in args:
            return False
    for key, value in args.items():
        if key not in kinds:
            if closed:
                return False
            continue
        allowed = kinds[key]
        if allowed is not None and type(value) not in allowed:
            return False
    return True


def _trust(session: Any) -> float:
    try:
        return max(0.0, min(1.0, float(session.get("trust", 1.0))))
    except (TypeError, ValueError):
        return 0.0  # unreadable trust: assume the worst


_shields: dict[int, tuple[ShieldConfig, Shield]] = {}


def shield_for(config: ShieldConfig | None) -> Shield:
    """The :class:`Shield` for ``config`` (built once per config object)."""
    _load()
    config = config if config is not None else _DEFAULT
    hit = _shields.get(id(config))
    if hit is not None and hit[0] is config:
        return hit[1]
    if len(_shields) > 64:
        _shields.clear()
    shield = Shield(config)
    _shields[id(config)] = (config, shield)
    return shield


def _config(ctx: Any) -> Any:
    _load()
    return ctx.plugin_config(NAME) or _DEFAULT


def _read_by_host() -> bool:
    """Is the result being inspected read by a host proxy, not the model (``clawkit.context.result_reader``)?"""
    from clawkit.context import result_reader

    return result_reader.get() is not None


def _report_error(ctx: Any, stage: str, call: ToolCall, exc: BaseException) -> None:
    try:
        ctx.emit("shield.error", stage=stage, tool=call.name, call_id=call.id, error=f"{type(exc).__name__}: {exc}")
    except Exception:  # the block below must happen even if reporting fails
        pass


# --- hooks ---------------------------------------------------------------------------------


@hookimpl
def register_config(register):
    # only the config model: jsonschema and the patterns load when a tool call is first checked
    model = globals().get("ShieldConfig")
    if model is None:
        from .config import ShieldConfig as model
    register(NAME, model)


@hookimpl
@hook_order(150)  # after the builtins' gates and plain third-party ones: it validates what will run
def before_tool_call(ctx, call):
    """Layers 1–3; an internal error blocks the call (fail closed)."""
    config = _config(ctx)
    if getattr(config, "enabled", True) is False:
        return None
    try:
        return shield_for(config).gate(ctx, call)
    except Exception as exc:
        _report_error(ctx, "before_tool_call", call, exc)
        return Decision.block(f"the shield could not check this call ({type(exc).__name__}: {exc}); failing closed")


@hookimpl
@hook_order(30)
def after_tool_call(ctx, call, result):
    """Scan and wrap untrusted results; an internal error withholds the result (fail closed).

    Runs after the truncator (docs/hook-order.md): what is scanned and wrapped is what
    the model will see, head and tail, delimiters intact. Parts read back later
    (``read_tool_output``) are untrusted too and are scanned and wrapped again."""
    config = _config(ctx)
    if getattr(config, "enabled", True) is False:
        return None
    try:
        return shield_for(config).inspect_result(ctx, call, result)
    except Exception as exc:
        _report_error(ctx, "after_tool_call", call, exc)
        try:
            ctx.session.set("tainted", True)
        except Exception:
            pass
        return ToolResult(
            call_id=result.call_id, name=result.name, is_error=True,
            content=f"Error: the shield could not check this result ({type(exc).__name__}); its content was withheld.",
            metadata={**result.metadata, "shield": {"error": True}},
        )


@hookimpl
@hook_order(70)
def before_llm_call(ctx, request):
    """Scan untrusted text other plugins put into the prompt; an internal error taints the session."""
    if not ctx.state.get("untrusted_content"):
        return None  # nothing to scan (the usual model call)
    config = _config(ctx)
    if getattr(config, "enabled", True) is False:
        return None
    try:
        shield_for(config).scan_prompt_data(ctx)
    except Exception as exc:
        try:
            ctx.emit("shield.error", stage="before_llm_call", error=f"{type(exc).__name__}: {exc}")
            ctx.session.set("tainted", True)
        except Exception:
            pass
    return None
