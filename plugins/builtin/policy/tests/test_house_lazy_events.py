"""The audit's ``on_events`` list is a literal (the kernel reads it from the source without
importing the plugin): it must name exactly the audited prefixes."""

import clawkit_policy


def test_the_audit_takes_the_audited_prefixes():
    wanted = {"turn.end", "turn.stopped", *(p + "*" for p in clawkit_policy.AUDITED_PREFIXES)}
    assert clawkit_policy.on_event.clawkit_events == wanted
