"""clawkit-classifier: ``classify_session`` with one call to a small, dedicated model.

The answer (JSON: label, topic, complexity, domain, flags) selects the prompt
contributors. With no ``plugins.classifier.model`` configured, classification is
skipped with a warning: the agent's main model is never used for it. Invalid
output leaves the session unclassified; the turn always goes on.
See docs/plugins/classifier.md.
"""

from __future__ import annotations


from clawkit import hook_order, hookimpl, on_events
from clawkit.lazy import lazy_exports, lazy_module

# Thin hookimpls: ``clawkit --help`` imports every plugin, so pydantic and json_repair
# load (with :mod:`clawkit_classifier.classifier`) only when a hook first runs.
_EXPORTS = {
    "ClassifierConfig": "classifier", "SYSTEM_PROMPT": "classifier", "classify": "classifier",
    "settings": "classifier", "classifier_model": "classifier", "transcript": "classifier",
    "ClassifierOutput": "parse", "parse_classification": "parse",
}
__all__ = ["ClassifierConfig", "ClassifierOutput", "SYSTEM_PROMPT", "classify", "parse_classification"]


__getattr__ = lazy_exports(__name__, _EXPORTS)
_classifier = lazy_module(__name__, "classifier")  # the implementation, imported by the first hook call


@hookimpl
def register_config(register):
    _classifier().register_config(register)


@hookimpl
@hook_order(70)
def message_received(ctx, message):
    """Sets the bounded wait, counts turns, and asks for re-classification every N turns."""
    _classifier().message_received(ctx, message)


@hookimpl
@on_events("compaction", "compaction.after")
def on_event(event):
    """After a compaction the conversation changed: classify it again next turn."""
    if event.type not in ("compaction", "compaction.after"):  # COMPACTION_EVENTS; called for every event
        return
    _classifier().on_event(event)


@hookimpl
def classify_session(session, messages):
    """Classify with ``plugins.classifier.model``; None (unclassified) on any failure — at once,
    with no task, when there is nothing to classify with."""
    return _classifier().classify_session(session, messages)
