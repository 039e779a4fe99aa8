"""The caps a service (and a remote session) enforces on what it receives
(layer: ``heinfer.serve``).

Every limit is checked before the memory or time it protects is spent: a message's declared
length before any of its chunks is kept, the session count before keys are read, the query
count before a query's input is read. Exceeding a cap is answered with gRPC status
``RESOURCE_EXHAUSTED`` (or ``DEADLINE_EXCEEDED`` for the timeouts), with a message naming the
limit and its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["MAX_CHUNK_BYTES", "MIN_CHUNK_BYTES", "Limits"]

#: Smallest allowed ``max_chunk_bytes``.
MIN_CHUNK_BYTES = 1 << 10
#: Largest allowed ``max_chunk_bytes`` (gRPC messages stay far below 2 GiB).
MAX_CHUNK_BYTES = 64 << 20


@dataclass(frozen=True)
class Limits:
    """Caps on messages, sessions, queries and waiting times (all defaults documented).

    A server applies every field; a client (:func:`heinfer.serve.connect`) applies the
    message and chunk caps to what the server sends back, and advertises ``max_chunk_bytes``
    so that the server never sends it a larger chunk.

    Raises :class:`ValueError` if a count is not a positive integer, a timeout is not a
    positive finite number, or ``max_chunk_bytes`` is outside
    [``MIN_CHUNK_BYTES``, ``MAX_CHUNK_BYTES``].
    """

    #: Largest assembled message (a query, a reply, a step, a result): 1 GiB.
    max_message_bytes: int = 1 << 30
    #: Largest keys message (after decompression): 512 MiB.
    max_key_bytes: int = 512 << 20
    #: Largest chunk of a message on the wire: 1 MiB (gRPC's default cap is 4 MiB; every
    #: channel and server is configured for exactly this size plus the frame header).
    max_chunk_bytes: int = 1 << 20
    #: Most chunks one message may be split into: 16384 (1 GiB in 64 KiB chunks).
    max_chunks: int = 1 << 14
    #: Sessions open at once: 64.
    max_sessions: int = 64
    #: Queries running at once, over all sessions: 8 (one more is refused at once).
    max_concurrent_queries: int = 8
    #: A session with no query for this long is closed and its keys freed: 600 s.
    idle_timeout_s: float = 600.0
    #: Longest wait for one whole message from the client once the server expects it (the
    #: keys, a query, the reply to a client-aided step), and for the client to accept a
    #: message the server sends; past it the query (or upload) is abandoned: 300 s.
    query_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "int":
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise ValueError(f"Limits.{f.name} must be a positive integer, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"Limits.{f.name} must be a positive number of seconds, got {v!r}")
        if not MIN_CHUNK_BYTES <= self.max_chunk_bytes <= MAX_CHUNK_BYTES:
            raise ValueError(
                f"Limits.max_chunk_bytes must be in [{MIN_CHUNK_BYTES}, {MAX_CHUNK_BYTES}], "
                f"got {self.max_chunk_bytes}"
            )
