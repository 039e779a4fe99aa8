"""The caps a service (and a remote session) enforces on what it receives
(layer: ``heinfer.serve``).

Message sizes are not guessed: every message of a program has a size the public program
determines (:func:`heinfer.protocol.limits.message_limits`), and :func:`effective_limits`
takes those, lowered by the operator's ``max_message_bytes``/``max_key_bytes`` when set.
Every limit is checked before the memory or time it protects is spent: a message's declared
size before any of its parts is kept, the session counts before keys are read, the query
counts before a query's input is read. Exceeding a cap is answered with gRPC status
``RESOURCE_EXHAUSTED`` (``DEADLINE_EXCEEDED`` for the timeouts), with a message naming the
limit and its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from heinfer.protocol.limits import message_limits
from heinfer.serve.parts import MIN_PART_BYTES

__all__ = ["MAX_PART_BYTES", "MIN_PART_BYTES", "Limits", "effective_limits"]

#: Largest allowed ``max_part_bytes`` (gRPC messages stay far below 2 GiB).
MAX_PART_BYTES = 64 << 20
_OPTIONAL = ("max_message_bytes", "max_key_bytes", "max_queries_per_session")


@dataclass(frozen=True)
class Limits:
    """Caps on messages, sessions, queries and waiting times (all defaults documented).

    A server applies every field; a client (:func:`heinfer.serve.connect`) applies the
    message and part caps to what the server sends back, and advertises ``max_part_bytes``
    so that the server never sends it a larger part.

    Raises :class:`ValueError` if a count is not a positive integer, a timeout is not a
    positive finite number, or ``max_part_bytes`` is outside
    [``MIN_PART_BYTES``, ``MAX_PART_BYTES``].
    """

    #: Largest query, step, reply or result message: ``None`` = exactly what the program
    #: allows (:func:`heinfer.protocol.limits.message_limits`); a number lowers that.
    max_message_bytes: int | None = None
    #: Largest keys message: ``None`` = what the program's key manifest allows.
    max_key_bytes: int | None = None
    #: Largest part of a message on the wire: 1 MiB (measured fastest on loopback between two
    #: processes on an AMD EPYC: 18.7 MB up and 20.6 MB down in 33 ms with 1 MiB parts, 45 ms with 256 KiB,
    #: 120 ms with 64 KiB; every channel and server is configured for exactly this size plus
    #: the part's fields). Queries, steps and replies travel in chunks of one part each.
    max_part_bytes: int = 1 << 20
    #: Sessions open at once: 64.
    max_sessions: int = 64
    #: Sessions open at once from one peer address: 16.
    max_sessions_per_peer: int = 16
    #: Queries running at once, over all sessions: 8 (one more is refused at once).
    max_concurrent_queries: int = 8
    #: Queries running at once from one peer address: 4.
    max_queries_per_peer: int = 4
    #: Queries one session may start over its life: ``None`` (the default) = no cap. Past it
    #: a query is refused (``RESOURCE_EXHAUSTED``) and the client must open a new session —
    #: new keys, and a new place under ``max_sessions_per_peer``. With a token and the
    #: per-peer caps this bounds how fast one client can query the model (each answer tells a
    #: client-aided client the pre-activations, a two-party client the outputs). In the
    #: two-party service a query is one offline request (a client's input may take several).
    max_queries_per_session: int | None = None
    #: A session with no query for this long is closed and its keys freed: 600 s.
    idle_timeout_s: float = 600.0
    #: Longest wait for one whole message from the client once the server expects it (the
    #: keys, a query, the reply to a client-aided step), and for the client to accept a
    #: message the server sends; past it the query (or upload) is abandoned: 300 s.
    query_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in _OPTIONAL and v is None:
                continue
            if f.type.startswith("int"):
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise ValueError(f"Limits.{f.name} must be a positive integer, got {v!r}")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"Limits.{f.name} must be a positive number of seconds, got {v!r}")
        if not MIN_PART_BYTES <= self.max_part_bytes <= MAX_PART_BYTES:
            raise ValueError(
                f"Limits.max_part_bytes must be in [{MIN_PART_BYTES}, {MAX_PART_BYTES}], "
                f"got {self.max_part_bytes}"
            )


def effective_limits(limits: Limits, program) -> dict[str, int]:
    """Kind → the largest message of that kind (bytes): the public ``program``'s exact
    bounds, lowered by ``limits.max_key_bytes`` (keys) and ``limits.max_message_bytes``
    (every other kind) when they are set."""
    out = {}
    for kind, bound in message_limits(program.public()).items():
        cap = limits.max_key_bytes if kind == "keys" else limits.max_message_bytes
        out[kind] = bound if cap is None else min(bound, cap)
    return out
