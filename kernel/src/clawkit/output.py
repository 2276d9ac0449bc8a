"""Typed outputs: an answer that must match a schema (docs/typed-output.md).

An :class:`OutputSpec` is what a run's answer must satisfy: a JSON Schema (from YAML
``output:``, ``--schema``, a client's ``response_format``) or any type pydantic can
validate (``Agent.run(..., output_type=Model)``). The loop asks it how to send the schema
(:func:`choose_mode`): natively as an OpenAI-style ``response_format`` where the provider and
model take one, otherwise as a forced final tool (``tool_choice`` any/required, with the
agent's own tools still offered). It validates every final answer; one that fails goes back
to the model with the errors, up to ``retries`` times, then :class:`OutputValidationError`.

A schema whose root is not an object (``list[int]``, ``int``) travels wrapped as
``{"response": <value>}`` — both wire forms require an object — and is unwrapped here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FINAL_TOOL = "final_answer"
WRAP_KEY = "response"
DEFAULT_RETRIES = 2
Mode = Literal["native", "tool", "prompt"]


class OutputConfig(BaseModel):
    """YAML ``output:`` — the agent's answers must match a JSON Schema."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    json_schema: dict[str, Any] | None = Field(None, alias="schema", description="JSON Schema the answer must satisfy")
    schema_file: Path | None = Field(None, description="a file holding the JSON Schema (relative to the agent file)")
    retries: int = Field(DEFAULT_RETRIES, ge=0, description="times an answer that fails validation goes back to the model "
                         "with the errors before the run fails (exit code 6)")
    strategy: Literal["auto", "native", "tool"] = Field(
        "auto", description="how the schema is sent: native (response_format json_schema), tool (a forced final "
        "tool), auto (native where the provider and model take it, per model.supports_json_schema, else tool)")
    name: str = Field("answer", pattern=r"^[A-Za-z0-9_-]{1,64}$", description="the schema's name as the model sees it")

    @model_validator(mode="after")
    def _one_source(self) -> "OutputConfig":
        if (self.json_schema is None) == (self.schema_file is None):
            raise ValueError("give exactly one of 'schema' (a JSON Schema mapping) or 'schema_file'")
        if self.json_schema is not None:
            check_schema(self.json_schema)
        return self


class OutputValidationError(Exception):
    """The model's answer did not match the output schema after every retry (CLI exit code 6).

    ``errors`` are the last answer's validation errors; ``reply`` its text; ``attempts`` the
    answers tried; ``session_id`` / ``run_id`` where the answers are stored."""

    def __init__(self, errors: list[str], *, reply: str = "", attempts: int = 1, session_id: str = "", run_id: str = ""):
        self.errors, self.reply, self.attempts = errors, reply, attempts
        self.session_id, self.run_id = session_id, run_id
        super().__init__(f"the answer does not match the output schema after {attempts} attempt(s): " + "; ".join(errors))


class InvalidAnswer(Exception):
    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("; ".join(errors))


def check_schema(schema: Any) -> None:
    """Raise ``ValueError`` naming the problem when ``schema`` is not a valid JSON Schema."""
    import jsonschema

    if not isinstance(schema, dict):
        raise ValueError(f"a JSON Schema must be a mapping, not {type(schema).__name__}")
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        path = "/".join(map(str, exc.absolute_path))
        raise ValueError(f"not a valid JSON Schema{f' at {path}' if path else ''}: {exc.message}") from None


# --- the concise form (llm's: 'name, age int, bio: a short bio') ----------------------------

CONCISE_TYPES = {"str": "string", "string": "string", "int": "integer", "integer": "integer", "float": "number",
                 "number": "number", "bool": "boolean", "boolean": "boolean"}
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)(?:\s+([A-Za-z]+(?:\[[A-Za-z]+\])?))?\s*(?::\s*(.*))?$", re.S)


