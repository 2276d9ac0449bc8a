"""A child never weaker than its parent on provenance (integration fix after issue 30): its own file
cannot switch the policy to ``untrusted_egress: alarm-only`` nor vouch for more paths or commands than
the parent does; a child of an untrusted parent starts untrusted (:func:`clawkit.provenance.inherit`)."""

from __future__ import annotations

from clawkit import provenance
from clawkit_subagents.merge import hold_policy


class _Session(dict):
    id = "ses_parent"

    def set(self, key, value):
        self[key] = value


def test_a_child_file_cannot_weaken_the_provenance_rule():
    parent = {"untrusted_egress": "ask", "trusted_paths": ["src"], "trusted_commands": ["pytest*"]}
    child = {"untrusted_egress": "alarm-only", "trusted_paths": [".", "src"], "trusted_commands": ["*"]}
    held = hold_policy(parent, child, {})
    assert held["untrusted_egress"] == "ask"
    assert held["trusted_paths"] == ["src"] and held["trusted_commands"] == []
    # a child that says nothing has the parent's; a stricter child keeps its own
    assert hold_policy(parent, {}, {})["trusted_paths"] == ["src"]
    assert hold_policy({"untrusted_egress": "alarm-only"}, {"untrusted_egress": "ask"}, {})["untrusted_egress"] == "ask"


def test_inherit_marks_a_child_of_an_untrusted_parent_and_carries_the_alarm():
    parent, child = _Session(), _Session()
    assert provenance.inherit(child, parent, "parent:lead") is False and not provenance.is_untrusted(child)
    provenance.mark_untrusted(parent, "read_file", "notes.txt", kind="file")
    assert provenance.inherit(child, parent, "parent:lead") is True
    (mark,) = provenance.untrusted_sources(child)
    assert mark["kind"] == "parent" and mark["source"] == "parent:lead" and "notes.txt" in mark["detail"]
    assert not child.get("tainted")
    parent.set("tainted", True)
    alarmed = _Session()
    provenance.inherit(alarmed, parent, "parent:lead")
    assert alarmed.get("tainted") is True
