"""Agent definitions in YAML, validated by pydantic.

Plugins add their own sections through ``register_config``. Every error names the
file, the line and the field. Strings may use ``${VAR}`` and ``${VAR:-default}``.
Cascade: CLI flags (``overrides``) > environment (``CLAWKIT_MODEL``,
``CLAWKIT_WORKSPACE``, ``CLAWKIT_MAX_TOOL_ROUNDS``) > file > defaults.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Literal

import yaml
from . import safeyaml
from .budget import ContextConfig
from .errors import ConfigError
from .output import OutputConfig
from .storage import is_postgres_url
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, create_model, field_validator,
                      model_validator)


class ModelConfig(BaseModel):
    """Which model to call and how. ``name`` is a litellm model string."""

    model_config = ConfigDict(extra="allow", protected_namespaces=(), defer_build=True)

    name: str = Field(description="litellm model string, e.g. openai/gpt-4o-mini or anthropic/claude-sonnet-4-5")
    provider: str = Field("auto", description="registered model provider to use; auto: the native http "
                          "provider for openai/ and anthropic/ models (and bare names with an api_base), litellm otherwise")
    api_base: str | None = None
    api_key: str | None = None
    api_key_env: str | None = Field(None, description="environment variable holding the API key (when api_key is "
                                    "not set): a fallback model on another account, say; an unset variable is an error")
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = Field(60.0, description="seconds per request")
    call_timeout: float = Field(600.0, ge=0, description="seconds one model call may take in all — a slow stream, "
                                "every retry and its waits included — however often bytes arrive (0: no bound)")
    max_retries: int = Field(5, ge=0, description="retries of a transient failure (connection, timeout, 429, 5xx)")
    retry_base_delay: float = Field(0.5, ge=0, description="seconds before the first retry; doubles each time, with jitter")
    retry_max_delay: float = Field(30.0, ge=0, description="longest wait between two retries (seconds)")
    max_retry_after: float = Field(120.0, ge=0, description="longest Retry-After worth waiting for; a longer one fails at once")
    retry_timeout: float = Field(120.0, ge=0, description="seconds one model call may spend retrying after its first failure, waits included (0: no bound)")
    context_window: int | None = Field(None, description="override the model's known window")
    supports_tools: bool | None = Field(None, description="native tool calling (default: litellm's model table, "
                                        "else true); false: tools through the text protocol (clawkit.tooltext)")
    supports_vision: bool | None = Field(None, description="accepts images (default: litellm's model table, else false)")
    supports_json_schema: bool | None = Field(None, description="accepts a JSON-schema response_format "
                                              "(default: litellm's model table, else false)")
    cache: Literal["auto", "on", "off"] = Field("auto", description="prompt caching (Anthropic cache_control "
                                                "breakpoints): auto = on where litellm's model table says the model "
                                                "supports it; off (or false) sends none (docs/anthropic.md)")
    fallbacks: list["ModelConfig"] = Field(default_factory=list, description="models tried in order when this one "
                                           "fails for good (a name, or a mapping with the keys of model); see docs/fallbacks.md")

    @model_validator(mode="after")
    def _key_from_env(self) -> "ModelConfig":
        if self.api_key_env and not self.api_key:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise ValueError(f"api_key_env: environment variable {self.api_key_env} is not set")
            self.api_key = value
        return self

    @field_validator("cache", mode="before")
    @classmethod
    def _cache_bool(cls, v: Any) -> Any:
        return {False: "off", True: "on"}.get(v, v) if isinstance(v, bool) else v

    @field_validator("fallbacks", mode="before")
    @classmethod
    def _fallback_strings(cls, v: Any) -> Any:
        if isinstance(v, (str, dict)):
            v = [v]
        if isinstance(v, list):
            out = [{"name": x} if isinstance(x, str) else x for x in v]
            for x in out:
                if isinstance(x, dict) and x.get("fallbacks"):
                    raise ValueError("a fallback model cannot have fallbacks of its own (list them all under the first model)")
            return out
        return v

    def settings(self) -> dict[str, Any]:
        """Extra provider settings (everything not a named field)."""
        return dict(self.model_extra or {})


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    context_window: int = Field(128_000, gt=0, description="tokens the model accepts")
    max_tool_rounds: int = Field(20, gt=0, description="model calls with tool use allowed in one turn")
    max_depth: int = Field(2, ge=0, description="sub-agent nesting allowed below this agent (an agent at the limit gets no agent tools)")
    max_parallel_subagents: int = Field(4, gt=0, description="sub-agents one model response may run at once")
    tool_timeout: float = Field(900.0, gt=0, description="seconds any one tool call may take before it is abandoned with an error")
    attachment_max_bytes: int = Field(20 * 1024 * 1024, gt=0, description="the largest attachment (image, PDF, text "
                                      "file) a message may carry, in bytes (docs/attachments.md)")


class SessionsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    transcript: Literal["off", "jsonl"] = Field("off", description="jsonl: a JSONL transcript per session, written as "
                                                "the turn progresses, in the redacted form of `sessions export`")
    transcript_dir: Path | None = Field(None, description="where transcripts go (relative to the workspace; "
                                        "default <workspace>/.clawkit/transcripts)")


class PluginSection(BaseModel):
    """Every plugin section accepts ``enabled``; plugins subclass this (or any model)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True


