"""When this process's turns run, and which finished turns wait for memory to index them: kept
by the plugin's hooks (:mod:`clawkit_memory`), read by the service (:mod:`.service`), which
imports this module rather than the package."""

from __future__ import annotations

import time
from typing import Any

_ACTIVE: dict[str, float] = {}  # session id -> when its turn started: the turns in flight in this process
_LAST = [float("-inf")]  # when a turn last started or ended (time.monotonic)
STALE_TURN = 600.0  # a turn in flight this long is taken as lost (its end was never seen)


def quiet_for() -> float:
    """Seconds since a turn of this process last started or ended; 0 while one is in flight.
    Memory indexes finished turns in such quiet moments, not while a reply is being made."""
    now = time.monotonic()
    if _ACTIVE:
        for sid, began in list(_ACTIVE.items()):
            if now - began > STALE_TURN:
                _ACTIVE.pop(sid, None)
        if _ACTIVE:
            return 0.0
    return now - _LAST[0]


_PENDING: dict[int, tuple[Any, set]] = {}  # id(agent config) -> (config, state dbs with unindexed turns)


def take_pending(agent: Any) -> set:
    """State databases whose turns ``agent`` finished while memory was idle (called once by
    the service when it is built)."""
    entry = _PENDING.pop(id(agent), None)
    return entry[1] if entry is not None and entry[0] is agent else set()
