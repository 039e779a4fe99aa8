"""Serialized ciphertext batches between the server and its workers.

Layer: ``heinfer.cluster``. The batch format (``heinfer_ckks::serialize::batch``) is a
10-byte header — magic ``HEBT``, version (u16), count (u32), little-endian — then each
ciphertext as its length (u32) and bytes. Output-row groups are concatenated here at the
byte level (headers checked, counts summed) by :func:`join_batches`: far cheaper than
rebuilding ciphertext objects one by one; the result is decoded only if it is used as more
than bytes.
"""

from __future__ import annotations

import struct

from heinfer import _native
from heinfer.errors import ClusterError

__all__ = ["JoinedBatch", "batch_count", "join_batches"]

_HEAD = struct.Struct("<4sHI")
_MAGIC = b"HEBT"


def batch_count(data: bytes) -> int:
    """The count in a serialized batch's header (checked magic)."""
    if len(data) < _HEAD.size:
        raise ClusterError(f"a worker answered {len(data)} bytes, not a ciphertext batch")
    magic, _, count = _HEAD.unpack_from(data)
    if magic != _MAGIC:
        raise ClusterError("a worker answered bytes that are not a ciphertext batch (bad magic)")
    return count


class JoinedBatch:
    """The output of a segment as the workers serialized it: :meth:`to_bytes` returns those
    bytes as they are (what the protocol server sends on, without decoding and re-encoding
    them: the workers are the server's own processes); any other use of a
    :class:`~heinfer._native.CiphertextBatch` (``len``, ``level``, ``to_list``…) decodes
    them once, fully validated."""

    def __init__(self, params: _native.Params, data: bytes, count: int, drop_bits: list[int] | None = None) -> None:
        self._params = params
        self._data = data
        self._count = count
        self._drop = _dropped(drop_bits)
        self._batch: _native.CiphertextBatch | None = None

    def to_bytes(self, start: int = 0, stop: int | None = None, drop_bits: list[int] | None = None, frame=None) -> bytes:
        """The serialized ciphertexts ``[start, stop)`` (all by default): the workers' bytes
        as they are, or a batch of that range cut from them at the byte level (each
        ciphertext's length read from its prefix, bounds checked). ``drop_bits`` must be the
        rounding the workers applied (given to :func:`join_batches`); another one decodes
        the ciphertexts and serializes them again. ``frame``: as a batch's ``to_bytes``, the
        result is ``frame(n) + batch`` (a message's header, then these bytes)."""
        if _dropped(drop_bits) != self._drop:
            return self.decoded().to_bytes(start, self._count if stop is None else stop, drop_bits=drop_bits, frame=frame)
        stop = self._count if stop is None else stop
        if not 0 <= start < stop <= self._count:
            raise IndexError(f"ciphertexts [{start}, {stop}) of a batch of {self._count}")
        if (start, stop) == (0, self._count):
            pieces: tuple = (self._data,)
        else:
            pieces = self._cut(start, stop)
        if frame is None and len(pieces) == 1:
            return pieces[0] if isinstance(pieces[0], bytes) else bytes(pieces[0])
        head = (frame(sum(len(p) for p in pieces)),) if frame is not None else ()
        return b"".join(head + pieces)

    def _cut(self, start: int, stop: int) -> tuple:
        """A batch header for ciphertexts ``[start, stop)`` and a view of their bytes."""
        data, pos, begin = self._data, _HEAD.size, 0
        for i in range(stop):
            if i == start:
                begin = pos
            if pos + 4 > len(data):
                raise ClusterError("the workers' answer ends inside a ciphertext")
            pos += 4 + struct.unpack_from("<I", data, pos)[0]
        if pos > len(data):
            raise ClusterError("the workers' answer ends inside a ciphertext")
        version = _HEAD.unpack_from(data)[1]
        return (_HEAD.pack(_MAGIC, version, stop - start), memoryview(data)[begin:pos])

    def __len__(self) -> int:
        return self._count

    def decoded(self) -> _native.CiphertextBatch:
        """The ciphertexts, decoded and validated (once)."""
        if self._batch is None:
            self._batch = _native.CiphertextBatch.from_bytes(self._params, self._data, len(self._data), self._count, list(self._drop) or None)
            if len(self._batch) != self._count:
                raise ClusterError(f"the workers' answer decodes to {len(self._batch)} ciphertexts, not {self._count}")
        return self._batch

    def __getattr__(self, name: str):
        return getattr(self.decoded(), name)

    def __getitem__(self, i):
        return self.decoded()[i]


def _dropped(drop_bits: list[int] | None) -> tuple[int, ...]:
    """Rounding as a tuple, ``()`` for none (all zeros is none)."""
    return tuple(drop_bits) if drop_bits and any(drop_bits) else ()


def join_batches(params: _native.Params, parts: list[bytes], expected: int, drop_bits: list[int] | None = None) -> JoinedBatch:
    """The batches ``parts`` (in order) as one batch of exactly ``expected`` ciphertexts
    (headers checked, counts summed; decoded on demand, see :class:`JoinedBatch`), rounded by
    the workers with ``drop_bits``; :class:`ClusterError` when a part or the total count is
    wrong."""
    counts = [batch_count(p) for p in parts]
    if sum(counts) != expected:
        raise ClusterError(f"the workers answered {sum(counts)} ciphertexts, the segment has {expected} outputs")
    if len(parts) == 1:
        data = parts[0]
    else:
        version = _HEAD.unpack_from(parts[0])[1]
        data = b"".join([_HEAD.pack(_MAGIC, version, expected)] + [memoryview(p)[_HEAD.size :] for p in parts])
    return JoinedBatch(params, data, expected, drop_bits)
