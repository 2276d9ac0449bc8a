"""The personal-data detectors behind ``pii_scan``: each kind found, look-alikes left alone."""

from __future__ import annotations

import time

import pytest

from clawkit_shield import pii


@pytest.mark.parametrize("text, kind", [
    ("write to ana.silva+news@mail.example.co.uk today", "email"),
    ("card: 4111 1111 1111 1111.", "card"),
    ("card 5500-0000-0000-0004", "card"),
    ("IBAN GB82 WEST 1234 5698 7654 32", "iban"),
    ("iban DE89370400440532013000", "iban"),
    ("SSN 123-45-6789", "ssn"),
    ("call +44 20 7946 0958", "phone"),
    ("call (415) 555-2671", "phone"),
    ("call 415-555-2671", "phone"),
])
def test_each_kind_is_found(text, kind):
    assert [f.kind for f in pii.find(text)] == [kind]


@pytest.mark.parametrize("text", [
    "commit 3f2a9c1e5b7d4a6f8e0c2b4d6f8a0c2e4b6d8f0a",
    "id 550e8400-e29b-41d4-a716-446655440000",
    "4111 1111 1111 1112",  # fails the Luhn check
    "0000 0000 0000 0000",  # passes Luhn, but no card is all zeros
    "000-12-3456 and 666-12-3456 and 923-45-6789",  # not issuable as SSNs
    "on 2026-11-24 at 10:30, version 1.2.3.4, port 8080",
    "GB82 WEST 1234 5698 7654 33",  # fails mod-97
    "user@localhost and @mentions",
    "1234567890123",  # a bare run of digits is not a phone number
])
def test_look_alikes_are_not_personal_data(text):
    assert pii.find(text) == []


def test_redact_names_the_kind_and_counts():
    text, counts = pii.redact("a@example.com, b@example.com, +1 202 555 0143")
    assert text == "[redacted email], [redacted email], [redacted phone]"
    assert counts == {"email": 2, "phone": 1}


def test_values_are_flattened_from_any_arguments():
    assert sorted(pii.values({"a": ["x", {"b": "y"}], "n": 5, "f": True})) == ["5", "x", "y"]


def test_hostile_input_is_scanned_in_bounded_time():
    started = time.monotonic()
    for text in ("a." * 200_000, "a@" * 200_000, "+1 " * 200_000, "1-" * 300_000, "a" * 1_000_000 + "@"):
        pii.find(text)
    assert time.monotonic() - started < 20  # linear scans; a catastrophic pattern would take hours
