"""The plugin's ``on_event`` takes only the event types ``Telemetry.event`` records (issue 29 goal 5: off by default,
it was called for every event of every turn); the two lists stay in step."""

from __future__ import annotations

import inspect
import re

import clawkit_otel
from clawkit.hookspecs import wants_event
from clawkit_otel.telemetry import Telemetry


def test_on_event_filter_is_what_telemetry_records():
    handled = set(re.findall(r't == "([^"]+)"', inspect.getsource(Telemetry.event)))
    assert handled and clawkit_otel.on_event.clawkit_events == frozenset(handled)
    assert not wants_event(clawkit_otel.on_event, "session.start")
    assert wants_event(clawkit_otel.on_event, "llm.call")
