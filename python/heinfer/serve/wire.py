"""The service's gRPC surface besides the generated code: metadata keys, channel and server
options, and the ``GetInfo`` answer (layer: ``heinfer.serve``).

The service ``heinfer.v1.Inference`` is defined in ``proto/heinfer/v1/service.proto``; its
messages are generated (``heinfer.v1.service_pb2``), its stub and registration come from the
proto's descriptor (:mod:`heinfer.serve.rpc`):

==================  ================  ===================================================
method              kind              requests → responses
==================  ================  ===================================================
``GetInfo``         unary             → program id, message limits, part size, timeouts
``OpenSession``     client streaming  parts of one ``keys`` message → session id and secret
``Infer``           bidirectional     the ``query``'s chunks, then each ``reply``'s →
                                      each ``step``'s chunks, then the ``result``; every
                                      message in parts (one per chunk by default)
``CloseSession``    unary             session id (+ its secret in metadata) → empty
==================  ================  ===================================================
"""

from __future__ import annotations

import math
from collections.abc import Callable

from heinfer.errors import ProtocolError
from heinfer.protocol.messages import MAX_ID_CHARS, kind_of, length_delimited, whole_field
from heinfer.serve.limits import MAX_PART_BYTES, MIN_PART_BYTES, Limits
from heinfer.v1 import service_pb2 as pb

__all__ = [
    "KIND_ORDER",
    "Typed",
    "deserializer",
    "received",
    "serialize",
    "MAX_PART_METADATA",
    "SECRET_METADATA",
    "SERVER_SECONDS_METADATA",
    "SESSION_METADATA",
    "channel_options",
    "info_response",
    "parse_info",
    "server_options",
]

#: Metadata key on ``Infer``: the largest part a client accepts.
MAX_PART_METADATA = "heinfer-max-part-bytes"
#: Metadata keys on ``Infer`` and ``CloseSession``: the session and its secret.
SESSION_METADATA = "heinfer-session"
SECRET_METADATA = "heinfer-session-secret"
#: Trailing metadata key of ``Infer``: the server's seconds on a query.
SERVER_SECONDS_METADATA = "heinfer-server-seconds"
#: The protocol message kinds, in the order of ``MessageLimits``' fields.
KIND_ORDER = ("keys", "query", "step", "reply", "result")
#: Room for a part's own fields (kind, index, total, size, tags) and the request wrapper.
PART_OVERHEAD = 64


#: HTTP/2 tuning for streams of tens of MB (measured on loopback, ``bench/service.py``): the
#: largest frames HTTP/2 allows, a write buffer and a flow-control look-ahead that hold a
#: whole message, so a sender is not throttled to the default 64 KiB windows.
TRANSPORT_OPTIONS = [
    ("grpc.http2.max_frame_size", (1 << 24) - 1),
    ("grpc.http2.write_buffer_size", 64 << 20),
    ("grpc.http2.lookahead_bytes", 64 << 20),
]


def _message_options(limits: Limits) -> list[tuple[str, int]]:
    """gRPC message caps (exactly one part of at most ``max_part_bytes``) and the transport
    tuning of :data:`TRANSPORT_OPTIONS`."""
    n = limits.max_part_bytes + PART_OVERHEAD
    return [
        ("grpc.max_send_message_length", n),
        ("grpc.max_receive_message_length", n),
        *TRANSPORT_OPTIONS,
    ]


def server_options(limits: Limits) -> list[tuple[str, int]]:
    """Options of a service's gRPC server: message caps, keepalive pings that find vanished
    clients, and no port sharing with another process."""
    return [
        *_message_options(limits),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.so_reuseport", 0),
    ]


def channel_options(limits: Limits) -> list[tuple[str, int]]:
    """Options of a client channel (the same message caps as the server's)."""
    return _message_options(limits)


def info_response(
    program_id: str, message_limits: dict[str, int], limits: Limits
) -> pb.GetInfoResponse:
    """What ``GetInfo`` answers."""
    return pb.GetInfoResponse(
        program_id=program_id,
        limits=pb.MessageLimits(**{k: message_limits[k] for k in KIND_ORDER}),
        max_part_bytes=limits.max_part_bytes,
        idle_timeout_s=limits.idle_timeout_s,
        query_timeout_s=limits.query_timeout_s,
    )


