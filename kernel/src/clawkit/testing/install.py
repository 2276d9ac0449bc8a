"""Which plugins a test's agent loads: the full install unless the test narrows it, with a reason.

The test kit's agents (``make_agent``, ``http_agent``, :func:`plugin_manager`) load every
installed plugin from the ``clawkit`` entry points — what a user's ``clawkit run`` loads — plus
the plugin objects a test passes. A test that must see one plugin's mechanics alone narrows
explicitly, and says why:

* per agent: ``make_agent(..., narrow="unit test of the truncator's arithmetic")``;
* per test or module: ``@pytest.mark.narrow("...")`` / ``pytestmark = pytest.mark.narrow("...")``;
* a direct ``get_plugin_manager(load_entry_points=False)`` in a test carries a ``# narrow: <why>``
  comment (``tests/test_full_install_meta.py`` checks all three).

A narrowed agent loads only the objects in ``plugins`` (``http_agent`` adds clawkit-litellm).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

MARK = "narrow"
MIN_WORDS = 3


class NarrowingError(TypeError):
    """A test narrowed the plugin set without saying why."""


def check_reason(reason: Any, where: str = "narrow") -> str:
    """The reason, stripped; raises :class:`NarrowingError` unless it is a sentence (≥ 3 words)."""
    if not isinstance(reason, str) or len(reason.split()) < MIN_WORDS:
        raise NarrowingError(
            f"{where}={reason!r}: a test that loads fewer plugins than the full install says why in a few words, "
            "e.g. narrow=\"unit test of the truncator's own arithmetic\" (the full install is the default)"
        )
    return reason.strip()


def resolve_narrowing(narrow: str | None, load_entry_points: bool | None, node: Any = None) -> str | None:
    """The reason this agent is narrowed, or ``None`` for the full install.

    ``narrow=`` wins; else a ``narrow`` marker on the test (or its module/class). The old
    ``load_entry_points=False`` alone is refused: it narrowed silently.
    """
    if narrow is not None:
        return check_reason(narrow)
    marker = node.get_closest_marker(MARK) if node is not None else None
    if marker is not None:
        return check_reason(marker.args[0] if marker.args else marker.kwargs.get("reason"), "pytest.mark.narrow")
    if load_entry_points is False:
        raise NarrowingError(
            "load_entry_points=False narrows the agent to the plugins you pass without saying why; "
            "the full install is the default now: drop it, or write narrow=\"<why this test must not load the others>\""
        )
    return None


def disabled_in(plugin_config: Mapping[str, Any] | None) -> list[str]:
    """Plugins the agent YAML's ``plugins:`` mapping turns off (``{name: {enabled: false}}``)."""
    return [name for name, section in (plugin_config or {}).items()
            if isinstance(section, Mapping) and section.get("enabled", True) is False]


def plugin_manager(*plugins: Any, narrow: str | None = None, disabled: Iterable[str] = (),
                   plugin_config: Mapping[str, Any] | None = None) -> Any:
    """A fresh plugin manager: every installed plugin plus ``plugins`` (a module already loaded from
    its entry point is not registered twice), or — with ``narrow="<why>"`` — only ``plugins``.
    ``disabled`` and the ``{name: {enabled: false}}`` entries of ``plugin_config`` (the agent YAML's
    ``plugins:``) are not loaded."""
    from ..plugins import get_plugin_manager

    disabled = [*disabled, *disabled_in(plugin_config)]

    if narrow is not None:
        check_reason(narrow)
        return get_plugin_manager(extra=plugins, disabled=disabled, load_entry_points=False)
    return get_plugin_manager(extra=plugins, disabled=disabled, load_entry_points=True)


_WRAPPED = re.compile(
    r"\A\[UNTRUSTED DATA (?P<nonce>[0-9a-f]+) from [^\n]*\]\n"
    r"(?:\[clawkit shield warning: [^\n]*\]\n)?"
    r"(?P<body>.*)\n\[END UNTRUSTED DATA (?P=nonce)\]\Z",
    re.S,
)


def unwrapped(text: str) -> str:
    """What a tool returned, without the data wrapper the full install's shield puts around it for
    the model (``[UNTRUSTED DATA <nonce> from <tool> …]`` … ``[END UNTRUSTED DATA <nonce>]``);
    text that is not wrapped comes back unchanged. For asserting on a tool's exact output."""
    m = _WRAPPED.match(text) if isinstance(text, str) else None
    return m.group("body") if m else text
