"""Every key of every installed plugin's section is either held by a merge rule (a child is never
wider than its parent: ``clawkit_subagents.merge``) or listed here as one a child may set freely,
with why. A plugin that adds a setting fails this test until someone decides which it is — the
audit that found ``sequence.rules``, ``skills.workspace_dir``, ``contributors.project_files`` and
the OpenTelemetry switches taken as a child's file wrote them, kept from recurring."""

from __future__ import annotations

from pathlib import Path

from clawkit.config import collect_sections
from clawkit.hooks import HookRunner
from clawkit.plugins import get_plugin_manager

MERGE = Path(__file__).resolve().parents[1] / "src" / "clawkit_subagents" / "merge.py"
CHILDREN = MERGE.with_name("children.py")

# keys a child sets for itself: they change how it works, not what it may reach or do
FREE = {
    "policy": {"approval_timeout"},  # how long a waiting approval lasts; the answer is still required
    "skills": {"shipped", "watch", "load_skill_tool", "index_limit", "write_telemetry", "config", "always"},
    "directives": {"elevated_minutes", "reasoning_models", "verbose_max_chars"},  # elevation itself is off
    "tools": {"kill_grace", "fetch_user_agent", "search"},
    "budgets": {"warn_at"},
    "sequence": {"max_blocks", "checkpoints", "state_rules_in_prompt"},
    "contributors": {"disable", "project_files_max_chars", "watch", "root"},
    "memory": set(),  # the whole section is rebuilt by children.child_memory
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


def test_every_section_key_is_held_or_known_to_be_free():
    sections = collect_sections(HookRunner(get_plugin_manager()))
    rules = MERGE.read_text() + CHILDREN.read_text()
    undecided = []
    for name, model, _ in sections:
        if name == "memory":
            continue
        for key in model.model_fields:
            if key in FREE.get(name, set()) or f'"{key}"' in rules or f"{key}=" in rules:
                continue
            undecided.append(f"{name}.{key}")
    assert not undecided, ("settings with no merge rule and not listed as free for a child — decide which "
                           f"(clawkit_subagents.merge, or FREE here with why): {undecided}")
