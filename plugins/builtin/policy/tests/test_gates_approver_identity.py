"""Issue 30 item 12 in the policy: the chained approval record names who answered (a callback by
its name, an approver's own Answer as given) and stores the call hash the approver showed."""

from __future__ import annotations

import clawkit_policy
import clawkit_tools
from clawkit.approvals import Answer, call_hash
from clawkit.testing import ScriptedReply, call
from clawkit_policy import callback_approver, ledger_for

PLUGINS = (clawkit_tools, clawkit_policy)


def review_change(call, reason, ctx):
    return True


def _approval(agent, sid):
    ledger = ledger_for(agent.store)
    assert ledger.verify().ok  # the identity is inside the chain
    return next(r for r in ledger.records(session=sid) if r["kind"] == "approval")


def test_a_callback_is_named_in_the_chained_record(build_agent, workspace):
    agent = build_agent([ScriptedReply.calls(call("shell_exec", command="true")), "ok"], plugins=PLUGINS,
                        tools=["shell_exec"], approver=callback_approver(review_change))
    res = agent.run("go")
    rec = _approval(agent, res.session_id)
    assert rec["approval_result"] == "approved" and rec["approval_by"] == "callback review_change"
    assert rec["data"]["approver"] == {"kind": "callback", "name": "review_change"}
    assert rec["call_hash"] == call_hash("shell_exec", {"command": "true"})


def test_an_answer_names_who_and_the_hash_shown_is_the_ledgers(build_agent, workspace):
    def person(call_, reason, ctx):
        return Answer(False, "terminal user carol", {"kind": "terminal", "user": "carol"},
                      call_hash(call_.name, call_.arguments))

    agent = build_agent([ScriptedReply.calls(call("shell_exec", command="touch x")), "ok"], plugins=PLUGINS,
                        tools=["shell_exec"], approver=person)
    res = agent.run("go")
    rec = _approval(agent, res.session_id)
    assert rec["approval_result"] == "denied" and rec["approval_by"] == "terminal user carol"
    assert rec["data"]["approver"]["user"] == "carol" and "shown_call_hash" not in rec["data"]
    decided = next(r for r in ledger_for(agent.store).records(session=res.session_id) if r["kind"] == "decision")
    assert rec["call_hash"] == decided["call_hash"] == call_hash("shell_exec", {"command": "touch x"})
    assert "denied by terminal user carol" in [m.content for m in agent.store.messages(res.session_id) if m.role == "tool"][0]
