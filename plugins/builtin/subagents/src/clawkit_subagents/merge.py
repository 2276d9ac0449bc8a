"""A child's plugin sections held to its parent's: the stricter of the two wins, key by key.

A child's own YAML file (or inline mapping) may tighten what its parent enforces, never
relax it. :func:`hold` takes the parent's *effective* sections (after ``--set``, the
environment and defaults) and the child's raw ``plugins:`` mapping, and returns the
child's mapping with every security key merged by the rule written next to it. The
sections are plain data here: this plugin never imports the plugins it constrains.

Sections of plugins this module has no rule for are left as the child wrote them; the
plugins that gate calls cannot be switched off by a child (:func:`kept_on`).
"""

from __future__ import annotations

import fnmatch
from typing import Any, Callable

RISK_ORDER = {"safe": 0, "guarded": 1, "unsafe": 2}
SHIELD_MODES = {"audit-only": 0, "permissive": 1, "strict": 2}
SHIELD_WRAP = {"never": 0, "detected": 1, "always": 2}
NETWORK = {"all": 0, "proxy": 1, "refuse": 2}
STEP_SCOPE = {"persistent": 0, "run": 1, "step": 2}  # narrower = stricter
UNTRUSTED_EGRESS = {"alarm-only": 0, "ask": 1}
ROUTED_MANIFESTS = {"guide": 0, "ask": 1}
GATE_HOOKS = ("before_tool_call", "after_tool_call", "confine_process")


def _level(value: Any) -> str:
    return str(getattr(value, "value", value))


def _strictest(order: dict[str, int], a: Any, b: Any) -> Any:
    """The stricter of two enumerated values (an unknown child value counts as the parent's)."""
    if b is None or _level(b) not in order:
        return a
    if a is None or _level(a) not in order:
        return b
    return a if order[_level(a)] >= order[_level(b)] else b


def _union(a: list | None, b: list | None) -> list:
    return list(dict.fromkeys([*(a or []), *(b or [])]))


def _within(a: list | None, b: Any) -> list:
    """The child's entries the parent also has (a child list never adds to the parent's)."""
    if not isinstance(b, list):
        return list(a or [])
    return [x for x in b if x in (a or [])]


def _bound(pick: Any, a: Any, b: Any) -> Any:
    """``pick`` (min or max) of the parent's ``a`` and the child's ``b``; a child value that is not a
    number is ignored."""
    if a is None:
        return b
    if b is None or not isinstance(b, (int, float)) or isinstance(b, bool):
        return a
    return pick(a, b)


def _min(a: Any, b: Any) -> Any:
    return _bound(min, a, b)


def _max(a: Any, b: Any) -> Any:
    return _bound(max, a, b)


def _either(a: Any, b: Any) -> bool:
    """A protection the parent turns on stays on."""
    return bool(a) or bool(b if isinstance(b, bool) else False)


def _both(a: Any, b: Any) -> bool:
    """A permission the parent withholds stays withheld."""
    return bool(a) and (b if isinstance(b, bool) else bool(a))


def _risk_of(risk: dict[str, Any], name: str, default: str) -> str:
    for pattern, level in (risk or {}).items():
        if fnmatch.fnmatchcase(name, pattern):
            return _level(level)
    return default


def hold_policy(parent: dict[str, Any], child: dict[str, Any], tool_risks: dict[str, str]) -> dict[str, Any]:
    """Risk: each of the parent's tools gets the higher of the parent's and the child's level
    (written out per tool, then the parent's own patterns, then the child's for tools only
    the child has). Grants are checked by the caller (:func:`clawkit_subagents.children.covered`)."""
    out = dict(child)
    p_risk, c_risk = dict(parent.get("risk") or {}), dict(child.get("risk") or {})
    risk: dict[str, str] = {}
    for name, default in tool_risks.items():
        mine, theirs = _risk_of(p_risk, name, default), _risk_of(c_risk, name, "")
        risk[name] = mine if not theirs or RISK_ORDER.get(mine, 2) >= RISK_ORDER.get(theirs, 0) else theirs
    for pattern, level in [*p_risk.items(), *c_risk.items()]:
        risk.setdefault(pattern, _level(level))
    out["risk"] = risk
    out["guarded_approval"] = "call" if parent.get("guarded_approval", "call") == "call" else child.get("guarded_approval", "tool")
    out["approval_ttl"] = _min(parent.get("approval_ttl"), child.get("approval_ttl"))
    out["step_grants"] = _both(parent.get("step_grants", True), child.get("step_grants"))
    out["step_grant_scope"] = _strictest(STEP_SCOPE, parent.get("step_grant_scope"), child.get("step_grant_scope"))
    for key in ("audit", "redact_results"):
        out[key] = _either(parent.get(key, True), child.get(key))
    for key in ("egress_tools", "secret_env"):
        out[key] = _union(parent.get(key), child.get(key))
    # provenance: a child never asks less while untrusted, nor vouches for more than its parent does
    out["untrusted_egress"] = _strictest(UNTRUSTED_EGRESS, parent.get("untrusted_egress"), child.get("untrusted_egress"))
    for key in ("trusted_paths", "trusted_commands"):
        out[key] = _within(parent.get(key), child.get(key)) if key in child else list(parent.get(key) or [])
    return {k: v for k, v in out.items() if v is not None}