class AgentConfig(BaseModel):
    """An agent definition. ``plugins`` holds each plugin's own section."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the agent's name")
    model: ModelConfig = Field(description="a litellm model string, or a mapping with name, api_base, api_key…")
    instructions: str = Field("", description="the agent's system instructions")
    tools: list[str] = Field(default_factory=list, description="allowlist of tool names (globs allowed)")
    workspace: Path = Field(Path("."), description="directory the agent works in (relative to the YAML file)")
    state_db: Path | str | None = Field(None, description="the session database: a SQLite file (default <workspace>/.clawkit/state.db) or a postgresql:// URL")
    plugins: Any = Field(default_factory=dict, description="per-plugin sections")
    limits: Limits = Field(default_factory=Limits)
    context: ContextConfig = Field(default_factory=ContextConfig, description="how the window is shared between prompt sources")
    sessions: SessionsConfig = Field(default_factory=SessionsConfig, description="session persistence: the JSONL transcript")
    output: OutputConfig | None = Field(None, description="typed output: the answer must match a JSON Schema (docs/typed-output.md)")
    _source: Path | None = PrivateAttr(None)
    _where_file: str | None = PrivateAttr(None)
    _lines: dict = PrivateAttr(default_factory=dict)

    @property
    def source_file(self) -> Path | None:
        """The YAML file this agent was loaded from (None for an agent built in code);
        plugins resolve files the agent names (a sub-agent's file) relative to it."""
        return self._source

    def where(self, *path: Any) -> str:
        """``file:line`` of a key of the YAML this config came from (``where("tools", 2)``)."""
        if self._where_file is None:
            return "<agent config>"
        line = _line_for(tuple(path), self._lines)
        if isinstance(line, str):  # set by a flag, a variable or a keyword (clawkit.Agent(tools=…))
            return line
        return f"{self._where_file}:{line or '?'}"

    @field_validator("state_db", mode="after")
    @classmethod
    def _state_db(cls, v: Any) -> Any:
        """A ``postgresql://`` URL stays a string (a Path would fold its ``//``); anything else is a file."""
        return v if v is None or is_postgres_url(v) else Path(v)

    @field_validator("model", mode="before")
    @classmethod
    def _model_string(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    def plugin(self, name: str) -> Any:
        """This agent's section for plugin ``name`` (its defaults when the file has none)."""
        if isinstance(self.plugins, dict):
            return self.plugins.get(name)
        return getattr(self.plugins, name, None)

    def disabled_plugins(self) -> list[str]:
        """Plugins this agent turns off with ``plugins: {name: {enabled: false}}``."""
        if isinstance(self.plugins, dict):
            items = list(self.plugins.items())
        else:
            items = list(self.plugins.__dict__.items()) + list((self.plugins.model_extra or {}).items())
        off = []
        for n, s in items:
            enabled = s.get("enabled", True) if isinstance(s, dict) else getattr(s, "enabled", True)
            if enabled is False:
                off.append(n)
        return off


_sections: dict[tuple[int, str, type], tuple[Any, Any, Any]] = {}  # (id(agent config), name, model) -> (it, its plugins, section)


def section_of(agent_config: Any, name: str, model: type[BaseModel]) -> Any:
    """``agent_config``'s section for plugin ``name`` as a ``model`` instance: as validated, or converted
    (a dict, or a section validated as another model, without its ``enabled`` switch), or ``model``'s
    defaults when there is none. Asked several times a turn by a plugin's hooks: remembered per agent
    config object while its ``plugins`` is the same object (a reloaded config is a new object)."""
    if agent_config is None or not hasattr(agent_config, "plugin"):
        return model()
    key = (id(agent_config), name, model)
    plugins = getattr(agent_config, "plugins", None)
    hit = _sections.get(key)
    if hit is not None and hit[0] is agent_config and hit[1] is plugins:
        return hit[2]
    raw = agent_config.plugin(name)
    if isinstance(raw, model):
        section = raw
    elif isinstance(raw, BaseModel):
        section = model.model_validate({k: v for k, v in raw.model_dump().items() if k != "enabled"})
    elif isinstance(raw, dict):
        section = model.model_validate({k: v for k, v in raw.items() if k != "enabled"})
    else:
        section = model()
    if len(_sections) >= 256:
        _sections.clear()
    _sections[key] = (agent_config, plugins, section)
    return section


# --- schema assembly ---------------------------------------------------------------------


def build_agent_model(sections: Iterable[tuple[str, type[BaseModel], bool]]) -> type[AgentConfig]:
    """AgentConfig extended with plugin sections (``name, model, top_level``)."""
    plugin_fields: dict[str, Any] = {}
    top_fields: dict[str, Any] = {}
    for name, model, top_level in sections:
        if top_level:
            top_fields[name] = (model, Field(default_factory=model))
        else:
            if "enabled" not in model.model_fields:
                model = create_model(f"{model.__name__}Section", __base__=model, enabled=(bool, True))
            plugin_fields[name] = (model, Field(default_factory=model))
    plugins_model = create_model(
        "PluginsConfig", __config__=ConfigDict(extra="allow"), __base__=None, **plugin_fields
    )
    return create_model(
        "AgentConfig",
        __base__=AgentConfig,
        plugins=(plugins_model, Field(default_factory=plugins_model, description="per-plugin sections")),
        **top_fields,
    )


def collect_sections(hooks) -> list[tuple[str, type[BaseModel], bool]]:
    """Ask every plugin's ``register_config`` for its sections."""
    sections: list[tuple[str, type[BaseModel], bool]] = []

    def register(name: str, model: type[BaseModel], top_level: bool = False) -> None:
        sections.append((name, model, top_level))

    hooks.call_sync("register_config", register=register)
    return sections


# --- YAML with line numbers --------------------------------------------------------------

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(text: str, env: dict[str, str], where: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env and env[name] != "":
            return env[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set (use ${{{name}:-default}})")

    return _VAR.sub(sub, text)


def _construct(node: yaml.Node, path: tuple, lines: dict[tuple, int], env: dict[str, str], file: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            key = yaml.safe_load(yaml.serialize(knode)) if not isinstance(knode, yaml.ScalarNode) else knode.value
            if key in out:
                raise ConfigError(f"{file}:{knode.start_mark.line + 1}: duplicate key {key!r}")
            lines[path + (key,)] = knode.start_mark.line + 1
            out[key] = _construct(vnode, path + (key,), lines, env, file)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(n, path + (i,), lines, env, file) for i, n in enumerate(node.value)]
    if node.tag == "tag:yaml.org,2002:bool" and node.value.lower() not in ("true", "false"):
        # YAML 1.2: only true/false are booleans. ``name: off`` stays the string "off"; a bool field
        # still takes it (pydantic reads "off"/"no"/"on"/"yes" as booleans)
        return interpolate(node.value, env, f"{file}:{node.start_mark.line + 1}")
    loader = yaml.SafeLoader("")
    value = loader.construct_object(node)
    if isinstance(value, str):
        value = interpolate(value, env, f"{file}:{node.start_mark.line + 1}")
    return value


def parse_yaml(text: str, file: str, env: dict[str, str] | None = None) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML keeping each key's line: ``(data, {path: line})``."""
    env = dict(os.environ) if env is None else env
    try:
        node = safeyaml.compose(text, file)  # bounded: alias bombs and deep nesting are refused
    except yaml.YAMLError as exc:
        # the construct that was left open (context) locates the mistake better than
        # where the parser gave up, which is often the end of the file
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        where = f"{file}:{mark.line + 1}" if mark else file
        context = f"{exc.context}: " if getattr(exc, "context", None) else ""
        raise ConfigError(f"{where}: invalid YAML: {context}{getattr(exc, 'problem', exc)}") from None
    if node is None:
        return {}, {}
    lines: dict[tuple, int] = {}
    return _construct(node, (), lines, env, file), lines


def _line_for(loc: tuple, lines: dict[tuple, int]) -> int | None:
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def _keys_at(model: Any, loc: tuple) -> list[str]:
    """The keys a pydantic model accepts at ``loc`` (field names and aliases), for "did you mean"."""
    import typing

    cur = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(cur, "model_fields", None)
        if not fields or part not in fields:
            return []
        ann, cur = fields[part].annotation, None
        for t in (ann, *typing.get_args(ann), *(a for x in typing.get_args(ann) for a in typing.get_args(x))):
            if isinstance(t, type) and issubclass(t, BaseModel):
                cur = t
                break
        if cur is None:
            return []
    fields = getattr(cur, "model_fields", None) or {}
    return [*fields, *(f.alias for f in fields.values() if f.alias)]


def format_validation_error(exc: ValidationError, file: str, lines: dict[tuple, int], model: Any = None) -> str:
    """One line per error: ``file:line: field: message``; an unknown key close to a known one
    says which (``did you mean `tools`?``) when ``model`` is given."""
    import difflib

    parts = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        field = ".".join(str(p) for p in loc) or "(top level)"
        line = _line_for(loc, lines)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
            close = difflib.get_close_matches(str(loc[-1]), _keys_at(model, loc[:-1]), n=1) if model and loc else []
            if close:
                msg += f" (did you mean `{close[0]}`?)"
        where = line if isinstance(line, str) else f"{file}:{line or '?'}"  # a str: set by a flag or variable
        parts.append(f"{where}: {msg}" if where == f"--set {field}" else f"{where}: {field}: {msg}")
    return "\n".join(parts)


ENV_OVERRIDES = {
    "CLAWKIT_MODEL": ("model", "name"),
    "CLAWKIT_WORKSPACE": ("workspace",),
    "CLAWKIT_STATE_DB": ("state_db",),
    "CLAWKIT_MAX_TOOL_ROUNDS": ("limits", "max_tool_rounds"),
}


def _set_path(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    cur = data
    for key in path[:-1]:
        nxt = cur.get(key)
        if isinstance(nxt, str) and key == "model":
            nxt = {"name": nxt}
        if not isinstance(nxt, dict):
            nxt = {}
        cur[key] = nxt
        cur = nxt
    cur[path[-1]] = value


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], env: dict[str, str],
                    lines: dict[tuple, Any] | None = None) -> dict[str, Any]:
    """Environment then CLI overrides (``{"limits.max_tool_rounds": 3}``) on top of the file.

    ``lines`` (path → line) is told where each overridden value came from, so a bad
    value is blamed on the flag or variable, not on a line of the file."""
    for var, path in ENV_OVERRIDES.items():
        if env.get(var):
            _set_path(data, path, env[var])
            if lines is not None:
                lines[path] = f"${var}"
    for dotted, value in overrides.items():
        path = tuple(dotted.split("."))
        if path == ("model",) and isinstance(data.get("model"), dict):
            path = ("model", "name")
        _set_path(data, path, value)
        if lines is not None:
            lines[path] = f"--{dotted}" if dotted in ("model", "workspace") else f"--set {dotted}"
    return data


def load_agent(
    path: str | Path,
    *,
    sections: Iterable[tuple[str, type[BaseModel], bool]] = (),
    overrides: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> AgentConfig:
    """Load and validate an agent YAML file; raises :class:`ConfigError` naming file, line, field."""
    path = Path(path)
    env = dict(os.environ) if env is None else env
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read agent file: {exc.strerror or exc}") from None
    data, lines = parse_yaml(text, str(path), env)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: an agent file must be a mapping of keys (name, model, …)")
    data = apply_overrides(data, overrides or {}, env, lines)
    cfg = validate_agent(data, str(path), lines, sections, base_dir=path.parent)
    cfg._source = path.resolve()
    return cfg


def validate_agent(
    data: dict[str, Any],
    file: str,
    lines: dict[tuple, int],
    sections: Iterable[tuple[str, type[BaseModel], bool]] = (),
    base_dir: Path | None = None,
    model: type[AgentConfig] | None = None,
) -> AgentConfig:
    """``data`` (read from ``file``; ``lines``: key path → line) as an agent config of the installed
    plugins' ``sections`` — or of ``model``, an agent class already built from them (``type(config)``
    of a running agent: a sub-agent's file checked against its parent's plugins). ConfigError names
    the file, line and field."""
    if model is None:
        sections = list(sections)
        model = build_agent_model(sections)
        known = {n for n, _, top in sections if not top}
    else:
        known = set(getattr(model.model_fields["plugins"].annotation, "model_fields", {}))
    plugins = data.get("plugins") or {}
    if isinstance(plugins, dict):
        for name, section in plugins.items():
            if name not in known and not (isinstance(section, dict) and section.get("enabled") is False):
                avail = ", ".join(sorted(known)) or "none"
                raise ConfigError(
                    f"{file}:{lines.get(('plugins', name), '?')}: plugins.{name}: no installed plugin declares "
                    f"this section (installed sections: {avail})"
                )
    try:
        cfg = model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, file, lines, model)) from None
    cfg._where_file, cfg._lines = file, lines
    if base_dir is not None and not cfg.workspace.is_absolute():
        cfg.workspace = (base_dir / cfg.workspace).resolve()
    if base_dir is not None and isinstance(cfg.state_db, Path) and not cfg.state_db.is_absolute():
        cfg.state_db = (base_dir / cfg.state_db).resolve()
    return cfg
