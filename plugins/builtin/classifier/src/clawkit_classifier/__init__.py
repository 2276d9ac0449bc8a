"""clawkit-classifier: ``classify_session`` with one call to a small, dedicated model.

The answer (JSON: label, topic, complexity, domain, flags) selects the prompt
contributors. With no ``plugins.classifier.model`` configured, classification is
skipped with a warning: the agent's main model is never used for it. Invalid
output leaves the session unclassified; the turn always goes on.
See docs/plugins/classifier.md.
"""

from __future__ import annotations

# The entry point names :mod:`clawkit_classifier.classifier`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
from clawkit.lazy import lazy_exports

_EXPORTS = {
    "ClassifierConfig": "classifier", "SYSTEM_PROMPT": "classifier", "classify": "classifier",
    "settings": "classifier", "classifier_model": "classifier", "transcript": "classifier",
    "ClassifierOutput": "parse", "parse_classification": "parse",
}
__all__ = ["ClassifierConfig", "ClassifierOutput", "SYSTEM_PROMPT", "classify", "parse_classification"]

__getattr__ = lazy_exports(__name__, _EXPORTS)
