"""The gRPC surface: message caps consistent with the limits, the info answer validated."""

from __future__ import annotations

import pytest
from heinfer.errors import ProtocolError
from heinfer.serve import Limits, wire
from heinfer.v1 import protocol_pb2
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


# ---------------------------------------------------------------- received in place

def _messages() -> list[bytes]:
    """One protocol message of each kind that travels typed, small and large."""
    from heinfer.protocol.messages import encode

    ids = {"session": "ab", "ref": "cd", "query": "ef"}
    out = []
    for n in (1, 70_000):
        cts = bytes(range(256)) * (n // 256) + b"x" * (n % 256)
        out += [
            encode("query", session=ids["session"], ref=ids["ref"], items=3, ciphertexts=cts, chunk=0, chunks=1),
            encode("step", query=ids["query"], ref=ids["ref"], step=1, ciphertexts=cts, chunk=1, chunks=2),
            encode("reply", query=ids["query"], step=0, ciphertexts=cts, chunk=0, chunks=1),
            encode("result", query=ids["query"], ref=ids["ref"], ciphertexts=cts),
        ]
    return out


def _without_ciphertexts(body):
    out = type(body)()
    out.CopyFrom(body)
    out.ClearField("ciphertexts")
    return out


@pytest.mark.parametrize("cls", [pb.InferRequest, pb.InferResponse])
def test_a_typed_message_is_received_in_place_and_reads_as_protobufs_parse(cls) -> None:
    """What the deserializer gives for a typed message is a view of the received bytes (no
    copy) holding exactly the protocol message; protobuf parses the same bytes to it."""
    from heinfer.protocol.messages import decode_bulk

    parse = wire.deserializer(cls)
    for m in _messages():
        for data in (wire.serialize(wire.Typed(m)), cls(message=protocol_pb2.Message.FromString(m)).SerializeToString()):
            got = parse(data)
            assert isinstance(got, wire.Typed) and got.data.readonly and got.data.obj is data
            assert got.wire_bytes() == len(data) and bytes(got.data) == bytes(memoryview(data)[-len(m):])
            assert protocol_pb2.Message.FromString(bytes(got.data)) == protocol_pb2.Message.FromString(m)
            want = cls.FromString(data).message
            kind, body, cts = decode_bulk(got.data, ("query", "step", "reply", "result"))
            assert (kind, bytes(cts)) == (want.WhichOneof("kind"), getattr(want, kind).ciphertexts)
            assert _without_ciphertexts(body) == _without_ciphertexts(getattr(want, kind))
            if len(m) > 1 << 16:  # the ciphertexts too: a view of what gRPC received
                assert cts.obj is data


@pytest.mark.parametrize("cls", [pb.InferRequest, pb.InferResponse])
def test_anything_else_is_parsed_by_protobuf_with_its_verdict(cls) -> None:
    """Parts, a message field twice (protobuf merges), bytes after the message, an envelope
    that is not one field, a cut or garbled request: protobuf's parse or its error."""
    from google.protobuf.message import DecodeError

    parse = wire.deserializer(cls)
    m = _messages()[-1]
    typed = wire.serialize(wire.Typed(m))
    part = cls(part=pb.Part(kind=pb.KIND_QUERY, index=0, total=1, size=3, data=b"abc")).SerializeToString()
    for data in (
        part,
        typed + typed,  # protobuf merges the two messages
        typed + part,  # the oneof's last field wins
        wire.serialize(wire.Typed(m + _messages()[0])),  # two envelope fields
        wire.serialize(wire.Typed(b"")),  # an empty message
    ):
        got = parse(data)
        assert isinstance(got, cls) and got == cls.FromString(data)
    for data in (typed[:-1], typed + b"\x07", b"\x12\xff"):  # cut, a field with no value
        with pytest.raises(DecodeError):
            cls.FromString(data)
        with pytest.raises(DecodeError):
            parse(data)


def test_received_names_the_whole_message_of_every_kind_of_request() -> None:
    """``received``: a view read in place, a message protobuf parsed, or a part (none) —
    with the bytes each took on the wire."""
    m = _messages()[-1]
    data = wire.serialize(wire.Typed(m))
    typed = wire.deserializer(pb.InferRequest)(data)
    assert wire.received(typed) == (len(data), typed.data)
    parsed = pb.InferRequest(message=protocol_pb2.Message.FromString(m))
    n, got = wire.received(parsed)
    assert n == parsed.ByteSize() and got == parsed.message
    part = pb.OpenSessionRequest(part=pb.Part(kind=pb.KIND_KEYS, index=0, total=1, size=1, data=b"k"))
    assert wire.received(part) == (part.ByteSize(), None)
    assert wire.received(pb.InferRequest(part=part.part)) == (pb.InferRequest(part=part.part).ByteSize(), None)