def concise_schema(text: str) -> dict[str, Any]:
    """An object schema from the concise form: fields separated by commas (or by newlines, when
    there are any — descriptions may then hold commas), each ``name [type][: description]``.
    Types: ``str`` (the default), ``int``, ``float``, ``bool``, ``list`` (of strings) or
    ``list[int]`` and the like. Every field is required."""
    parts = [p.strip() for p in (text.splitlines() if "\n" in text.strip() else text.split(","))]
    props: dict[str, Any] = {}
    for part in filter(None, parts):
        m = _FIELD.match(part)
        if not m:
            raise ValueError(f"concise schema: cannot read {part!r} (expected 'name [type][: description]')")
        name, kind, desc = m.group(1), (m.group(2) or "str").lower(), m.group(3)
        if kind == "list" or kind.startswith("list["):
            inner = kind[5:-1] if kind.startswith("list[") else "str"
            if inner not in CONCISE_TYPES:
                raise ValueError(f"concise schema: {part!r}: unknown item type {inner!r} (str, int, float, bool)")
            prop: dict[str, Any] = {"type": "array", "items": {"type": CONCISE_TYPES[inner]}}
        elif kind in CONCISE_TYPES:
            prop = {"type": CONCISE_TYPES[kind]}
        else:
            raise ValueError(f"concise schema: {part!r}: unknown type {kind!r} (str, int, float, bool, list, list[int]…)")
        if desc:
            prop["description"] = desc.strip()
        props[name] = prop
    if not props:
        raise ValueError("concise schema: no fields")
    return {"type": "object", "properties": props, "required": list(props)}


def schema_from_text(text: str, base: Path | None = None) -> dict[str, Any]:
    """``--schema``'s argument: inline JSON, a file holding JSON Schema, or the concise form."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            schema = json.loads(stripped)
        except ValueError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
    else:
        path = Path(stripped)
        if base is not None and not path.is_absolute() and not path.exists():
            path = base / path
        if stripped and "\n" not in stripped and "," not in stripped and path.is_file():
            schema = load_schema_file(path)
        else:
            schema = concise_schema(stripped)
    check_schema(schema)
    return schema


def load_schema_file(path: Path) -> dict[str, Any]:
    """A JSON (or YAML) file holding a JSON Schema."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the schema file ({exc.strerror or exc})") from None
    try:
        schema = json.loads(text)
    except ValueError:
        import yaml

        try:
            schema = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: neither JSON nor YAML ({exc})") from None
    try:
        check_schema(schema)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return schema


# --- the spec -------------------------------------------------------------------------------


