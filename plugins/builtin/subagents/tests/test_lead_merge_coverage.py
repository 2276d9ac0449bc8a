"""Every key of every installed plugin's section is either held by a merge rule (a child is never
wider than its parent: ``clawkit_subagents.merge``) or listed here as one a child may set freely,
with why. A plugin that adds a setting fails this test until someone decides which it is — the
audit that found ``sequence.rules``, ``skills.workspace_dir``, ``contributors.project_files`` and
the OpenTelemetry switches taken as a child's file wrote them, kept from recurring."""

from __future__ import annotations

import inspect

from clawkit.config import collect_sections
from clawkit.hooks import HookRunner
from clawkit.plugins import get_plugin_manager

# keys a child sets for itself: they change how it works, not what it may reach or do
FREE = {
    "policy": {"approval_timeout"},  # how long a waiting approval lasts; the answer is still required
    "skills": {"shipped", "watch", "load_skill_tool", "index_limit", "write_telemetry", "config", "always"},
    "directives": {"elevated_minutes", "reasoning_models", "verbose_max_chars"},  # elevation itself is off
    "tools": {"kill_grace", "fetch_user_agent", "search"},
    "budgets": {"warn_at"},
    "sequence": {"max_blocks", "checkpoints", "state_rules_in_prompt"},
    "contributors": {"disable", "project_files_max_chars", "watch", "root"},
    # db, partition, read_partitions, paths, embedding and chunking are rebuilt by children.child_memory
    "memory": {"sessions", "watch", "search", "recall", "compaction"},  # its own partition's indexing and recall
    "truncator": {"max_share", "max_tokens", "keep_tail", "tail_share", "encoding", "store_full", "store_max_chars",
                  "trim_history", "history_trigger", "history_target", "history_keep_turns", "history_soft_tokens"},
    "translation": {"route", "scrub", "min_confidence", "dispatch_threshold", "escalation", "fallback_models",
                    "profiles", "keywords", "skill_keywords", "max_skills", "always_tools", "lexicon"},
    "subagents": {"root", "max_children_per_run"},  # depth and parallelism are held by the lineage
    "plans": {"enabled", "max_steps", "pre_analysis"},
    "compaction": {"reserve_share", "reserve_tokens", "keep_recent_share", "model", "summary_max_tokens",
                   "summarizer_input_share", "keep_identifiers", "persist", "retry_on_overflow", "background",
                   "prepare_share"},
    "classifier": {"model", "wait_ms", "timeout", "reclassify_every", "reclassify_after_compaction", "max_messages",
                   "max_chars", "max_attempts"},
    "healing": {"enabled", "consecutive_failures", "stagnation_steps", "focus_share", "focus_quote_chars"},
    "mcp": {"servers", "serve"},  # the whole top-level section is replaced by the parent's (merge.hold_mcp)
    "toolsearch": {"enabled", "max_tools", "share", "top_k", "embeddings", "find_limit"},
    "workers": {"approval_timeout"},
    "serve": {"approval_timeout"},
    "hello": {"greeting", "signature"},
}

# keys held outside the plugin's own rule function
HELD_ELSEWHERE = {
    "budgets": {"enabled"},  # merge.hold: a plugin that gates calls in the parent stays on in the child
    "policy": {"grants"},  # children.build_child: a child grant survives only when a parent grant covers it
    "memory": {"save_file"},  # clawkit_memory.tools.save_target: a child (child_of) writes only its own notes folder
}


def _rule_source(name: str) -> str | None:
    """The source of the function that holds plugin ``name``'s section (None: no rule)."""
    from clawkit_subagents import children, merge

    rule = {"policy": merge.hold_policy, "memory": children.child_memory, "mcp": merge.hold_mcp}.get(name) \
        or merge.RULES.get(name)
    if rule is None:
        return None
    helpers = [merge._relative_inside] if name in ("skills", "contributors") else []
    return "".join(inspect.getsource(f) for f in (rule, *helpers))


def test_every_section_key_is_held_or_known_to_be_free():
    """Per plugin: a key counts as held only when that plugin's own rule names it (a name another
    rule uses does not count), else it must be listed in FREE with why."""
    sections = collect_sections(HookRunner(get_plugin_manager()))
    undecided = []
    for name, model, _ in sections:
        source = _rule_source(name) or ""
        for key in model.model_fields:
            if key in FREE.get(name, set()) | HELD_ELSEWHERE.get(name, set()) or f'"{key}"' in source \
                    or f"{key}=" in source:
                continue
            undecided.append(f"{name}.{key}")
    assert not undecided, ("settings with no merge rule and not listed as free for a child — decide which "
                           f"(clawkit_subagents.merge, or FREE here with why): {undecided}")
