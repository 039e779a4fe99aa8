"""Messages in parts: any message survives any part size; every malformed, truncated,
reordered, mismatched or oversized part is refused with the right error before its data is
kept."""

from __future__ import annotations

import pytest
from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.parts import MIN_PART_BYTES, Assembler, split
from heinfer.v1 import service_pb2 as pb
from hypothesis import given, settings
from hypothesis import strategies as st

K = MIN_PART_BYTES
LIMITS = {"query": 8 * K, "reply": 3 * K}


def _assemble(ps, limits=LIMITS, max_part: int = 4 * K) -> list[tuple[str, bytes]]:
    a = Assembler(limits, max_part)
    return [m for m in (a.feed(p) for p in ps) if m is not None]


def _part(kind=pb.KIND_QUERY, index=0, total=1, size=0, data=b"") -> pb.Part:
    return pb.Part(kind=kind, index=index, total=total, size=size, data=data)


@pytest.mark.parametrize("size", [0, 1, K - 1, K, K + 1, 5 * K + 3])
@pytest.mark.parametrize("part", [K, 2 * K, 4 * K])
def test_round_trip(size: int, part: int) -> None:
    msg = bytes(range(256)) * (size // 256) + bytes(size % 256)
    ps = list(split(msg, "query", part))
    assert len(ps) == max(1, -(-size // part))
    assert all(p.kind == pb.KIND_QUERY and p.size == size and p.total == len(ps) for p in ps)
    assert _assemble(ps) == [("query", msg)]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.binary(max_size=3 * K), min_size=1, max_size=4), st.sampled_from([K, 2 * K]))
def test_several_messages_follow_each_other_on_one_stream(msgs: list[bytes], part: int) -> None:
    ps = [p for m in msgs for p in split(m, "query", part)]
    assert _assemble(ps) == [("query", m) for m in msgs]


def test_parts_below_the_minimum_cannot_be_made() -> None:
    with pytest.raises(ValueError, match="at least"):
        list(split(b"x" * 10, "query", K - 1))


def _good(size: int = 3 * K + 5) -> list[pb.Part]:
    return list(split(bytes(size), "query", K))


def _edit(ps: list[pb.Part], i: int, **fields) -> list[pb.Part]:
    out = [pb.Part() for _ in ps]
    for o, p in zip(out, ps):
        o.CopyFrom(p)
    for k, v in fields.items():
        setattr(out[i], k, v)
    return out


@pytest.mark.parametrize(
    "make, error, text",
    [
        (
            lambda: _edit(_good(), 0, kind=pb.KIND_STEP),
            ProtocolError,
            "expected a 'query' or 'reply' message, got 'step'",
        ),
        (lambda: _edit(_good(), 0, kind=0), ProtocolError, "unknown kind 0"),
        (lambda: _edit(_good(), 0, kind=77), ProtocolError, "unknown kind 77"),
        (lambda: _edit(_good(), 1, kind=pb.KIND_REPLY), ProtocolError, "part 0 declared"),
        (lambda: _edit(_good(), 2, total=9), ProtocolError, "part 0 declared"),
        (lambda: _edit(_good(), 1, size=1), ProtocolError, "part 0 declared"),
        (lambda: _edit(_good(), 0, total=2), ProtocolError, "4 parts of 16384 bytes"),
        (lambda: _edit(_good(), 0, index=1), ProtocolError, "the first part is part 1"),
        (lambda: _good()[:1] + _good()[2:], ProtocolError, "part 2 arrived where part 1"),
        (lambda: _good() + _good()[-1:], ProtocolError, "the first part is part 3"),
        (
            lambda: _edit(_good(), 1, data=b"x" * (K - 1)),
            ProtocolError,
            "carries 16383 bytes, not 16384",
        ),
        (lambda: _edit(_good(), 3, data=b"xy"), ProtocolError, "carries 2 bytes, not 5"),
        (lambda: [_part(size=100, total=2, data=b"x" * 50)], ProtocolError, "parts carry at least"),
        (
            lambda: [_part(size=10, total=1, data=b"x" * 20)],
            ProtocolError,
            "carries 20 bytes of a 10-byte",
        ),
        (
            lambda: [_part(size=10, total=1, data=b"")],
            ProtocolError,
            "carries 0 bytes of a 10-byte",
        ),
        (
            lambda: [_part(size=8 * K + 1, total=9, data=b"x" * K)],
            ServiceError,
            "exceeds the limit of 131072",
        ),
        (lambda: [_part(size=1 << 60, total=1, data=b"x")], ServiceError, "exceeds the limit"),
        (
            lambda: [_part(size=8 * K, total=1, data=b"x" * 8 * K)],
            ServiceError,
            "exceeds max_part_bytes (65536)",
        ),
    ],
)
def test_bad_parts_are_refused(make, error, text) -> None:
    with pytest.raises(error) as e:
        _assemble(make())
    assert text in str(e.value), str(e.value)
    if error is ServiceError:
        assert e.value.code == "RESOURCE_EXHAUSTED"


def test_a_part_is_refused_before_its_data_is_kept() -> None:
    a = Assembler(LIMITS, 4 * K)
    with pytest.raises(ServiceError):
        a.feed(_part(size=1 << 40, total=1 << 20, data=b"x" * K))
    assert a._data == [] and a.describe() == "before the message"


def test_the_receiver_chooses_the_kinds_and_limits_per_message() -> None:
    a = Assembler({"query": 8 * K}, 4 * K, "query message")
    q = list(split(b"q" * (2 * K), "query", K))
    assert a.feed(q[0]) is None
    assert "after part 1 of 2" in a.describe()
    with pytest.raises(ProtocolError, match="before this one ended"):
        a.expect({"reply": K}, "reply")
    assert a.feed(q[1]) == ("query", b"q" * (2 * K))
    a.expect({"reply": 3 * K}, "reply to step 0")
    with pytest.raises(
        ProtocolError, match="reply to step 0: expected a 'reply' message, got 'query'"
    ):
        a.feed(q[0])


def test_not_a_part() -> None:
    with pytest.raises(ProtocolError, match="a part is a heinfer.v1.Part"):
        Assembler(LIMITS, K).feed(b"raw bytes")  # type: ignore[arg-type]


def test_a_whole_message_read_in_place_is_checked_like_a_parsed_one() -> None:
    """``take_typed`` on the received bytes of a message (the deserializer's view): its kind
    and size checked without a parse, as for one protobuf parsed."""
    from heinfer.protocol.messages import encode
    from heinfer.v1 import protocol_pb2

    q = encode("query", session="ab", ref="cd", items=1, ciphertexts=b"c" * (2 * K))
    for given in (memoryview(q), protocol_pb2.Message.FromString(q)):
        a = Assembler(LIMITS, 4 * K, "query message")
        kind, got = a.take_typed(given)
        assert kind == "query" and got is given
        with pytest.raises(ServiceError, match="exceeds the limit"):
            Assembler({"query": len(q) - 1}, 4 * K).take_typed(given)
        with pytest.raises(ProtocolError, match="expected a 'reply' message, got 'query'"):
            Assembler({"reply": 8 * K}, 4 * K).take_typed(given)
    with pytest.raises(ProtocolError, match="got bytes that are not one protocol message"):
        Assembler(LIMITS, 4 * K).take_typed(memoryview(q + q))
    a = Assembler(LIMITS, 4 * K)
    a.feed(next(split(b"q" * (2 * K), "query", K)))
    with pytest.raises(ProtocolError, match="a whole message inside a message in parts"):
        a.take_typed(memoryview(q))
