"""The gRPC surface: message caps consistent with the limits, the info answer validated."""

from __future__ import annotations

import pytest
from heinfer.errors import ProtocolError
from heinfer.serve import Limits, wire
from heinfer.v1 import service_pb2 as pb

LIMS = {"keys": 10, "query": 20, "step": 30, "reply": 40, "result": 50}


def test_every_gRPC_message_cap_is_one_part() -> None:
    lim = Limits(max_part_bytes=64 << 10)
    for opts in (wire.server_options(lim), wire.channel_options(lim)):
        d = dict(opts)
        assert d["grpc.max_send_message_length"] == d["grpc.max_receive_message_length"]
        assert d["grpc.max_receive_message_length"] == (64 << 10) + wire.PART_OVERHEAD
    assert dict(wire.server_options(Limits()))["grpc.max_receive_message_length"] < 4 << 20


def test_a_part_of_max_part_bytes_fits_in_one_gRPC_message() -> None:
    part = pb.Part(kind=5, index=2**32 - 1, total=2**32 - 1, size=2**64 - 1, data=bytes(1 << 20))
    assert pb.InferResponse(part=part).ByteSize() <= (1 << 20) + wire.PART_OVERHEAD


def test_info_round_trips() -> None:
    r = wire.parse_info(wire.info_response("00ff" * 16, LIMS, Limits()))
    assert r["program_id"] == "00ff" * 16 and r["limits"] == LIMS
    assert r["max_part_bytes"] == Limits().max_part_bytes and r["query_timeout_s"] == 300.0


def _info(**kw) -> pb.GetInfoResponse:
    m = wire.info_response("ab" * 32, LIMS, Limits())
    for k, v in kw.items():
        setattr(m, k, v)
    return m


@pytest.mark.parametrize(
    "info, text",
    [
        (_info(program_id=""), "no valid program id"),
        (_info(program_id="XYZ"), "no valid program id"),
        (_info(program_id="a" * 65), "no valid program id"),
        (_info(max_part_bytes=10), "max_part_bytes"),
        (_info(max_part_bytes=2**31), "max_part_bytes"),
        (_info(idle_timeout_s=0.0), "idle_timeout_s"),
        (_info(query_timeout_s=float("nan")), "query_timeout_s"),
        (b"not a message", "not a GetInfoResponse"),
    ],
)
def test_bad_info_is_refused(info, text: str) -> None:
    with pytest.raises(ProtocolError, match=text):
        wire.parse_info(info)
