"""Serialized ciphertext batches between the server and its workers.

Layer: ``heinfer.cluster``. The batch format (``heinfer_ckks::serialize::batch``) is a
10-byte header — magic ``HEBT``, version (u16), count (u32), little-endian — then each
ciphertext as its length (u32) and bytes. Output-row groups are concatenated here at the
byte level (headers checked, counts summed) and decoded once, fully validated, by
:func:`join_batches`: far cheaper than rebuilding ciphertext objects one by one.
"""

from __future__ import annotations

import struct

from heinfer import _native
from heinfer.errors import ClusterError

__all__ = ["join_batches", "batch_count"]

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


def join_batches(params: _native.Params, parts: list[bytes], expected: int) -> _native.CiphertextBatch:
    """The batches ``parts`` (in order) as one decoded batch of exactly ``expected``
    ciphertexts; :class:`ClusterError` when a part or the total count is wrong."""
    counts = [batch_count(p) for p in parts]
    if sum(counts) != expected:
        raise ClusterError(f"the workers answered {sum(counts)} ciphertexts, the segment has {expected} outputs")
    if len(parts) == 1:
        data = parts[0]
    else:
        version = _HEAD.unpack_from(parts[0])[1]
        data = b"".join([_HEAD.pack(_MAGIC, version, expected)] + [memoryview(p)[_HEAD.size :] for p in parts])
    return _native.CiphertextBatch.from_bytes(params, data, len(data), expected)
