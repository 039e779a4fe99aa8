"""The service's gRPC surface: method names, metadata keys, options and the session reply
(layer: ``heinfer.serve``).

The service ``heinfer.v1.Inference`` has four methods, all on raw bytes (no protobuf: the
request and response (de)serializers are the identity; every message is a frame of
:mod:`heinfer.serve.framing` or a small UTF-8 value):

==================  ================  ===================================================
method              kind              requests → responses
==================  ================  ===================================================
``OpenSession``     client streaming  frames of one ``keys`` message (zlib-compressed when
                                      that is smaller) → the session reply (JSON, below)
``Infer``           bidirectional     frames of one ``query`` message, then of each
                                      ``reply`` → frames of each ``step`` message, then of
                                      the ``result``; one stream per query
``CloseSession``    unary             the session id (ASCII) → empty
``GetInfo``         unary             empty → the service's program id and limits (JSON,
                                      below), so that a client can check the program and
                                      size its chunks before generating keys
==================  ================  ===================================================

Metadata: ``authorization: Bearer <token>`` on every call when the service has a token;
``heinfer-chunk-bytes`` on ``Infer``: the largest chunk the client accepts (the server sends
no larger). Trailing metadata of ``Infer``: ``heinfer-server-seconds``, the server's time
spent on the query. The info reply is ``{"program_id", "program_digest", "max_chunk_bytes",
"max_message_bytes", "max_key_bytes", "idle_timeout_s", "query_timeout_s"}``
(``program_id`` names the parameter set, ``program_digest`` is the SHA-256 of the serialized
program: a client refuses a server that runs another program, even one with the same
parameters); the session reply ``{"session"}``.
"""

from __future__ import annotations

import hashlib
import json
import math

from heinfer.errors import ProtocolError
from heinfer.program.model import Program
from heinfer.serve.framing import HEADER_BYTES
from heinfer.serve.limits import MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, Limits

__all__ = [
    "CHUNK_METADATA",
    "CLOSE_SESSION",
    "GET_INFO",
    "INFER",
    "OPEN_SESSION",
    "SERVER_SECONDS_METADATA",
    "SERVICE",
    "channel_options",
    "info_reply",
    "parse_info_reply",
    "parse_session_reply",
    "program_digest",
    "server_options",
    "session_reply",
]

SERVICE = "heinfer.v1.Inference"
OPEN_SESSION = f"/{SERVICE}/OpenSession"
CLOSE_SESSION = f"/{SERVICE}/CloseSession"
INFER = f"/{SERVICE}/Infer"
GET_INFO = f"/{SERVICE}/GetInfo"
#: Metadata key: the largest chunk a client accepts.
CHUNK_METADATA = "heinfer-chunk-bytes"
#: Trailing metadata key: the server's seconds on a query.
SERVER_SECONDS_METADATA = "heinfer-server-seconds"
#: Largest info or session reply a client reads.
MAX_REPLY_BYTES = 1 << 16


def _message_options(limits: Limits) -> list[tuple[str, int]]:
    """gRPC message caps: exactly one frame of at most ``max_chunk_bytes``."""
    frame = limits.max_chunk_bytes + HEADER_BYTES
    return [("grpc.max_send_message_length", frame), ("grpc.max_receive_message_length", frame)]


def server_options(limits: Limits) -> list[tuple[str, int]]:
    """Options of a service's gRPC server: frame caps, keepalive pings that find vanished
    clients, and no port sharing with another process."""
    return [
        *_message_options(limits),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.so_reuseport", 0),
    ]


def channel_options(limits: Limits) -> list[tuple[str, int]]:
    """Options of a client channel (the same frame caps as the server's)."""
    return _message_options(limits)


def program_digest(program: Program) -> str:
    """SHA-256 (hex) of the serialized program: equal on both ends iff the programs are."""
    return hashlib.sha256(program.to_bytes()).hexdigest()


def info_reply(program_id: str, digest: str, limits: Limits) -> bytes:
    """What ``GetInfo`` answers."""
    return json.dumps(
        {
            "program_id": program_id,
            "program_digest": digest,
            "max_chunk_bytes": limits.max_chunk_bytes,
            "max_message_bytes": limits.max_message_bytes,
            "max_key_bytes": limits.max_key_bytes,
            "idle_timeout_s": limits.idle_timeout_s,
            "query_timeout_s": limits.query_timeout_s,
        }
    ).encode()


def parse_info_reply(data: bytes) -> dict:
    """The validated info reply (:class:`ProtocolError` if it is not one)."""
    r = _json_object(data, "info reply")
    for k in ("program_id", "program_digest"):
        if not isinstance(r.get(k), str):
            raise ProtocolError(f"the server's info reply has no {k}")
    c = r.get("max_chunk_bytes")
    if not isinstance(c, int) or isinstance(c, bool) or not MIN_CHUNK_BYTES <= c <= MAX_CHUNK_BYTES:
        raise ProtocolError(f"the server's info reply has an invalid max_chunk_bytes {c!r}")
    for k in ("max_message_bytes", "max_key_bytes", "idle_timeout_s", "query_timeout_s"):
        v = r.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
            raise ProtocolError(f"the server's info reply has an invalid {k} {v!r}")
    return r


def session_reply(session: str) -> bytes:
    """What ``OpenSession`` answers."""
    return json.dumps({"session": session}).encode()


def parse_session_reply(data: bytes) -> str:
    """The session id of a validated session reply (:class:`ProtocolError` if it is not one)."""
    s = _json_object(data, "session reply").get("session")
    if not isinstance(s, str) or not 1 <= len(s) <= 64 or not s.isascii() or not s.isalnum():
        raise ProtocolError("the server's session reply has no valid session id")
    return s


def _json_object(data: bytes, what: str) -> dict:
    if not isinstance(data, bytes) or len(data) > MAX_REPLY_BYTES:
        raise ProtocolError(f"the server's {what} is not bytes or too large")
    try:
        r = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise ProtocolError(f"the server's {what} is not JSON") from None
    if not isinstance(r, dict):
        raise ProtocolError(f"the server's {what} is not a JSON object")
    return r
