"""ApprovalBroker on a real SQLite file and on PostgreSQL (the same tests): answers bound to the call, used once, surviving a 'restart'
(a new broker on the same database), superseded by a new turn, expired with a reason."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from clawkit.types import ToolCall
from clawkit_serve.approvals import ApprovalBroker, ApprovalError, ApprovalTimedOut, call_hash
from clawkit_serve.keys import connect


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    return tmp_path / "s.db" if request.param == "sqlite" else request.getfixturevalue("postgres_db")


def ctx(session="ses_1"):
    return SimpleNamespace(session=SimpleNamespace(id=session), run_id="run_1", tools=None)


CALL = ToolCall(id="call_1", name="shell_exec", arguments={"command": "rm -rf build"})


def test_an_answer_outlives_its_broker_and_is_used_once_for_that_exact_call(db):
    first = ApprovalBroker(connect(db))

    async def wait_then_stop():
        task = asyncio.ensure_future(first.request("a", CALL, "unsafe", ctx()))
        while not first.list():
            await asyncio.sleep(0.01)
        task.cancel()  # the server stops while the turn waits
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(wait_then_stop())
    second = ApprovalBroker(connect(db))  # after the restart
    orphans = []
    second.on_orphan_answer = orphans.append
    [row] = second.list()
    assert row["call_hash"] == call_hash("shell_exec", {"command": "rm -rf build"})
    with pytest.raises(ApprovalError) as err:
        second.answer(row["id"], True, by="ops", call_hash="f" * 64)
    assert err.value.status == 409
    second.answer(row["id"], True, by="ops", call_hash=row["call_hash"])
    assert [o["id"] for o in orphans] == [row["id"]]  # the runner resumes the turn
    answer = asyncio.run(second.request("a", CALL, "unsafe", ctx()))  # the resumed gate asks again
    assert answer.approved is True and answer.by == "ops" and answer.call_hash == row["call_hash"]
    with pytest.raises(ApprovalError):
        second.answer(row["id"], False, by="ops")  # answered once

    async def ask_again():  # the same call id later is a new request, not a replay of the old answer
        task = asyncio.ensure_future(second.request("a", CALL, "unsafe", ctx()))
        while not second.list():
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(ask_again())
    assert len(second.list()) == 1 and second.list()[0]["id"] != row["id"]


def test_changed_arguments_never_reuse_an_answer(db):
    broker = ApprovalBroker(connect(db))

    async def go():
        task = asyncio.ensure_future(broker.request("a", CALL, "unsafe", ctx()))
        while not broker.list():
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(go())
    broker.answer(broker.list()[0]["id"], True, by="ops")
    changed = CALL.model_copy(update={"arguments": {"command": "rm -rf /"}})
    with pytest.raises(ApprovalTimedOut, match="different arguments"):
        asyncio.run(broker.request("a", changed, "unsafe", ctx()))


def test_a_new_turn_supersedes_and_expiry_denies_with_a_reason(db):
    broker = ApprovalBroker(connect(db), timeout=0.2)
    with pytest.raises(ApprovalTimedOut, match=r"no answer within 0.2 s"):
        asyncio.run(broker.request("a", CALL, "unsafe", ctx()))
    assert broker.list("expired")[0]["note"] == "no answer before expiry"

    async def left_pending():
        task = asyncio.ensure_future(broker.request("a", CALL.model_copy(update={"id": "call_2"}), "unsafe", ctx("ses_2"), timeout=60))
        while not broker.list():
            await asyncio.sleep(0.01)
        task.cancel()

    asyncio.run(left_pending())
    broker.supersede("ses_2")
    assert broker.list() == [] and broker.list("expired", session_id="ses_2")[0]["note"] == "superseded by a new turn"
