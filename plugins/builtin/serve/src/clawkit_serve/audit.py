"""The audit ledger, read through ``clawkit audit`` in a subprocess.

The ledger belongs to the policy plugin (its tables, its chain and keys); plugins do
not import each other, so the server asks the command the policy registers —
``clawkit --db DB audit list|verify --json`` — the same contract a person uses.
Without the policy plugin there is no ``audit`` command and the API says so.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


class AuditUnavailable(Exception):
    pass


async def _clawkit(db: str, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "clawkit", "--db", db, "audit", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise AuditUnavailable(f"clawkit audit did not answer within {timeout:g} s") from None
    text_err = err.decode("utf-8", "replace")
    if proc.returncode == 2 and "invalid choice: 'audit'" in text_err:
        raise AuditUnavailable("no audit ledger: the clawkit-policy plugin is not installed")
    return proc.returncode or 0, out.decode("utf-8", "replace"), text_err


async def records(db: str, *, session: str | None = None, tool: str | None = None, decision: str | None = None,
                  kind: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    args = ["list", "--json", "--limit", str(limit)]
    for flag, value in (("--session", session), ("--tool", tool), ("--decision", decision), ("--kind", kind)):
        if value:
            args += [flag, value]
    code, out, err = await _clawkit(db, *args)
    if code != 0:
        if "no database" in err:
            return []
        raise AuditUnavailable(err.strip() or f"clawkit audit list exited {code}")
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]


async def verify(db: str) -> dict[str, Any]:
    code, out, err = await _clawkit(db, "verify", "--json")
    if "no database" in err:
        return {"ok": True, "records": 0, "head": None, "problems": []}
    line = next((x for x in out.splitlines() if x.strip().startswith("{")), None)
    if line is None:
        if "empty" in out:
            return {"ok": True, "records": 0, "head": None, "problems": []}
        raise AuditUnavailable(err.strip() or f"clawkit audit verify exited {code}")
    return json.loads(line)