@dataclass
class OutputSpec:
    """What one run's answer must satisfy. Build with :meth:`of`."""

    schema: dict[str, Any]
    name: str = "answer"
    retries: int = DEFAULT_RETRIES
    strategy: str = "auto"
    adapter: Any = None  # a pydantic TypeAdapter when a Python type was given
    json_object: bool = False  # any JSON object (a client's response_format json_object)
    wrapped: bool = field(init=False)

    def __post_init__(self) -> None:
        self.wrapped = self.schema.get("type") != "object"

    @classmethod
    def of(cls, thing: Any, *, retries: int | None = None, config: Any = None) -> "OutputSpec":
        """An :class:`OutputSpec` from a spec, a Python type (a pydantic model, ``list[int]``…),
        a JSON Schema mapping, an OpenAI ``response_format`` mapping, ``--schema`` text, or an
        :class:`OutputConfig` (``config``: the agent, to resolve ``schema_file``)."""
        if isinstance(thing, OutputSpec):
            spec = dataclasses.replace(thing) if retries is not None else thing
        elif isinstance(thing, OutputConfig):
            schema = thing.json_schema
            if schema is None:
                base = config.source_file.parent if config is not None and config.source_file else Path(".")
                path = thing.schema_file if thing.schema_file.is_absolute() else base / thing.schema_file
                schema = load_schema_file(path)
            spec = cls(schema, name=thing.name, retries=thing.retries, strategy=thing.strategy)
        elif isinstance(thing, str):
            spec = cls(schema_from_text(thing))
        elif isinstance(thing, dict) and thing.get("type") in ("json_schema", "json_object") and \
                ("json_schema" in thing or thing.get("type") == "json_object"):
            spec = cls.from_response_format(thing)
        elif isinstance(thing, dict):
            check_schema(thing)
            spec = cls(thing)
        else:
            try:
                adapter, schema, name = _adapter(thing)
            except TypeError:  # an unhashable type form: built for this run only
                adapter, schema, name = _adapter.__wrapped__(thing)
            spec = cls(schema, name=name, adapter=adapter)
        if retries is not None:
            spec.retries = retries
        return spec

    @classmethod
    def from_response_format(cls, rf: dict[str, Any]) -> "OutputSpec":
        """A client's ``response_format`` (``json_schema`` with ``{name, schema, strict}``, or ``json_object``)."""
        if rf.get("type") == "json_object":
            return cls({"type": "object"}, json_object=True)
        js = rf.get("json_schema") or {}
        schema = js.get("schema") or {"type": "object"}
        check_schema(schema)
        name = str(js.get("name") or "answer")
        return cls(schema, name=re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer")

    # --- what is sent ----------------------------------------------------------------------

    def wire_schema(self) -> dict[str, Any]:
        """The schema as sent: an object (a non-object root wrapped under ``response``), each object
        that requires all its properties closed (``additionalProperties: false``) so that it can
        go strict; answers are validated against the schema as given."""
        if "_wire" not in self.__dict__:
            self.__dict__["_wire"] = _closed(self._wrapped_schema())
        return self.__dict__["_wire"]

    def _wrapped_schema(self) -> dict[str, Any]:
        if not self.wrapped:
            return self.schema
        inner = {k: v for k, v in self.schema.items() if k not in ("$defs", "definitions")}
        out: dict[str, Any] = {"type": "object", "properties": {WRAP_KEY: inner}, "required": [WRAP_KEY],
                               "additionalProperties": False}
        for k in ("$defs", "definitions"):
            if k in self.schema:
                out[k] = self.schema[k]
        return out

    def strict(self) -> bool:
        """OpenAI's strict mode takes only schemas whose every object closes its properties and
        requires them all; a schema that does not is sent non-strict (and validated here)."""
        return not self.json_object and _strict_ok(self.wire_schema())

    def response_format(self) -> dict[str, Any]:
        if self.json_object:
            return {"type": "json_object"}
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.wire_schema(), "strict": self.strict()}}

    def final_tool(self) -> Any:
        from .types import ToolDef

        params = {"type": "object", "additionalProperties": True} if self.json_object else self.wire_schema()
        return ToolDef(name=FINAL_TOOL, description=f"Give your final answer ({self.name}) by calling this tool; "
                       "its arguments are the answer. Call it once, when you are done with any other tools.",
                       parameters=params, trusted_output=True)

    def instruction(self) -> str:
        """The note for a model that gets the schema in the prompt only (no tools, no native form)."""
        return ("Answer with only a JSON value (no prose, no code fence) that satisfies this JSON Schema:\n"
                + json.dumps(self.wire_schema()))

    # --- what comes back -------------------------------------------------------------------

    def validate_text(self, text: str) -> tuple[Any, str]:
        try:
            value = json.loads(_unfence(text))
        except ValueError as exc:
            raise InvalidAnswer([f"the answer is not JSON ({exc})"]) from None
        return self.validate_value(value)

    def validate_value(self, value: Any) -> tuple[Any, str]:
        """``(output, canonical JSON text)``, or :class:`InvalidAnswer` with the errors."""
        if self.wrapped:
            if not isinstance(value, dict) or WRAP_KEY not in value:
                raise InvalidAnswer([f"the answer must be an object with the key {WRAP_KEY!r} holding the value"])
            value = value[WRAP_KEY]
        if self.adapter is not None:
            from pydantic import ValidationError

            try:
                out = self.adapter.validate_python(value)
            except ValidationError as exc:
                raise InvalidAnswer([f"{'.'.join(map(str, e['loc'])) or 'the value'}: {e['msg']}"
                                     for e in exc.errors()[:8]]) from None
            return out, self.adapter.dump_json(out).decode()
        validator = self.__dict__.get("_validator")
        if validator is None:
            import jsonschema

            validator = self.__dict__["_validator"] = jsonschema.validators.validator_for(self.schema)(self.schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))[:8]
        if errors:
            raise InvalidAnswer([f"{'.'.join(map(str, e.absolute_path)) or 'the value'}: {e.message[:200]}" for e in errors])
        return value, json.dumps(value, ensure_ascii=False)


