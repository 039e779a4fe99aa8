"""The gRPC surface: frame caps consistent with the limits, and replies validated."""

from __future__ import annotations

import json

import pytest
from heinfer.errors import ProtocolError
from heinfer.serve import Limits, wire
from heinfer.serve.framing import HEADER_BYTES


def test_every_gRPC_message_cap_is_one_frame() -> None:
    lim = Limits(max_chunk_bytes=64 << 10)
    for opts in (wire.server_options(lim), wire.channel_options(lim)):
        d = dict(opts)
        assert d["grpc.max_send_message_length"] == d["grpc.max_receive_message_length"]
        assert d["grpc.max_receive_message_length"] == (64 << 10) + HEADER_BYTES
    assert dict(wire.server_options(Limits()))["grpc.max_receive_message_length"] < 4 << 20


def test_info_and_session_replies_round_trip() -> None:
    r = wire.parse_info_reply(wire.info_reply("00ff", "ab" * 32, Limits()))
    assert r["program_id"] == "00ff" and r["max_chunk_bytes"] == Limits().max_chunk_bytes
    assert wire.parse_session_reply(wire.session_reply("a1b2")) == "a1b2"


@pytest.mark.parametrize(
    "data, text",
    [
        (b"\xff", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b"{}", "no program_id"),
        (b" " * (70 << 10), "too large"),
        (
            json.dumps({"program_id": "x", "program_digest": "y", "max_chunk_bytes": 10}).encode(),
            "max_chunk_bytes",
        ),
    ],
)
def test_bad_info_replies_are_refused(data: bytes, text: str) -> None:
    with pytest.raises(ProtocolError, match=text):
        wire.parse_info_reply(data)


@pytest.mark.parametrize("sid", ["", "x" * 65, "../etc", "é", 5])
def test_bad_session_ids_are_refused(sid: object) -> None:
    with pytest.raises(ProtocolError, match="no valid session id"):
        wire.parse_session_reply(json.dumps({"session": sid}).encode())
