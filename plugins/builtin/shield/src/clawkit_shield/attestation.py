"""Layer 3 (attestation): an explicit no-op interface.

The idea (from the ClawTalk design) is to check that a skill, or the model
driving it, is the one that was reviewed: signatures from a ``.claws`` file's
CRYPTOGRAPHIC IDENTITY block, a NEURAL FINGERPRINT's drift thresholds. Nothing
in clawkit produces verifiable attestations yet, so this layer deliberately
does nothing: :class:`NoopAttestor` answers "not checked" for every call and the
shield never blocks on it. The interface exists so an implementation can be
plugged in (``Shield.attestor``) without touching layers 1 and 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Attestation:
    """The outcome of attesting one call. ``verified`` is None when nothing was checked."""

    verified: bool | None
    detail: str = ""


class Attestor(Protocol):
    """Checks provenance of the skill/model behind a call; return ``verified=False`` to block."""

    def attest(self, ctx: Any, call: Any) -> Attestation: ...


class NoopAttestor:
    """The shipped attestor: checks nothing, blocks nothing."""

    def attest(self, ctx: Any, call: Any) -> Attestation:
        return NOT_CHECKED


NOT_CHECKED = Attestation(verified=None, detail="attestation is not implemented (layer 3 is a documented no-op)")