@functools.lru_cache(maxsize=64)
def _adapter(thing: Any) -> tuple[Any, dict[str, Any], str]:
    """A type's pydantic TypeAdapter, JSON Schema and name, built once per type (building costs ~ms)."""
    from pydantic import TypeAdapter

    adapter = TypeAdapter(thing)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", getattr(thing, "__name__", "answer"))[:64] or "answer"
    return adapter, adapter.json_schema(), name


def _unfence(text: str) -> str:
    body = text.strip()
    if body.startswith("```"):  # models fence JSON even when asked not to
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    return body


def _closed(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (v if k in ("enum", "const", "default", "examples") else _closed(v)) for k, v in schema.items()}
    props = out.get("properties")
    if isinstance(props, dict) and "additionalProperties" not in out and set(out.get("required") or ()) == set(props):
        out["additionalProperties"] = False
    return out


def _strict_ok(schema: Any) -> bool:
    if isinstance(schema, list):
        return all(_strict_ok(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False or set(schema.get("required") or ()) != set(props):
            return False
    return all(_strict_ok(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples"))


def choose_mode(spec: OutputSpec, agent: Any, request: Any) -> Mode:
    """How ``spec`` is sent to ``agent``'s model: ``native`` (response_format), ``tool`` (a forced
    final tool), or ``prompt`` (a model without native tool calling nor JSON schemas: the schema
    in the prompt, the answer validated all the same).

    Native needs both a provider that sends ``response_format`` (its ``takes_response_format``;
    a provider that does not say is assumed to, except for Anthropic models) and a model that
    takes JSON schemas (``model.supports_json_schema``, else litellm's model table), or
    ``output.strategy: native``."""
    from .capabilities import model_capabilities

    caps = model_capabilities(agent.config.model, request.model or None)
    takes = getattr(_provider(agent), "takes_response_format", None)
    if takes is None:  # a provider that does not say: Anthropic models take a forced tool best
        takes = not str(request.model or agent.config.model.name).startswith(("anthropic/", "claude"))
    # JSON mode (json_object) is near universal among OpenAI-compatible servers; JSON schemas are not
    wants_native = spec.strategy == "native" or (spec.strategy == "auto" and (caps.supports_json_schema or spec.json_object))
    if takes and wants_native:
        return "native"
    if caps.supports_tools:
        return "tool"
    return "native" if takes and caps.supports_json_schema else "prompt"


def _provider(agent: Any) -> Any:
    try:
        return agent.provider
    except Exception:  # the model call reports a missing provider
        return None


@dataclass
class Answer:
    ok: bool
    value: Any = None
    text: str = ""
    errors: list[str] = field(default_factory=list)
    call: Any = None  # the final-tool call the answer came in (tool mode)


class OutputRun:
    """One turn's typed output: how each request carries the schema, and each answer's verdict."""

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.mode: Mode = "native"
        self.failures = 0

    def prepare(self, agent: Any, request: Any) -> None:
        """Put the schema into ``request`` the way its provider and model take it best. The answer
        is not streamed: it means something only once validated."""
        self.mode = choose_mode(self.spec, agent, request)
        request.stream = False
        if self.mode == "native":
            request.response_format = self.spec.response_format()
        elif self.mode == "tool":
            request.tools = [t for t in request.tools if t.name != FINAL_TOOL] + [self.spec.final_tool()]
            if _thinking(request, agent):
                # Anthropic refuses a forced tool while extended thinking is on: the model is told instead
                # (an answer in plain text is validated all the same)
                request.tool_choice = None
                request.system = (request.system + "\n\n" if request.system else "") + \
                    f"When you are done, give your final answer by calling the {FINAL_TOOL} tool."
            else:
                # a tool call is required: one of the agent's tools, or the answer; only the answer when alone
                request.tool_choice = "required" if len(request.tools) > 1 else {"name": FINAL_TOOL}
        else:
            request.system = (request.system + "\n\n" if request.system else "") + self.spec.instruction()

    def take(self, response: Any, tools_on: bool) -> Answer | None:
        """The verdict on ``response``, or None when it is a round of the agent's own tool calls."""
        final = next((c for c in response.tool_calls if c.name == FINAL_TOOL), None)
        if final is not None:
            if final.argument_error:
                return Answer(False, errors=[f"the arguments are not valid JSON ({final.argument_error})"], call=final)
            return self._verdict(lambda: self.spec.validate_value(final.arguments), final)
        if response.tool_calls and tools_on:
            return None
        return self._verdict(lambda: self.spec.validate_text(response.content), None)

    def _verdict(self, check: Any, call: Any) -> Answer:
        try:
            value, text = check()
        except InvalidAnswer as exc:
            self.failures += 1
            return Answer(False, errors=exc.errors, call=call)
        return Answer(True, value=value, text=text, call=call)

    def exhausted(self) -> bool:
        return self.failures > self.spec.retries

    @staticmethod
    def answer_text(response: Any, answer: Answer) -> str:
        """A failed answer as text: the reply, or the final-tool call's arguments as sent."""
        call = answer.call
        if call is None:
            return response.content
        if call.argument_error and call.raw_arguments is not None:
            return call.raw_arguments
        return json.dumps(call.arguments, ensure_ascii=False)

    def feedback(self, answer: Answer) -> Any:
        """The message that sends a failed answer's errors back to the model. A failed final-tool
        call is stored as its text (:meth:`answer_text`) and answered by this user message, not by a
        tool result: a later untyped turn may offer no tools, and Anthropic refuses a history with
        ``tool_use`` blocks then."""
        from .types import Message

        left = self.spec.retries - self.failures + 1
        how = f" by calling {FINAL_TOOL}" if answer.call is not None else ""
        note = ("Your answer does not match the required schema:\n- " + "\n- ".join(answer.errors)
                + f"\nAnswer again, corrected{how} ({left} attempt(s) left).")
        return Message(role="user", content=note, metadata={"kernel_note": True, "output_invalid": True})


def _thinking(request: Any, agent: Any = None) -> bool:
    """Whether extended thinking is on for this request (Anthropic's ``thinking`` setting: in the
    request's settings or metadata, or in the model mapping's provider settings)."""
    model = getattr(getattr(agent, "config", None), "model", None)
    extras = model.settings() if hasattr(model, "settings") else {}
    for where in (request.settings, request.metadata, extras):
        value = where.get("thinking") if isinstance(where, dict) else None
        if value is True or (isinstance(value, dict) and value.get("type") not in (None, "disabled")):
            return True
    return False


def resolve(agent: Any, ctx: Any, output_type: Any) -> OutputRun | None:
    """This turn's typed output: ``output_type`` of the call, else the agent's ``output_type``,
    else ``ctx.state["output"]`` (a plugin's: serve puts a client's response_format there), else
    the agent's YAML ``output:``; None when none asks for one."""
    for thing in (output_type, getattr(agent, "output_type", None), ctx.state.get("output"),
                  getattr(agent.config, "output", None)):
        if thing is None:
            continue
        built = agent.__dict__.setdefault("_output_specs", {})  # the agent's file's spec: read once
        if isinstance(thing, OutputConfig):
            if id(thing) not in built:
                from .errors import ConfigError

                try:
                    built[id(thing)] = (thing, OutputSpec.of(thing, config=agent.config))
                except ValueError as exc:
                    raise ConfigError(f"{agent.config.where('output')}: output: {exc}") from None
            return OutputRun(built[id(thing)][1])
        return OutputRun(OutputSpec.of(thing, config=agent.config))
    return None
