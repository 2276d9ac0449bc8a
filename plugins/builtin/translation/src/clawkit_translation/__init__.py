"""clawkit-translation: the translation device.

How it plugs in:

* ``message_received`` (encode_inbound) — a pure-code intent classifier routes the
  message to an intent, a profile and skills; the decision goes to
  ``ctx.state["route"]`` (``{"intent", "profile", "confidence", "skills", "tools"}``),
  to session metadata ``translation.route`` and to a ``translation.route`` event.
  It never enters a prompt: the skills plugin reads ``route["skills"]`` to include
  the selected skills' sections, and this plugin's ``translation.profile``
  contributor adds only the profile's *configured* text.
* ``before_llm_call`` — a profile with a ``tools`` allowlist narrows the request's
  tools for the turn (only removes; skill tools and ``always_tools`` stay).
* ``message_sending`` (decode_outbound, ``tryfirst``) — strips CT/1 headers,
  ClawDense lines, routing annotations and hand-off markers from every delivery,
  streaming included (see :mod:`clawkit_translation.scrubber`); a ``routed``
  outbound carrying ``metadata["ct1"]`` to another agent (``target`` or
  ``metadata["to"]``) is encoded as ClawDense.
* ``before_llm_call`` / ``llm_call_failed`` — the route's model choice (a skill's or profile's
  ``modelOverride``, ``escalation`` on low confidence) replaces the agent's model; a failed
  call moves to the next model of the fallback chain.
* ``register_commands`` — ``clawkit translation stats | savings | route TEXT``.

The codec (:mod:`.ct1`, :mod:`.clawdense`) is usable on its own:
:func:`encode_for_transport` / :func:`decode_from_transport` add the agent's and a
skill's lexicon and count messages in the ``translation_metrics`` table.
"""

from __future__ import annotations

# The entry point names :mod:`clawkit_translation.hooks`: the kernel reads its hooks from the source and imports
# it on the first hook call (clawkit.lazyplugin), so ``clawkit --help`` loads none of it.
from clawkit.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("TranslationConfig", "ProfileConfig", "route_message", "transport_codec", "encode_for_transport",
                     "decode_from_transport", "settings", "router_for", "ProfilePromptContributor", "SCRUBBER_KEY",
                     "ROUTE_META_KEY"), "device"),
    **dict.fromkeys(("CT1Message", "CT1Error"), "ct1"),
    **dict.fromkeys(("ClawDense", "Lexicon"), "clawdense"),
    **dict.fromkeys(("PROFILES", "IntentRouter", "Route", "SkillInfo"), "router"),
    **dict.fromkeys(("OutboundScrubber", "scrub"), "scrubber"),
}
__all__ = [
    "TranslationConfig", "ProfileConfig", "CT1Message", "CT1Error", "ClawDense", "Lexicon", "IntentRouter", "Route",
    "OutboundScrubber", "scrub", "route_message", "transport_codec", "encode_for_transport", "decode_from_transport",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)
