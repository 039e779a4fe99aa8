"""Chunk framing: messages survive any chunking; every malformed, truncated, reordered or
oversized stream is refused with the right error before its data is kept."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve import Limits
from heinfer.serve.framing import HEADER_BYTES, MAGIC, VERSION, Assembler, compress, frames
from hypothesis import given, settings
from hypothesis import strategies as st

LIMITS = Limits(max_chunk_bytes=1024, max_message_bytes=1 << 16, max_chunks=64)


def _frame(index: int, count: int, length: int, data: bytes = b"", flags: int = 0, **kw) -> bytes:
    head = struct.pack(
        "<4sBBHIIQ", kw.get("magic", MAGIC), kw.get("version", VERSION), flags,
        kw.get("reserved", 0),
        index, count, length,
    )  # fmt: skip
    return head + data


def _assemble(fs, limits: Limits = LIMITS, max_bytes: int | None = None) -> list[bytes]:
    a = Assembler(limits, max_bytes)
    return [m for m in (a.feed(f) for f in fs) if m is not None]


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 5000])
@pytest.mark.parametrize("chunk", [1, 1000, 1024])
def test_round_trip(size: int, chunk: int) -> None:
    msg = bytes(range(256)) * (size // 256) + bytes(size % 256)
    fs = list(frames(msg, chunk))
    assert len(fs) == max(1, -(-size // chunk))
    if chunk == 1 and size > 64:
        with pytest.raises(ServiceError, match="max_chunks") as e:
            _assemble(fs)
        assert e.value.code == "RESOURCE_EXHAUSTED"
        return
    assert _assemble(fs) == [msg]


def test_several_messages_follow_each_other_on_one_stream() -> None:
    msgs = [b"a" * 3000, b"", b"bc", b"d" * 1024]
    assert _assemble([f for m in msgs for f in frames(m, 1024)]) == msgs


def test_compressed_round_trip_and_incompressible_data_is_sent_as_is() -> None:
    msg = b"heinfer " * 2000
    packed, flag = compress(msg)
    assert flag and len(packed) < len(msg)
    assert _assemble(frames(packed, 1000, compressed=True)) == [msg]
    noise = os.urandom(3000)
    assert compress(noise) == (noise, False)


@pytest.mark.parametrize(
    "frame, text",
    [
        (b"HEFR", "shorter than its 24-byte header"),
        (_frame(0, 1, 1, b"x", magic=b"HEMS"), "bad magic"),
        (_frame(0, 1, 1, b"x", version=2), "frame version 2"),
        (_frame(0, 1, 1, b"x", flags=4), "unknown frame flags"),
        (_frame(0, 1, 1, b"x", reserved=1), "unknown frame flags"),
        (_frame(1, 2, 2, b"x"), "first frame is chunk 1"),
        (_frame(0, 1, 2, b"xyz"), "more than the declared 2 bytes"),
        (_frame(0, 1, 3, b"xy"), "truncated: 2 of 3 bytes"),
        (_frame(0, 2, 3, b""), "chunk 0 is empty"),
        (_frame(0, 3, 2, b"x"), "3 chunks cannot carry 2 bytes"),
        (_frame(0, 0, 0), "0 chunks cannot carry 0 bytes"),
        (_frame(0, 1, 5, b"\x00" * 5, flags=1), "compressed data is corrupt"),
        (_frame(0, 1, 3, zlib.compress(b"abc")[:-2], flags=1), "more than the declared"),
    ],
)
def test_malformed_frames_are_protocol_errors(frame: bytes, text: str) -> None:
    with pytest.raises(ProtocolError, match=text):
        _assemble([frame])


def test_truncated_compressed_data_is_refused() -> None:
    packed = zlib.compress(b"abc" * 100)[:-3]
    with pytest.raises(ProtocolError, match="truncated or has trailing bytes"):
        _assemble(frames(packed, 1000, compressed=True))


def test_chunks_out_of_order_or_inconsistent_are_refused() -> None:
    fs = list(frames(b"x" * 3000, 1000))
    with pytest.raises(ProtocolError, match="chunk 2 arrived where chunk 1 of 3 was expected"):
        _assemble([fs[0], fs[2], fs[1]])
    with pytest.raises(ProtocolError, match="chunk 0 arrived where chunk 1"):
        _assemble([fs[0], fs[0]])
    other = list(frames(b"y" * 2500, 1000))
    with pytest.raises(ProtocolError, match="chunk 0 declared"):
        _assemble([fs[0], other[1]])


@pytest.mark.parametrize(
    "frames_, text, max_bytes",
    [
        ([_frame(0, 1, (1 << 16) + 1, b"x")], "of 65537 bytes exceeds the limit of 65536", None),
        ([_frame(0, 1, 101, b"x")], "exceeds the limit of 100 bytes", 100),
        ([_frame(0, 65, 65000, b"x")], "in 65 chunks exceeds max_chunks", None),
        ([_frame(0, 2, 2000, b"x" * 1025)], "chunk of 1025 bytes exceeds max_chunk_bytes", None),
    ],
)
def test_oversized_input_is_resource_exhausted(frames_, text: str, max_bytes) -> None:
    with pytest.raises(ServiceError, match=text) as e:
        _assemble(frames_, max_bytes=max_bytes)
    assert e.value.code == "RESOURCE_EXHAUSTED"


def test_a_decompression_bomb_stops_at_the_limit() -> None:
    bomb = zlib.compress(bytes(10 << 20), 9)  # 10 MiB of zeros in ~10 kB
    with pytest.raises(ServiceError, match="decompresses to more than the limit") as e:
        _assemble(frames(bomb, 1000, compressed=True), Limits(max_message_bytes=1 << 20))
    assert e.value.code == "RESOURCE_EXHAUSTED"


def test_the_partial_state_is_described() -> None:
    a = Assembler(LIMITS, what="reply to step 1")
    assert a.describe_partial() == "before the reply to step 1"
    a.feed(next(frames(b"x" * 3000, 1000)))
    assert a.in_progress
    assert (
        a.describe_partial() == "inside the reply to step 1 after chunk 1 of 3 (1000 of 3000 bytes)"
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(0, 2))
def test_random_frames_fail_only_with_heinfer_errors(junk: list[bytes], keep: int) -> None:
    good = list(frames(b"z" * 100, 40))[:keep]
    a = Assembler(LIMITS)
    try:
        for f in good + [MAGIC + bytes([VERSION]) + j for j in junk]:
            a.feed(f)
    except (ProtocolError, ServiceError):
        pass


def test_frame_header_size() -> None:
    assert HEADER_BYTES == 24
