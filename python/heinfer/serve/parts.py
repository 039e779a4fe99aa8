"""How one protocol message travels as typed parts (layer: ``heinfer.serve``).

A protocol message (one serialized ``heinfer.v1.Message``, :mod:`heinfer.protocol.messages`)
can be far larger than a gRPC message may be, so every stream carries it as a sequence of
``heinfer.v1.Part`` (``proto/heinfer/v1/service.proto``): ``kind``, ``index``, ``total``,
``size`` and a slice ``data`` of the message. :func:`split` cuts a message into parts;
:class:`Assembler` puts them back together and checks every part *before* keeping its data:

* the kind is one the receiver expects, and the same in every part of the message;
* ``size`` is at most the receiver's limit for that kind (``RESOURCE_EXHAUSTED``);
* part 0 carries between :data:`MIN_PART_BYTES` and ``max_part_bytes`` bytes (all of the
  message if it is shorter; a part above ``max_part_bytes`` is ``RESOURCE_EXHAUSTED``);
  ``total = ceil(size / len(part 0))``; every later part repeats kind, total and size, comes
  in index order and carries as many bytes as part 0 (the last one: the rest);
* a stream that ends inside a message is refused by the caller (:meth:`Assembler.describe`).

Everything else is :class:`~heinfer.errors.ProtocolError` (``INVALID_ARGUMENT``). The
assembled bytes are then parsed by the receiver as a message of the part's kind.
"""

from __future__ import annotations

from collections.abc import Iterator

from heinfer.errors import ProtocolError, ServiceError
from heinfer.protocol.messages import kind_of
from heinfer.v1 import service_pb2 as pb

__all__ = ["KINDS", "KIND_NAMES", "MIN_PART_BYTES", "Assembler", "split"]

#: Smallest part but the last of a message (a peer cannot make us count millions of parts).
MIN_PART_BYTES = 16 << 10
#: Protocol message kind → ``heinfer.v1.Kind`` value.
KINDS = {
    "keys": pb.KIND_KEYS,
    "query": pb.KIND_QUERY,
    "step": pb.KIND_STEP,
    "reply": pb.KIND_REPLY,
    "result": pb.KIND_RESULT,
}
#: ``heinfer.v1.Kind`` value → protocol message kind.
KIND_NAMES = {v: k for k, v in KINDS.items()}


