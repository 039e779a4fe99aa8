"""The messages between client and server, and their validated byte format.

Every message is ``b"HEMS"``, a version byte, a u32 length and a UTF-8 JSON header, then an
opaque payload (a serialized ciphertext batch or key). :func:`decode` checks magic,
version, sizes, the header's type and fields before anything else looks at the payload;
every failure is a :class:`~heinfer.errors.ProtocolError` naming the problem.

===========  ====================  =====================================================
kind         direction             header fields / payload
===========  ====================  =====================================================
``keys``     client → server       ``program_id`` / relinearization key (or empty)
``query``    client → server       ``session``, ``ref``, ``items`` / input ciphertexts
``step``     server → client       ``query``, ``ref``, ``items``, ``step``, ``group_sizes`` / values
``reply``    client → server       ``query``, ``step`` / re-encrypted activations
``result``   server → client       ``query``, ``ref``, ``items`` / output ciphertexts

``ref`` is the client's own reference of a query (echoed by the server): a client refuses
steps and results of queries it did not send.
===========  ====================  =====================================================
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

from heinfer.errors import ProtocolError

__all__ = ["Message", "encode", "decode", "peek_kind", "peek_header", "MAX_HEADER_BYTES"]

MAGIC = b"HEMS"
VERSION = 1
#: Largest JSON header accepted (group sizes of a large pooling layer fit).
MAX_HEADER_BYTES = 16 << 20
_FIELDS = {
    "keys": {"program_id": str},
    "query": {"session": str, "ref": str, "items": int},
    "step": {"query": str, "ref": str, "items": int, "step": int, "group_sizes": list},
    "reply": {"query": str, "step": int},
    "result": {"query": str, "ref": str, "items": int},
}


@dataclass
class Message:
    """A protocol message: its ``kind``, header fields and payload bytes."""

    kind: str
    header: dict = field(default_factory=dict)
    payload: bytes = b""


def encode(msg: Message) -> bytes:
    """The message as bytes."""
    head = json.dumps({"kind": msg.kind, **msg.header}).encode()
    return MAGIC + bytes([VERSION]) + struct.pack("<I", len(head)) + head + bytes(msg.payload)


def peek_kind(data: bytes) -> str:
    """The kind of a message, validating its header but not copying its payload."""
    return _header(data)[0]


def peek_header(data: bytes) -> tuple[str, dict]:
    """``(kind, header fields)`` of a message, validated, without copying its payload."""
    kind, head, _ = _header(data)
    return kind, head


def decode(data: bytes, expect: str | None = None) -> Message:
    """Validates and decodes a message; ``expect`` names the kind the caller needs."""
    kind, head, start = _header(data)
    if expect is not None and kind != expect:
        raise ProtocolError(f"expected a {expect!r} message, got {kind!r}")
    return Message(kind, head, bytes(data[start:]))


def _header(data: bytes) -> tuple[str, dict, int]:
    """``(kind, fields, payload offset)`` of a message, every header check done."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError(f"a message is bytes, got {type(data).__name__}")
    if len(data) < 9 or bytes(data[:4]) != MAGIC:
        raise ProtocolError("not a heinfer message (bad magic)")
    if data[4] != VERSION:
        raise ProtocolError(f"message version {data[4]}, this build speaks {VERSION}")
    (n,) = struct.unpack("<I", bytes(data[5:9]))
    if n > MAX_HEADER_BYTES or 9 + n > len(data):
        raise ProtocolError(f"message header of {n} bytes is truncated or too large")
    try:
        head = json.loads(bytes(data[9 : 9 + n]).decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ProtocolError(f"message header is not valid JSON: {type(e).__name__}") from None
    kind = head.get("kind") if isinstance(head, dict) else None
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise ProtocolError(f"unknown message kind {str(kind)[:40]!r}")
    head.pop("kind")
    for name, typ in _FIELDS[kind].items():
        if not isinstance(head.get(name), typ) or isinstance(head.get(name), bool):
            raise ProtocolError(f"{kind!r} message: field {name!r} missing or not {typ.__name__}")
    return kind, head, 9 + n
