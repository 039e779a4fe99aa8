"""Chunk framing: how one protocol message travels as several gRPC messages
(layer: ``heinfer.serve``).

Protocol messages (:mod:`heinfer.protocol.messages`, ``HEMS`` + header + payload) can be far
larger than a gRPC message may be, so every stream carries them as a sequence of *frames*.
A frame is a 24-byte header followed by one chunk of the message (little endian)::

    offset size field
    0      4    magic b"HEFR"
    4      1    version (1)
    5      1    flags: bit 0 = the message is zlib-compressed; other bits must be 0
    6      2    reserved, must be 0
    8      4    index of this chunk in the message, 0, 1, …, count-1
    12     4    count: number of chunks of the message (>= 1)
    16     8    length: bytes of the message as sent (compressed, if bit 0)
    24     …    the chunk: at most ``max_chunk_bytes``; empty only for an empty message

All frames of one message repeat the same flags, count and length; the chunks, concatenated
in index order, are the message. Messages follow each other on a stream (the next message
starts with index 0 after the last chunk of the previous one). A receiver checks each frame
against the first one and against its :class:`~heinfer.serve.limits.Limits` *before* keeping
its chunk: declared length above the cap, more chunks than ``max_chunks`` or a chunk above
``max_chunk_bytes`` → ``RESOURCE_EXHAUSTED``; bad magic/version/flags, a chunk out of order,
inconsistent headers, more or fewer bytes than declared, a stream that ends inside a message
→ ``INVALID_ARGUMENT`` (:class:`~heinfer.errors.ProtocolError`). A compressed message is
inflated with its output capped at the same limit (no decompression bombs).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.limits import Limits

__all__ = ["FLAG_ZLIB", "HEADER_BYTES", "MAGIC", "VERSION", "Assembler", "compress", "frames"]

MAGIC = b"HEFR"
VERSION = 1
#: Flag bit: the assembled message is zlib-compressed.
FLAG_ZLIB = 1
_HEADER = struct.Struct("<4sBBHIIQ")
#: Bytes of a frame header.
HEADER_BYTES = _HEADER.size


def compress(message: bytes) -> tuple[bytes, bool]:
    """``(bytes to send, compressed?)``: the zlib form when it is smaller, else the message."""
    packed = zlib.compress(message, 6)
    return (packed, True) if len(packed) < len(message) else (message, False)


def frames(message: bytes, chunk_bytes: int, *, compressed: bool = False) -> Iterator[bytes]:
    """The frames of ``message`` (already compressed when ``compressed``) in chunks of at
    most ``chunk_bytes``."""
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    view = memoryview(message)
    n = len(view)
    count = max(1, -(-n // chunk_bytes))
    flags = FLAG_ZLIB if compressed else 0
    for i in range(count):
        head = _HEADER.pack(MAGIC, VERSION, flags, 0, i, count, n)
        yield head + view[i * chunk_bytes : (i + 1) * chunk_bytes]


class Assembler:
    """Reassembles the messages of one stream from their frames, every check done.

    ``feed(frame)`` returns the complete (decompressed) message after its last frame and
    ``None`` before; ``max_bytes`` caps the next message (set it per expected message, e.g.
    ``Limits.max_key_bytes`` for keys); ``what`` names it in errors.
    """

    def __init__(self, limits: Limits, max_bytes: int | None = None, what: str = "message") -> None:
        self.limits = limits
        self.max_bytes = limits.max_message_bytes if max_bytes is None else max_bytes
        self.what = what
        self._head: tuple[int, int, int] | None = None  # flags, count, length
        self._chunks: list[memoryview] = []
        self._received = 0

    @property
    def in_progress(self) -> bool:
        """Whether part of a message has arrived."""
        return self._head is not None

    def describe_partial(self) -> str:
        """Where the stream stands, for an error about a truncated message."""
        if self._head is None:
            return f"before the {self.what}"
        _, count, length = self._head
        return (
            f"inside the {self.what} after chunk {len(self._chunks)} of {count} "
            f"({self._received} of {length} bytes)"
        )

    def feed(self, frame: bytes) -> bytes | None:
        """Takes one frame; the whole message once its last chunk has arrived."""
        if not isinstance(frame, (bytes, bytearray, memoryview)):
            raise ProtocolError(f"{self.what}: a frame is bytes, got {type(frame).__name__}")
        if len(frame) < HEADER_BYTES:
            raise ProtocolError(
                f"{self.what}: a frame of {len(frame)} bytes is shorter than its "
                f"{HEADER_BYTES}-byte header"
            )
        magic, version, flags, reserved, index, count, length = _HEADER.unpack_from(frame)
        if magic != MAGIC:
            raise ProtocolError(f"{self.what}: not a heinfer frame (bad magic {bytes(magic)!r})")
        if version != VERSION:
            raise ProtocolError(
                f"{self.what}: frame version {version}, this build speaks {VERSION}"
            )
        if flags & ~FLAG_ZLIB or reserved:
            raise ProtocolError(f"{self.what}: unknown frame flags {flags:#x}/{reserved:#x}")
        chunk = memoryview(frame)[HEADER_BYTES:]  # no copy: the frame stays alive in it
        if len(chunk) > self.limits.max_chunk_bytes:
            raise ServiceError(
                f"{self.what}: a chunk of {len(chunk)} bytes exceeds max_chunk_bytes "
                f"({self.limits.max_chunk_bytes})",
                code="RESOURCE_EXHAUSTED",
            )
        if self._head is None:
            self._start(index, flags, count, length)
        elif (flags, count, length) != self._head:
            raise ProtocolError(
                f"{self.what}: chunk {index} declares flags {flags}, {count} chunks, "
                f"{length} bytes; chunk 0 declared {self._head[0]}, {self._head[1]}, "
                f"{self._head[2]}"
            )
        expected = len(self._chunks)
        if index != expected:
            raise ProtocolError(
                f"{self.what}: chunk {index} arrived where chunk {expected} of {count} was expected"
            )
        if not chunk and length:
            raise ProtocolError(f"{self.what}: chunk {index} is empty")
        if self._received + len(chunk) > length:
            raise ProtocolError(f"{self.what}: chunks carry more than the declared {length} bytes")
        self._chunks.append(chunk)
        self._received += len(chunk)
        if index + 1 < count:
            return None
        if self._received != length:
            raise ProtocolError(
                f"{self.what}: truncated: {self._received} of {length} bytes in {count} chunks"
            )
        message = b"".join(self._chunks)
        self._head, self._chunks, self._received = None, [], 0
        return self._inflate(message) if flags & FLAG_ZLIB else message

    def _start(self, index: int, flags: int, count: int, length: int) -> None:
        """Checks the first frame of a message."""
        if index != 0:
            raise ProtocolError(f"{self.what}: the first frame is chunk {index}, not chunk 0")
        if length > self.max_bytes:
            raise ServiceError(
                f"{self.what} of {length} bytes exceeds the limit of {self.max_bytes} bytes",
                code="RESOURCE_EXHAUSTED",
            )
        if count > self.limits.max_chunks:
            raise ServiceError(
                f"{self.what} in {count} chunks exceeds max_chunks ({self.limits.max_chunks})",
                code="RESOURCE_EXHAUSTED",
            )
        if count < 1 or count > max(1, length):
            raise ProtocolError(f"{self.what}: {count} chunks cannot carry {length} bytes")
        self._head = (flags, count, length)

    def _inflate(self, packed: bytes) -> bytes:
        """The decompressed message, capped at ``max_bytes``."""
        d = zlib.decompressobj()
        try:
            out = d.decompress(packed, self.max_bytes + 1)
        except zlib.error as e:
            raise ProtocolError(f"{self.what}: compressed data is corrupt ({e})") from None
        if len(out) > self.max_bytes:
            raise ServiceError(
                f"{self.what} decompresses to more than the limit of {self.max_bytes} bytes",
                code="RESOURCE_EXHAUSTED",
            )
        if not d.eof or d.unused_data:
            raise ProtocolError(f"{self.what}: compressed data is truncated or has trailing bytes")
        return out
