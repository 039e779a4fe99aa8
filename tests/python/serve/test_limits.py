"""Limits: documented defaults, and every field checked on construction."""

from __future__ import annotations

import dataclasses

import pytest
from heinfer.serve import Limits
from heinfer.serve.limits import MAX_CHUNK_BYTES, MIN_CHUNK_BYTES


def test_defaults_are_the_documented_ones() -> None:
    d = Limits()
    assert d.max_message_bytes == 1 << 30
    assert d.max_key_bytes == 512 << 20
    assert d.max_chunk_bytes == 1 << 20 < 4 << 20  # below gRPC's default 4 MB cap
    assert d.max_chunks == 1 << 14
    assert (d.max_sessions, d.max_concurrent_queries) == (64, 8)
    assert (d.idle_timeout_s, d.query_timeout_s) == (600.0, 300.0)


def test_limits_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_sessions = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_message_bytes", 0),
        ("max_key_bytes", -1),
        ("max_sessions", 1.5),
        ("max_concurrent_queries", True),
        ("max_chunks", "8"),
        ("idle_timeout_s", 0),
        ("query_timeout_s", float("inf")),
        ("query_timeout_s", float("nan")),
        ("idle_timeout_s", False),
        ("max_chunk_bytes", MIN_CHUNK_BYTES - 1),
        ("max_chunk_bytes", MAX_CHUNK_BYTES + 1),
    ],
)
def test_bad_values_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})


def test_integer_timeouts_are_accepted() -> None:
    assert Limits(idle_timeout_s=5, query_timeout_s=1).query_timeout_s == 1
