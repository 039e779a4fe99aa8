"""The message encoder against protobuf: the same message, whatever the sizes and fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heinfer.protocol.messages import decode, encode, pb

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


def test_ciphertexts_must_be_bytes() -> None:
    with pytest.raises(TypeError, match="ciphertexts are bytes"):
        encode("reply", query="ab", step=0, ciphertexts="not bytes")
