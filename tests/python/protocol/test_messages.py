"""The message encoder against protobuf: the same message, whatever the sizes and fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heinfer.errors import ProtocolError
from heinfer.protocol.messages import _IDS, decode, decode_bulk, encode, framing, kind_of, length_delimited, pb, whole_field

_HEX = st.text("0123456789abcdef", min_size=1, max_size=64)
_U32 = st.integers(0, 2**32 - 1)
_FIELDS = {
    "query": {"session": _HEX, "ref": _HEX, "items": _U32, "chunk": _U32, "chunks": _U32},
    "step": {"query": _HEX, "ref": _HEX, "step": _U32, "chunk": _U32, "chunks": _U32},
    "reply": {"query": _HEX, "step": _U32, "chunk": _U32, "chunks": _U32},
    "result": {"query": _HEX, "ref": _HEX},
    "keys": {"program_id": _HEX, "relin_key": st.binary(max_size=300)},
}
#: The field :func:`encode` appends last, per kind.
_BULK = {"keys": "galois_keys"}


def _protobuf(kind: str, **fields) -> bytes:
    m = pb.Message()
    body = getattr(m, kind)
    body.SetInParent()
    for k, v in fields.items():
        setattr(body, k, v)
    return m.SerializeToString()


@st.composite
def _message(draw):
    kind = draw(st.sampled_from(sorted(_FIELDS)))
    fields = {k: draw(s) for k, s in _FIELDS[kind].items() if draw(st.booleans())}
    # sizes around the varint boundaries (127/128, 16383/16384) and empty
    size = draw(st.sampled_from([0, 1, 127, 128, 300, 16383, 16384, 70000]))
    fields[_BULK.get(kind, "ciphertexts")] = bytes([draw(st.integers(0, 255))]) * size
    return kind, fields


@given(_message())
def test_encode_is_the_message_protobuf_writes(message) -> None:
    kind, fields = message
    ours, theirs = encode(kind, **fields), _protobuf(kind, **fields)
    a, b = pb.Message(), pb.Message()
    a.ParseFromString(ours)
    b.ParseFromString(theirs)
    assert a == b and len(ours) == len(theirs)  # the same fields, the bulk one moved last


def test_encode_decodes_with_the_checks() -> None:
    m = encode("step", query="ab" * 16, ref="cd" * 16, step=1, ciphertexts=b"x" * 1000, chunk=2, chunks=3)
    kind, body = decode(m, "step")
    assert (kind, body.step, body.chunk, body.chunks, body.ciphertexts) == ("step", 1, 2, 3, b"x" * 1000)


@given(_message())
def test_framing_is_what_encode_writes_before_the_bulk(message) -> None:
    kind, fields = message
    bulk = _BULK.get(kind, "ciphertexts")
    payload = fields.pop(bulk) or b"\x01"
    assert framing(kind, **fields)(len(payload)) + payload == encode(kind, **fields, **{bulk: payload})


def test_framing_refuses_the_bulk_field_and_empty_bulks() -> None:
    with pytest.raises(TypeError, match="other than 'ciphertexts'"):
        framing("reply", query="ab", ciphertexts=b"x")
    with pytest.raises(ValueError, match="at least one byte"):
        framing("reply", query="ab")(0)
    with pytest.raises(ProtocolError, match="unknown message kind"):
        framing("nope")


def test_ciphertexts_must_be_bytes() -> None:
    with pytest.raises(TypeError, match="ciphertexts are bytes"):
        encode("reply", query="ab", step=0, ciphertexts="not bytes")


# ---------------------------------------------------------------- decode_bulk: no copy, same answer
_CT_KINDS = ("query", "step", "reply", "result")


def _fields(body) -> dict:
    return {f.name: v for f, v in body.ListFields() if f.name != "ciphertexts"}


def _same_as_decode(data: bytes, kind: str) -> None:
    """decode_bulk gives what decode gives (the same fields and ciphertexts), or both refuse
    with a ProtocolError."""
    try:
        want = decode(data, kind)
    except ProtocolError as e:
        for given_as in (data, memoryview(data)):
            with pytest.raises(ProtocolError):
                decode_bulk(given_as, kind)
        return e
    # bytes, the service's read-only view of received bytes, a writeable buffer (copied)
    for given_as in (data, memoryview(data), memoryview(bytearray(data))):
        got = decode_bulk(given_as, kind)
        assert got[0] == want[0] and _fields(got[1]) == _fields(want[1])
        assert bytes(got[2]) == want[1].ciphertexts


@given(_message().filter(lambda m: m[0] in _CT_KINDS), st.integers(1 << 16, 1 << 18))
def test_decode_bulk_reads_the_ciphertexts_in_place(message, size) -> None:
    kind, fields = message
    fields.update({name: fields.get(name, "ab") for name in _IDS[kind]})  # valid ids: decoded
    fields["ciphertexts"] = bytes(range(256)) * (size // 256)
    for data in (encode(kind, **fields), _protobuf(kind, **fields)):  # bulk last, or in field order
        _same_as_decode(data, kind)
        for given_as in (data, memoryview(data)[:]):  # bytes, or a view of them (gRPC's)
            got = decode_bulk(given_as, kind)[2]
            assert isinstance(got, memoryview) and got.obj is data and got.readonly  # no copy
        assert isinstance(decode_bulk(memoryview(bytearray(data)), kind)[2], bytes)  # writeable: copied


@given(_message().filter(lambda m: m[0] in _CT_KINDS), st.data())
def test_decode_bulk_on_damaged_messages_agrees_with_protobuf(message, data) -> None:
    kind, fields = message
    fields["ciphertexts"] = b"\x07" * (1 << 16)
    good = encode(kind, **fields)
    body_at = len(good) - (1 << 16)  # the header fields are before the ciphertexts
    at = data.draw(st.integers(0, body_at + 4))
    how = data.draw(st.sampled_from(["flip", "cut", "extend", "twice"]))
    if how == "flip":
        bad = good[:at] + bytes([good[at] ^ data.draw(st.integers(1, 255))]) + good[at + 1 :]
    elif how == "cut":
        bad = good[: len(good) - data.draw(st.integers(1, 1 << 16))]
    elif how == "extend":
        bad = good + data.draw(st.binary(min_size=1, max_size=8))
    else:  # the ciphertext field twice: protobuf keeps the last one
        twice = _protobuf(kind, **{**fields, "ciphertexts": b"\x01" * 10})
        bad = good + twice  # two Message fields: protobuf merges them
    _same_as_decode(bad, kind)


def test_decode_bulk_checks_what_decode_checks() -> None:
    m = encode("step", query="ab" * 16, ref="zz", step=1, ciphertexts=b"x" * (1 << 17), chunk=0, chunks=1)
    with pytest.raises(ProtocolError, match="hex id"):
        decode_bulk(m, "step")
    with pytest.raises(ProtocolError, match="expected a 'reply'"):
        decode_bulk(encode("step", query="ab", ref="cd", ciphertexts=b"x" * (1 << 17)), "reply")
    parsed = pb.Message.FromString(encode("reply", query="ab", step=0, ciphertexts=b"y" * 9))
    assert decode_bulk(parsed, "reply")[2] == b"y" * 9  # gRPC's parsed message: as decode


def test_decode_bulk_with_the_ciphertexts_twice_keeps_the_last_as_protobuf_does() -> None:
    head = pb.Step(query="ab", ref="cd", step=2).SerializeToString()
    first, last = length_delimited(4, b"\x01" * (1 << 16)), length_delimited(4, b"\x02" * 7)
    data = length_delimited(3, head + first + last)  # Message.step = 3, Step.ciphertexts = 4
    assert decode(data, "step")[1].ciphertexts == b"\x02" * 7
    _same_as_decode(data, "step")
    wrong_type = length_delimited(3, head + b"\x20\x05" + first)  # field 4 as a varint, then bytes
    _same_as_decode(wrong_type, "step")


def test_decode_bulk_splits_what_it_should() -> None:
    """The damaged-message property above must also exercise the in-place path: a message
    with its fields in another order and unknown fields is still read in place."""
    head = pb.Step(query="ab", ref="cd", step=2, chunk=1, chunks=3).SerializeToString()
    unknown = length_delimited(15, b"zz") + b"\x80\x01\x05"  # field 15 (bytes), field 16 (varint)
    data = length_delimited(3, length_delimited(4, b"\x03" * (1 << 16)) + unknown + head)
    kind, body, ct = decode_bulk(data, "step")
    assert ct.obj is data and bytes(ct) == b"\x03" * (1 << 16)
    assert (body.step, body.chunk, body.chunks, body.query) == (2, 1, 3, "ab")
    _same_as_decode(data, "step")


def test_kind_of_names_only_one_envelope_field() -> None:
    """The kind without a parse, for a message as every sender writes it; anything else is
    left for protobuf to judge (``None``)."""
    q = encode("query", session="ab", ref="cd", items=2, ciphertexts=b"x" * 70_000)
    keys = encode("keys", program_id="ab", galois_keys=b"k" * 9)
    for data in (q, memoryview(q)):
        assert kind_of(data) == "query"
    assert kind_of(keys) == "keys" and kind_of(encode("result", query="ab", ref="cd")) == "result"
    for bad in (b"", q[:-1], q + b"\x00", q + keys, b"\x08\x01", b"\x32\x00", b"\x0a\xff"):
        assert kind_of(bad) is None  # cut, trailing, two fields, a varint, field 6, overlong length


def test_whole_field_is_one_length_delimited_field_to_the_end() -> None:
    body = b"x" * 300
    data = length_delimited(7, body)
    assert whole_field(data) == (7, len(data) - 300)
    for bad in (b"", data[:-1], data + b"\x00", b"\x38\x01", b"\x3a\xff"):
        assert whole_field(bad) is None  # empty, cut, trailing, a varint field, overlong