def parse_info(info: pb.GetInfoResponse) -> dict:
    """The validated ``GetInfo`` answer as a dict (:class:`ProtocolError` if it is not one):
    ``program_id``, ``limits`` (kind → bytes), ``max_part_bytes``, the timeouts."""
    if not isinstance(info, pb.GetInfoResponse):
        raise ProtocolError(f"the server's info is not a GetInfoResponse ({type(info).__name__})")
    pid = info.program_id
    if not 1 <= len(pid) <= MAX_ID_CHARS or not set(pid) <= set("0123456789abcdef"):
        raise ProtocolError("the server's info has no valid program id")
    if not MIN_PART_BYTES <= info.max_part_bytes <= MAX_PART_BYTES:
        raise ProtocolError(
            f"the server's info has an invalid max_part_bytes {info.max_part_bytes}"
        )
    limits = {k: int(getattr(info.limits, k)) for k in KIND_ORDER}
    for k in ("idle_timeout_s", "query_timeout_s"):
        v = getattr(info, k)
        if not 0 < v < math.inf:
            raise ProtocolError(f"the server's info has an invalid {k} {v!r}")
    return {
        "program_id": pid,
        "limits": limits,
        "max_part_bytes": int(info.max_part_bytes),
        "idle_timeout_s": info.idle_timeout_s,
        "query_timeout_s": info.query_timeout_s,
    }


#: Field number of ``message`` in ``InferRequest`` and ``InferResponse``.
_MESSAGE_FIELD = pb.InferRequest.DESCRIPTOR.fields_by_name["message"].number
assert _MESSAGE_FIELD == pb.InferResponse.DESCRIPTOR.fields_by_name["message"].number


class Typed:
    """A serialized protocol message that travels typed (``InferRequest.message`` or
    ``InferResponse.message``). On the way out, :func:`serialize` writes the envelope around
    its bytes, so it is neither parsed nor copied into a part; on the way in,
    :func:`deserializer` gives one whose ``data`` is a read-only ``memoryview`` of the bytes
    gRPC received, so it is neither parsed nor copied either."""

    __slots__ = ("data",)

    def __init__(self, data: bytes | memoryview) -> None:
        self.data = data

    def wire_bytes(self) -> int:
        """Bytes of the request or response on the wire: the one-byte tag, the length's
        varint (7 bits per byte), the message."""
        n = len(self.data)
        return 1 + max(1, -(-n.bit_length() // 7)) + n


def received(item) -> tuple[int, object | None]:
    """``(bytes on the wire, the whole protocol message it carries or None)`` of a received
    request or response: a :class:`Typed` view (from :func:`deserializer`), the ``message``
    field of one protobuf parsed, or ``None`` for a part (an ``OpenSession`` request has only
    parts). Nothing is copied."""
    if isinstance(item, Typed):
        return item.wire_bytes(), item.data
    typed = "payload" in item.DESCRIPTOR.oneofs_by_name and item.WhichOneof("payload") == "message"
    return item.ByteSize(), (item.message if typed else None)


def serialize(item) -> bytes:
    """gRPC serializer of every request and response of the service: a :class:`Typed`
    protocol message as the ``message`` field of an ``Infer`` request or response, around its
    bytes (the bytes protobuf would write for it, copied once); anything else by protobuf."""
    if isinstance(item, Typed):
        return length_delimited(_MESSAGE_FIELD, item.data)
    return item.SerializeToString()


def deserializer(cls: type) -> Callable[[bytes], object]:
    """gRPC deserializer of ``cls`` (``InferRequest`` or ``InferResponse``).

    A request or response that is exactly its ``message`` field holding exactly one field
    of the protocol envelope (as :func:`serialize` writes it, and protobuf too) becomes a
    :class:`Typed` whose ``data`` is a read-only ``memoryview`` of the received bytes: the
    ciphertexts are then read in place (:func:`heinfer.protocol.messages.decode_bulk`)
    instead of being copied twice by protobuf (into its arena, then into a new ``bytes`` when
    the field is read), and the body is checked by the receiver (``INVALID_ARGUMENT`` naming
    the problem). Anything else — parts, other field layouts, bytes that are not one
    envelope field — is parsed by protobuf (``cls.FromString``), with its errors."""

    def parse(data: bytes):
        whole = whole_field(data) if isinstance(data, bytes) else None
        if whole is not None and whole[0] == _MESSAGE_FIELD:
            view = memoryview(data)[whole[1] :]
            if kind_of(view) is not None:
                return Typed(view)
        return cls.FromString(data)

    parse.__qualname__ = parse.__name__ = f"deserialize_{cls.__name__}"
    return parse
