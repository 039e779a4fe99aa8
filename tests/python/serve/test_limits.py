"""Limits: documented defaults, every field checked, message sizes from the program."""

from __future__ import annotations

import dataclasses

import pytest
from heinfer.protocol.limits import message_limits
from heinfer.serve import Limits
from heinfer.serve.limits import MAX_PART_BYTES, MIN_PART_BYTES, effective_limits


def test_defaults_are_the_documented_ones() -> None:
    d = Limits()
    assert d.max_message_bytes is None and d.max_key_bytes is None  # the program's bounds
    assert d.max_part_bytes == 1 << 20 < 4 << 20  # below gRPC's default 4 MB cap
    assert (d.max_sessions, d.max_sessions_per_peer) == (64, 16)
    assert (d.max_concurrent_queries, d.max_queries_per_peer) == (8, 4)
    assert (d.idle_timeout_s, d.query_timeout_s) == (600.0, 300.0)
    assert d.max_queries_per_session is None  # no cap


def test_limits_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_sessions = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    "field, value",
    [
        ("max_message_bytes", 0),
        ("max_key_bytes", -1),
        ("max_key_bytes", 2.5),
        ("max_sessions", 1.5),
        ("max_sessions_per_peer", 0),
        ("max_concurrent_queries", True),
        ("max_queries_per_peer", None),
        ("max_queries_per_session", 0),
        ("max_queries_per_session", 1.5),
        ("idle_timeout_s", 0),
        ("query_timeout_s", float("inf")),
        ("query_timeout_s", float("nan")),
        ("idle_timeout_s", False),
        ("max_part_bytes", MIN_PART_BYTES - 1),
        ("max_part_bytes", MAX_PART_BYTES + 1),
    ],
)
def test_bad_values_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})


def test_integer_timeouts_are_accepted() -> None:
    assert Limits(idle_timeout_s=5, query_timeout_s=1).query_timeout_s == 1


def test_message_sizes_come_from_the_program(cryptonets, squares) -> None:
    for prog in (cryptonets, squares):
        exact = message_limits(prog.public())
        assert effective_limits(Limits(), prog) == exact
        assert effective_limits(Limits(), prog.public()) == exact
        assert exact["keys"] < 64 << 20 and exact["query"] < 64 << 20  # not 1 GiB defaults
    relu = message_limits(cryptonets.public())
    assert relu["keys"] < 2048  # no evaluation key: a keys message is a few ids
    assert message_limits(squares.public())["keys"] > 1 << 20  # one relinearization key


def test_an_operator_may_lower_the_bounds_but_not_raise_them(cryptonets) -> None:
    exact = message_limits(cryptonets.public())
    low = effective_limits(Limits(max_message_bytes=1000, max_key_bytes=100), cryptonets)
    assert low == {"keys": 100, **{k: 1000 for k in ("query", "step", "reply", "result")}}
    high = effective_limits(Limits(max_message_bytes=1 << 40, max_key_bytes=1 << 40), cryptonets)
    assert high == exact
