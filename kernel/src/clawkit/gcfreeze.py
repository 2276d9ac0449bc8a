"""The start-up heap out of the cycle collector's way, once the process has run its first turn.

CPython's cycle collector walks every tracked object of the generation it collects. A full install
holds ~170,000 of them after its first turn (modules, classes, pydantic schemas, compiled patterns,
the plugins' tables: twice the kernel alone), nearly all of them alive until the process exits — yet
every full collection walked them all again. With 500 concurrent sessions the turns' short-lived
objects trigger such a collection every few hundred sessions, and the walk cost the full install about
a sixth of its CPU per session (issue 29, goal 5: the full install's throughput against the kernel's).

When the first turn of the process ends — every plugin it uses imported, the provider's connection pool
built — :func:`after_first_turn` calls :func:`gc.freeze` once: what exists then moves to the permanent
generation, which no collection walks. Frozen objects are still freed by reference counting as usual;
only a reference cycle among them that becomes garbage later is not collected (a one-time, bounded
amount: the first turn's own cycles). ``gc.freeze`` itself costs no walk (it moves a list head).

Only in a process clawkit owns: the ``clawkit`` command (``run``, ``chat``, ``serve``, ``worker``,
``mcp serve``…) marks its process as its own (:func:`own_process`); an application that embeds
clawkit through the Python API keeps its collector as it set it, since a freeze would take the
host's own start-up objects out of collection too. ``CLAWKIT_GC_FREEZE=1`` turns it on for such a
host (a server built on ``clawkit.Agent``), ``CLAWKIT_GC_FREEZE=0`` (or ``false``/``no``/``off``)
off for the command.
"""

from __future__ import annotations

import gc
import os

_done = False
_owned = False


def own_process() -> None:
    """The process is the ``clawkit`` command's own (called by :func:`clawkit.cli.main`)."""
    global _owned
    _owned = True


def enabled() -> bool:
    switch = os.environ.get("CLAWKIT_GC_FREEZE")
    if switch is None or not switch.strip():
        return _owned
    return switch.strip().lower() not in ("0", "false", "no", "off")


def after_first_turn() -> None:
    """Freeze the heap the first time it is called in this process (see the module docstring)."""
    global _done
    if _done:
        return
    _done = True
    if enabled():
        gc.freeze()
