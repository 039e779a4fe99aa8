"""The messages between client and server: protobuf (``proto/heinfer/v1/protocol.proto``).

Layer: ``heinfer.protocol``. A message on the wire is one serialized ``heinfer.v1.Message``
holding exactly one of five kinds; ciphertext fields hold batches in the engine's validated
format. :func:`decode` parses the bytes, checks the kind the caller expects and the header
strings (ids are short hex tokens), and raises :class:`~heinfer.errors.ProtocolError` naming
the problem; the ciphertext bytes are validated by the engine when the receiver decodes them
against the counts, levels and scales of its (public) program — never against the message.

===========  ====================  ===========================================================
kind         direction             fields
===========  ====================  ===========================================================
``keys``     client → server       ``program_id``, ``relin_key``, ``galois_keys``
``query``    client → server       ``session``, ``ref``, ``items``, ``ciphertexts``, ``chunk``, ``chunks``
``step``     server → client       ``query``, ``ref``, ``step``, ``ciphertexts``, ``chunk``, ``chunks``
``reply``    client → server       ``query``, ``step``, ``ciphertexts``, ``chunk``, ``chunks``
``result``   server → client       ``query``, ``ref``, ``ciphertexts``
===========  ====================  ===========================================================

``chunk`` / ``chunks``: a query, step or reply may be cut into chunks of its ciphertexts
(:mod:`heinfer.protocol.chunks`); a whole message is chunk 0 of 1.

``ref`` is the client's own reference of a query (the server echoes it): a client refuses
steps and results of queries it did not start.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.message import DecodeError

from heinfer.errors import ProtocolError
from heinfer.v1 import protocol_pb2 as pb

__all__ = [
    "KINDS",
    "encode",
    "decode",
    "decode_bulk",
    "framing",
    "keys_id",
    "kind_of",
    "length_delimited",
    "peek",
    "peek_kind",
    "pb",
    "size",
    "whole_field",
]

#: The kinds of message, in the order of the ``oneof``.
KINDS = ("keys", "query", "step", "reply", "result")
#: Header strings (ids and references) are hex tokens of at most this many characters.
MAX_ID_CHARS = 64
_IDS = {"keys": ("program_id",), "query": ("session", "ref"), "step": ("query", "ref"), "reply": ("query",), "result": ("query", "ref")}
_HEX = frozenset("0123456789abcdef")


#: Hex characters of a keys message's id (:func:`keys_id`) at the head of a session id.
KEYS_ID_CHARS = 16
#: Bytes of a keys message :func:`keys_id` reads: well into the first key (seeded keys start
#: with their random polynomial), never the whole of a set of hundreds of megabytes.
_KEYS_ID_PREFIX = 256 << 10


def keys_id(keys_message) -> str:
    """The id of a keys message: SHA-256 of its length and first 256 KiB, 16 hex characters.
    The server starts every session id with it, so a client that made several sessions' keys
    encrypts each session's queries under that session's key (a query under another key
    would decrypt to garbage, silently)."""
    import hashlib

    data = memoryview(keys_message)
    h = hashlib.sha256(len(data).to_bytes(8, "little"))
    h.update(data[:_KEYS_ID_PREFIX])
    return h.hexdigest()[:KEYS_ID_CHARS]


def encode(kind: str, **fields) -> bytes:
    """One message of ``kind`` with ``fields`` (names of the proto message), serialized.

    The bulk field (``ciphertexts``, or a keys message's ``galois_keys``: megabytes to
    hundreds of megabytes) is copied once: protobuf serializes the other fields, and the bulk
    field — a tag, a varint length and the bytes, as protobuf writes a ``bytes`` field — is
    appended to them inside the ``Message`` envelope (:func:`framing`). Protobuf parses a
    message whose fields come in any order (a field written last wins), so this is the same
    message as ``SerializeToString`` gives, with that field last
    (``tests/python/protocol/test_messages.py`` checks it against protobuf)."""
    bulk = _bulk_name(kind)
    payload = fields.pop(bulk, None)
    if payload is not None and not isinstance(payload, bytes):
        raise TypeError(f"{bulk} are bytes, got {type(payload).__name__}")
    if not payload:  # no field: protobuf omits an empty one
        return _envelope(kind, fields)[0].SerializeToString()
    return b"".join((framing(kind, **fields)(len(payload)), payload))


def framing(kind: str, **fields) -> Callable[[int], bytes]:
    """The start of a message of ``kind`` with ``fields``, as a function of its bulk field's
    length ``n > 0``: everything :func:`encode` writes before that field's bytes, so that
    ``framing(kind, **fields)(len(p)) + p == encode(kind, **fields, ciphertexts=p)``. A sender
    that serializes the ciphertexts itself writes them right after it, in one buffer
    (``CiphertextBatch.to_bytes(…, frame=…)``): no copy of a finished message."""
    bulk = _bulk_name(kind)
    if bulk in fields:
        raise TypeError(f"framing takes the fields other than {bulk!r}")
    _, body = _envelope(kind, fields)
    head = body.SerializeToString()
    tag = _varint(body.DESCRIPTOR.fields_by_name[bulk].number << 3 | _LEN)
    outer = _varint(_tag_of(kind))

    def frame(n: int) -> bytes:
        if n <= 0:
            raise ValueError(f"a framed {bulk} field has at least one byte, got {n}")
        tail = tag + _varint(n)
        return b"".join((outer, _varint(len(head) + len(tail) + n), head, tail))

    return frame


def _bulk_name(kind: str) -> str:
    """The bulk field of a kind (checked)."""
    if kind not in KINDS:
        raise ProtocolError(f"unknown message kind {kind!r}")
    return "galois_keys" if kind == "keys" else "ciphertexts"


def _envelope(kind: str, fields: dict):
    """``(message, body)`` with ``fields`` set on the body of ``kind``."""
    m = pb.Message()
    body = getattr(m, kind)
    body.SetInParent()
    for name, value in fields.items():
        setattr(body, name, value)
    return m, body


#: Protobuf wire type of length-delimited fields (``bytes``, nested messages).
_LEN = 2


def length_delimited(field: int, data: bytes) -> bytes:
    """``data`` as protobuf writes a length-delimited field ``field`` (``bytes`` or an
    embedded message): its tag, its length as a varint, the bytes (copied once)."""
    return b"".join((_varint(field << 3 | _LEN), _varint(len(data)), data))


def _varint(v: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative integer."""
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def decode(data, expect: str | tuple[str, ...] | None = None):
    """The body of a message (``pb.Keys``, ``pb.Query``, …), parsed and checked; ``expect``
    names the kind (or kinds) the caller accepts. Returns ``(kind, body)``.

    ``data``: the serialized message, or a ``heinfer.v1.Message`` gRPC already parsed (the
    service's typed path): the same checks, without parsing again."""
    if isinstance(data, pb.Message):
        m = data
    elif isinstance(data, (bytes, bytearray, memoryview)):
        m = pb.Message()
        try:
            m.ParseFromString(bytes(data))
        except (DecodeError, RuntimeWarning, ValueError) as e:
            raise ProtocolError(f"not a heinfer message ({type(e).__name__}: {str(e)[:80]})") from None
    else:
        raise ProtocolError(f"a message is bytes, got {type(data).__name__}")
    kind = m.WhichOneof("kind")
    if kind is None:
        raise ProtocolError("empty message (no kind)")
    kinds = (expect,) if isinstance(expect, str) else expect
    if kinds is not None and kind not in kinds:
        raise ProtocolError(f"expected a {' or '.join(map(repr, kinds))} message, got {kind!r}")
    body = getattr(m, kind)
    for name in _IDS[kind]:
        v = getattr(body, name)
        if not v or len(v) > MAX_ID_CHARS or not set(v) <= _HEX:
            raise ProtocolError(f"{kind!r} message: field {name!r} is not a hex id of 1..{MAX_ID_CHARS} characters")
    return kind, body


