"""after_tool_call commits the execution record before the result goes on — now with one transaction for
every record the loop's sessions queued in the same iteration (LedgerWriter.flush_soon) instead of a
transaction per tool call (issue 29 goal 5: the full install's CPU per session). Fail closed as before."""

from __future__ import annotations

import asyncio
import sqlite3

from clawkit.types import LlmResponse, ToolCall
from clawkit_policy import AuditLedger






def test_callers_of_one_loop_iteration_share_one_flush_and_later_callers_get_a_later_one(tmp_path, ledger_files):
    conn, writer = ledger_files.writer(tmp_path / "a.db")
    begins = []
    conn.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)

    async def main():
        futs = []
        for i in range(5):  # five sessions' tool calls ending in the same iteration
            writer.submit("execution", {"tool": "ping", "session_id": f"s{i}"})
            futs.append(writer.flush_soon())
        assert all(f is futs[0] for f in futs)
        assert ledger_files.count(tmp_path / "a.db") == 0  # nothing written before the loop gets control back
        await asyncio.gather(*futs)
        assert ledger_files.count(tmp_path / "a.db") == 5 and len(begins) == 1
        writer.submit("execution", {"tool": "ping", "session_id": "s5"})
        later = writer.flush_soon()
        assert later is not futs[0]
        await later
        assert ledger_files.count(tmp_path / "a.db") == 6 and len(begins) == 2

    asyncio.run(main())
    assert AuditLedger(conn).verify().ok


def test_a_write_failure_fails_every_waiter_closed(tmp_path, ledger_files):
    conn, writer = ledger_files.in_vanished_dir(tmp_path)

    async def main():
        writer.submit("execution", {"tool": "ping"})
        await writer.flush_soon()

    asyncio.run(main())
    assert writer.error is not None


class CheckingModel:
    """Answers each session with one tool call; when the tool's result comes back, looks (from another
    connection) for that call's execution record: it must be committed before the model sees the result."""

    def __init__(self):
        self.db = None
        self.seen: dict[str, bool] = {}

    async def complete(self, request, on_text=None):
        last = request.messages[-1]
        if last.role != "tool":
            return LlmResponse(tool_calls=[ToolCall(id=f"call_{len(self.seen)}_{id(request)}", name="read_file",
                                                    arguments={"path": "a.txt"})], finish_reason="tool_calls")
        with sqlite3.connect(self.db) as other:
            row = other.execute("SELECT 1 FROM policy_audit WHERE kind = 'execution' AND step_id = ?",
                                (last.tool_result.call_id,)).fetchone()
        self.seen[last.tool_result.call_id] = row is not None
        return LlmResponse(content="done", finish_reason="stop")


def test_concurrent_sessions_results_reach_the_model_only_after_their_records_are_committed(build_agent, workspace):
    (workspace / "a.txt").write_text("hello")
    model = CheckingModel()
    agent = build_agent(provider=model, tools=["*"])
    model.db = str(agent.store.path)

    async def main():
        return await asyncio.gather(*(agent.turn(f"read it {i}") for i in range(8)))

    replies = asyncio.run(main())
    assert [r.reply for r in replies] == ["done"] * 8
    assert len(model.seen) == 8 and all(model.seen.values()), model.seen
    assert AuditLedger(agent.store.conn).verify().ok


def test_a_ledger_that_cannot_be_written_withholds_the_result_in_a_running_loop(build_agent, workspace, monkeypatch):
    from clawkit_policy import writer as writer_mod

    (workspace / "a.txt").write_text("secret contents")
    model = CheckingModel()
    agent = build_agent(provider=model, tools=["*"])
    model.db = str(agent.store.path)
    real = writer_mod.LedgerWriter.flush

    def broken(self, timeout=10.0):
        if self._items and any(kind == "execution" for kind, _ in self._items):
            self._items.clear()
            self._fail(OSError("disk full"), 1)
            return
        return real(self, timeout)

    monkeypatch.setattr(writer_mod.LedgerWriter, "flush", broken)
    seen = []
    real_complete = model.complete

    async def complete(request, on_text=None):
        seen.append(request.messages[-1])
        return await real_complete(request, on_text)

    model.complete = complete
    reply = asyncio.run(agent.turn("read it"))
    tool_msgs = [m for m in seen if m.role == "tool"]
    assert not any("secret contents" in (m.content or "") for m in tool_msgs)
    assert all("withheld" in (m.content or "") for m in tool_msgs)
    assert reply.reply is not None