def hold_shield(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(child)
    out["mode"] = _strictest(SHIELD_MODES, parent.get("mode"), child.get("mode"))
    out["wrap"] = _strictest(SHIELD_WRAP, parent.get("wrap"), child.get("wrap"))
    for key, pick in (("thresholds", _min), ("trust", _min), ("weights", _max)):
        p, c = dict(parent.get(key) or {}), child.get(key) if isinstance(child.get(key), dict) else {}
        out[key] = {k: pick(v, c.get(k)) for k, v in p.items()}
    out["taint_threshold"] = _min(parent.get("taint_threshold"), child.get("taint_threshold"))
    out["max_scan_chars"] = _max(parent.get("max_scan_chars"), child.get("max_scan_chars"))
    out["validate_arguments"] = _either(parent.get("validate_arguments", True), child.get("validate_arguments"))
    for key in ("untrusted_tools", "sensitive_paths", "extra_sensitive_paths"):
        out[key] = _union(parent.get(key), child.get(key))
    cmap = child.get("capability_map") if isinstance(child.get("capability_map"), dict) else {}
    out["capability_map"] = {**cmap, **dict(parent.get("capability_map") or {})}  # the parent's mapping wins
    return {k: v for k, v in out.items() if v is not None}


def hold_sequence(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(child)
    mine = [r for r in child["rules"] if isinstance(r, dict)] if isinstance(child.get("rules"), list) else []
    theirs = list(parent.get("rules") or [])
    out["rules"] = theirs + [r for r in mine if r not in theirs]  # the parent's rules bind; the child may add
    out["count_failed"] = _both(parent.get("count_failed", False), child.get("count_failed"))
    p_dir = dict(parent.get("directives") or {})
    c_dir = child.get("directives") if isinstance(child.get("directives"), dict) else {}
    held = dict(c_dir)
    held["enabled"] = _either(p_dir.get("enabled", True), c_dir.get("enabled"))  # obeying escalateToOwner stays on
    held["untrusted_tools"] = _union(p_dir.get("untrusted_tools"), c_dir.get("untrusted_tools"))
    held["trusted_tools"] = _within(p_dir.get("trusted_tools"), c_dir.get("trusted_tools"))
    out["directives"] = held
    return {k: v for k, v in out.items() if v is not None}


def hold_sandbox(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(child)
    mode = parent.get("mode")
    out["mode"] = mode if mode != "off" else child.get("mode", mode)  # the parent's jail stays on
    out["bwrap"] = parent.get("bwrap")  # the child never names the jail's executable
    out["network_grants"] = _strictest(NETWORK, parent.get("network_grants"), child.get("network_grants"))
    for key in ("cpu_seconds", "memory_mb", "processes", "file_size_mb", "tmp_size_mb", "open_files",
                "wasm_memory_mb", "wasm_fuel", "wasm_timeout"):
        out[key] = _min(parent.get(key), child.get(key))
    for key in ("system_paths", "extra_ro_paths"):
        out[key] = _within(parent.get(key), child.get(key)) if key in child else list(parent.get(key) or [])
    out["hidden_paths"] = _union(parent.get("hidden_paths"), child.get("hidden_paths"))
    out["wasm_tools"] = list(parent.get("wasm_tools") or [])  # the parent's modules, as the parent configured them
    out["example_tools"] = _both(parent.get("example_tools", True), child.get("example_tools"))
    return {k: v for k, v in out.items() if v is not None}


def hold_directives(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """A child is never elevated: it has no person typing (its channel is ``subagent``)."""
    out = dict(child)
    out.update(allow_elevated=False, allow_noninteractive_elevated=False, elevated_channels=[])
    return out


def hold_tools(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(child)
    out["env_deny"] = _union(parent.get("env_deny"), child.get("env_deny"))
    out["env_allow"] = _within(parent.get("env_allow"), child.get("env_allow")) if "env_allow" in child \
        else list(parent.get("env_allow") or [])
    out["shell"] = parent.get("shell", child.get("shell"))
    for key in ("max_read_bytes", "max_write_bytes", "shell_max_timeout", "shell_timeout", "shell_output_bytes",
                "fetch_max_bytes", "fetch_max_redirects", "fetch_timeout", "max_list_entries", "glob_timeout",
                "glob_max_visited"):
        out[key] = _min(parent.get(key), child.get(key))
    return {k: v for k, v in out.items() if v is not None}


def hold_budgets(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(child)
    for scope in ("run", "session"):
        p, c = dict(parent.get(scope) or {}), child.get(scope) if isinstance(child.get(scope), dict) else {}
        out[scope] = {k: _min(p.get(k), c.get(k)) for k in {*p, *c}}
        out[scope] = {k: v for k, v in out[scope].items() if v is not None}
    return out


def hold_skills(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Skill folders only from the parent's list and the parent's user folder, the workspace's skill
    folder inside the child's workspace; disabled skills add up; the stricter ``routed_manifests``."""
    out = dict(child)
    out["paths"] = _within(parent.get("paths"), child.get("paths")) if "paths" in child else list(parent.get("paths") or [])
    out["user_dir"] = parent.get("user_dir", child.get("user_dir"))
    out["disabled"] = _union(parent.get("disabled"), child.get("disabled"))
    if not _relative_inside(child.get("workspace_dir")):
        out["workspace_dir"] = parent.get("workspace_dir")  # an absolute or escaping folder reads skills from anywhere
    out["routed_manifests"] = _strictest(ROUTED_MANIFESTS, parent.get("routed_manifests"), child.get("routed_manifests"))
    return {k: v for k, v in out.items() if v is not None}


def _relative_inside(path: Any) -> bool:
    """A path that, joined to the child's workspace, stays inside it (relative, no ``..``)."""
    return isinstance(path, str) and not path.startswith(("/", "~")) and ".." not in path.replace("\\", "/").split("/")


def hold_contributors(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Project files and the prompts folder are read from the child's workspace, never beside it."""
    out = dict(child)
    if "project_files" in child:
        out["project_files"] = [f for f in child.get("project_files") or [] if _relative_inside(f)]
    if "prompts_dir" in child and not _relative_inside(child.get("prompts_dir")):
        out["prompts_dir"] = parent.get("prompts_dir")
    return {k: v for k, v in out.items() if v is not None}


def hold_otel(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """One trace: a parent that exports has its children's spans too; message text is captured in a
    child's spans only if the parent captures it (an operator who keeps content out of telemetry)."""
    out = dict(child)
    out["export"] = _either(parent.get("export", False), child.get("export"))
    out["capture_content"] = _both(parent.get("capture_content", False), child.get("capture_content"))
    return out


def hold_mcp(parent_config: Any, data: dict[str, Any]) -> None:
    """A child starts no MCP server of its own: it has the parent's servers, as the parent defined
    them (a child file could otherwise run any command, or re-point a server name the parent uses)."""
    section = getattr(parent_config, "mcp", None)
    if section is None or not hasattr(section, "model_dump"):
        data.pop("mcp", None)
        return
    data["mcp"] = {"servers": section.model_dump(mode="json", exclude_defaults=True).get("servers") or {}}


RULES: dict[str, Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]] = {
    "shield": hold_shield, "sandbox": hold_sandbox, "directives": hold_directives, "tools": hold_tools,
    "budgets": hold_budgets, "skills": hold_skills, "sequence": hold_sequence,
    "otel": hold_otel, "contributors": hold_contributors,
}


def kept_on(pm: Any, parent_off: set[str]) -> set[str]:
    """Plugins the parent runs that gate calls or confine processes: a child cannot disable them."""
    names: set[str] = set()
    for hook in GATE_HOOKS:
        caller = getattr(pm.hook, hook, None)
        for impl in (caller.get_hookimpls() if caller is not None else []):
            names.add(impl.plugin_name)
    return names - parent_off


def hold(parent_config: Any, plugins: dict[str, Any], tool_risks: dict[str, str], keep_on: set[str]) -> dict[str, Any]:
    """The child's ``plugins:`` mapping with every security section held to the parent's."""
    out = dict(plugins)
    for name in keep_on:
        section = out.get(name)
        if isinstance(section, dict) and section.get("enabled") is False:
            out[name] = {k: v for k, v in section.items() if k != "enabled"}
    for name, rule in [("policy", None), *RULES.items()]:
        section = parent_config.plugin(name)
        if section is None or getattr(section, "enabled", True) is False:
            continue  # the parent does not run it: nothing to hold the child to
        mine = section.model_dump(mode="json") if hasattr(section, "model_dump") else dict(section)
        mine.pop("enabled", None)
        theirs = dict(out.get(name)) if isinstance(out.get(name), dict) else {}
        held = hold_policy(mine, theirs, tool_risks) if rule is None else rule(mine, theirs)
        if name == "policy":
            held.pop("grants", None)
            if "grants" in theirs:
                held["grants"] = theirs["grants"]
        out[name] = held
    return out