def decode_bulk(data, expect: str | tuple[str, ...]):
    """``(kind, body, ciphertexts)`` of a message that carries ciphertexts (a query, step,
    reply or result): the checks of :func:`decode`, and the ciphertext bytes as a read-only
    ``memoryview`` of ``data`` — no copy. ``data``: ``bytes``, a read-only ``memoryview`` of
    bytes (the service's received messages), or a parsed ``heinfer.v1.Message``.

    Protobuf's parse copies a ``bytes`` field twice (into its arena, then into a new Python
    object when read): two buffers the size of the message, per message (a MobileNetV2
    throughput query moves 51 GB of messages; above glibc's mmap threshold each is fresh
    memory the kernel zeroes first). Here the
    envelope is walked by hand (:func:`_split_bulk`) and protobuf parses only the other fields;
    the returned ``body`` then has an empty ``ciphertexts`` field — read the third value.
    Anything this walk does not recognize as one plain message with one ciphertext field
    (other orders of fields are fine; a repeated field, a group, a field of the wrong type,
    trailing bytes are not) is parsed by protobuf as :func:`decode` does, with its errors."""
    split = _split_bulk(data) if _in_place(data) else None
    if split is None:
        kind, body = decode(data, expect)
        return kind, body, body.ciphertexts
    kind, head, (start, stop) = split
    m = pb.Message()
    try:
        m.ParseFromString(head)
    except (DecodeError, RuntimeWarning, ValueError) as e:
        raise ProtocolError(f"not a heinfer message ({type(e).__name__}: {str(e)[:80]})") from None
    kind, body = decode(m, expect)
    return kind, body, memoryview(data)[start:stop]


