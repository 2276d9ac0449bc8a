"""A queued turn takes only model settings: an endpoint or a key is never read from a queued record."""

from __future__ import annotations

import pytest

from clawkit_workers.queued import check_settings


def test_only_model_settings_ride_a_queued_turn():
    assert check_settings({"temperature": 0.3, "response_format": {"type": "json_object"}}) == {
        "temperature": 0.3, "response_format": {"type": "json_object"}}
    assert check_settings(None) == {}
    with pytest.raises(ValueError, match="api_base, api_key: not model settings"):
        check_settings({"temperature": 1, "api_key": "k", "api_base": "http://elsewhere"})