def split(message: bytes, kind: str, part_bytes: int, wrapper: type | None = None) -> Iterator:
    """The parts of ``message`` (of protocol kind ``kind``), each at most ``part_bytes``.

    With ``wrapper`` (``InferRequest``, ``InferResponse``, ``OpenSessionRequest``) each part
    is built in place inside a new wrapper message, which is yielded (no copy of the part
    into the wrapper: the data is copied once into the message, once when serialized)."""
    if part_bytes < MIN_PART_BYTES:
        raise ValueError(f"parts carry at least {MIN_PART_BYTES} bytes, got {part_bytes}")
    n = len(message)
    total = max(1, -(-n // part_bytes))
    code = KINDS[kind]
    for i in range(total):
        outer = pb.Part() if wrapper is None else wrapper()
        part = outer if wrapper is None else outer.part
        part.kind, part.index, part.total, part.size = code, i, total, n
        part.data = message if total == 1 else message[i * part_bytes : (i + 1) * part_bytes]
        yield outer


class Assembler:
    """Reassembles the messages of one stream from their parts, every check done.

    ``limits``: kind → largest message of that kind (bytes); only the kinds in it are
    accepted. ``max_part_bytes``: the largest part accepted. ``feed(part)`` returns
    ``(kind, message)`` after the last part of a message and ``None`` before.
    """

    def __init__(self, limits: dict[str, int], max_part_bytes: int, what: str = "message") -> None:
        self.limits = dict(limits)
        self.max_part_bytes = max_part_bytes
        self.what = what
        self._kind: str | None = None
        self._total = self._size = self._part = 0
        self._data: list[bytes] = []
        self._received = 0

    def expect(self, limits: dict[str, int], what: str) -> None:
        """Sets the kinds (and their limits) the next message may have, and its name in
        errors; only between messages."""
        if self._kind is not None:
            raise ProtocolError(f"{self.what}: a new message was expected before this one ended")
        self.limits, self.what = dict(limits), what

    def describe(self) -> str:
        """Where the stream stands, for an error about a truncated message."""
        if self._kind is None:
            return f"before the {self.what}"
        return (
            f"inside the {self.what} after part {len(self._data)} of {self._total} "
            f"({self._received} of {self._size} bytes)"
        )

    def take_typed(self, message) -> tuple[str, object]:
        """A whole protocol message that came typed (``InferRequest.message`` /
        ``InferResponse.message``): parsed by gRPC (a ``heinfer.v1.Message``) or its bytes
        read in place (a ``memoryview``, :func:`heinfer.serve.wire.deserializer`).
        ``(kind, message)`` after the same checks as a message in parts — a kind the receiver
        expects, within its size limit — and only between messages in parts."""
        if self._kind is not None:
            raise ProtocolError(f"{self.what}: a whole message inside a message in parts ({self.describe()})")
        if isinstance(message, memoryview):
            kind, n, none = kind_of(message), message.nbytes, "bytes that are not one protocol message"
        else:
            kind, n, none = message.WhichOneof("kind"), message.ByteSize(), "an empty message"
        if kind not in self.limits:
            got = repr(kind) if kind else none
            raise ProtocolError(f"{self.what}: expected a {' or '.join(map(repr, self.limits))} message, got {got}")
        limit = self.limits[kind]
        if n > limit:
            raise ServiceError(
                f"{self.what}: a {kind} message of {n} bytes exceeds the limit of {limit} bytes",
                code="RESOURCE_EXHAUSTED",
            )
        return kind, message

    def feed(self, part: pb.Part) -> tuple[str, bytes] | None:
        """Takes one part; ``(kind, message)`` once its last part has arrived."""
        if not isinstance(part, pb.Part):
            raise ProtocolError(
                f"{self.what}: a part is a heinfer.v1.Part, got {type(part).__name__}"
            )
        data = part.data
        if self._kind is None:
            self._start(part, len(data))
        elif (part.kind, part.total, part.size) != (KINDS[self._kind], self._total, self._size):
            raise ProtocolError(
                f"{self.what}: part {part.index} declares kind {part.kind}, {part.total} parts, "
                f"{part.size} bytes; part 0 declared {KINDS[self._kind]}, {self._total}, {self._size}"
            )
        expected = len(self._data)
        if part.index != expected:
            raise ProtocolError(
                f"{self.what}: part {part.index} arrived where part {expected} of {self._total} was expected"
            )
        want = min(self._part, self._size - self._received)
        if len(data) != want:
            raise ProtocolError(
                f"{self.what}: part {part.index} carries {len(data)} bytes, not {want}"
            )
        self._data.append(data)
        self._received += len(data)
        if part.index + 1 < self._total:
            return None
        kind, message = self._kind, self._data[0] if self._total == 1 else b"".join(self._data)
        self._kind, self._data, self._received = None, [], 0
        return kind, message

    def _start(self, part: pb.Part, n: int) -> None:
        """Checks the first part of a message."""
        kind = KIND_NAMES.get(part.kind)
        if kind not in self.limits:
            got = repr(kind) if kind else f"unknown kind {part.kind}"
            raise ProtocolError(
                f"{self.what}: expected a {' or '.join(map(repr, self.limits))} message, got {got}"
            )
        if part.index != 0:
            raise ProtocolError(f"{self.what}: the first part is part {part.index}, not part 0")
        limit = self.limits[kind]
        if part.size > limit:
            raise ServiceError(
                f"{self.what}: a {kind} message of {part.size} bytes exceeds the limit of {limit} bytes",
                code="RESOURCE_EXHAUSTED",
            )
        if n > self.max_part_bytes:
            raise ServiceError(
                f"{self.what}: a part of {n} bytes exceeds max_part_bytes ({self.max_part_bytes})",
                code="RESOURCE_EXHAUSTED",
            )
        if n > part.size or (n < min(MIN_PART_BYTES, part.size)) or (n == 0 and part.size):
            raise ProtocolError(
                f"{self.what}: part 0 carries {n} bytes of a {part.size}-byte message "
                f"(parts carry at least {MIN_PART_BYTES} bytes, or the whole message)"
            )
        total = max(1, -(-part.size // n)) if n else 1
        if part.total != total:
            raise ProtocolError(
                f"{self.what}: {part.total} parts declared, {total} parts of {n} bytes carry {part.size}"
            )
        self._kind, self._total, self._size, self._part = kind, total, part.size, n