#: Messages shorter than this are parsed by protobuf (the copies cost nothing there).
_BULK_MIN = 1 << 16


def _in_place(data) -> bool:
    """Whether ``data`` is read in place: ``bytes``, or a read-only, contiguous ``memoryview``
    of bytes (gRPC's received message, :func:`heinfer.serve.wire.deserializer`), of at least
    :data:`_BULK_MIN` bytes."""
    if isinstance(data, memoryview):
        ok = data.readonly and data.c_contiguous and data.ndim == 1 and data.format == "B"
        return ok and data.nbytes >= _BULK_MIN
    return isinstance(data, bytes) and len(data) >= _BULK_MIN


def kind_of(data) -> str | None:
    """The kind of a serialized message that is exactly one field of the ``Message``
    envelope (as every sender writes it), without parsing it; ``None`` for anything else
    (empty, a second envelope field, a cut or overlong length, a wrong wire type) — such
    bytes are for protobuf to judge."""
    one = _one_field(data)
    return None if one is None else one[0]


def _one_field(data) -> tuple[str, int] | None:
    """``(kind, start of the body)`` when ``data`` is exactly one length-delimited field of
    the envelope; else ``None``."""
    whole = whole_field(data)
    if whole is None or not 1 <= whole[0] <= len(KINDS):
        return None
    return KINDS[whole[0] - 1], whole[1]


def whole_field(data) -> tuple[int, int] | None:
    """``(field number, start of its value)`` when ``data`` is exactly one length-delimited
    protobuf field (its tag, its length, then that many bytes to the end); else ``None``."""
    tag, pos = _read_varint(data, 0)
    if tag is None or tag & 7 != _LEN:
        return None
    n, pos = _read_varint(data, pos)
    if n is None or pos + n != len(data):
        return None
    return tag >> 3, pos


def _split_bulk(data) -> tuple[str, bytes, tuple[int, int]] | None:
    """``(kind, the message without its ciphertext field, (start, stop) of that field's
    bytes)`` when ``data`` is exactly one ``Message`` field of a ciphertext-carrying kind
    whose body holds its ``ciphertexts`` field exactly once (wire type 2); else ``None``."""
    one = _one_field(data)
    if one is None or one[0] == "keys":
        return None
    kind, pos = one
    bulk = pb.Message.DESCRIPTOR.fields_by_name[kind].message_type.fields_by_name["ciphertexts"].number
    head, found, end = [], None, len(data)
    while pos < end:
        start = pos
        tag, pos = _read_varint(data, pos)
        if tag is None or tag >> 3 == 0:
            return None
        wire = tag & 7
        if wire == 0:
            _, pos = _read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == _LEN:
            ln, pos = _read_varint(data, pos)
            if ln is None or (tag >> 3 == bulk and found is not None):
                return None
            if tag >> 3 == bulk:
                found = (pos, pos + ln)
                pos += ln
                if pos > end:
                    return None
                continue
            pos += ln
        else:
            return None  # groups: protobuf decides
        if pos is None or pos > end or tag >> 3 == bulk:
            return None
        head.append(data[start:pos])
    if found is None:
        return None
    body = b"".join(head)
    return kind, b"".join((_varint(_tag_of(kind)), _varint(len(body)), body)), found


def _tag_of(kind: str) -> int:
    """The tag (field number and wire type) of a kind's field in ``Message``."""
    return pb.Message.DESCRIPTOR.fields_by_name[kind].number << 3 | _LEN


def _read_varint(data: bytes, pos: int) -> tuple[int | None, int | None]:
    """``(value, next position)`` of the varint at ``pos``; ``(None, None)`` if it is cut
    short or longer than protobuf's 10 bytes."""
    v = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        b = data[i]
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i + 1
        shift += 7
    return None, None


def peek(data: bytes, expect: str | tuple[str, ...] | None = None):
    """``(kind, body)`` of a message: the same checks as :func:`decode` (protobuf parses the
    whole message; the ciphertext bytes are not validated here)."""
    return decode(data, expect)


def size(data) -> int:
    """Serialized bytes of a message (``bytes`` or a parsed ``heinfer.v1.Message``)."""
    return data.ByteSize() if isinstance(data, pb.Message) else len(data)


def peek_kind(data: bytes) -> str:
    """The kind of a message (validated)."""
    return decode(data)[0]
