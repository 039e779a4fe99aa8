"""The client's side of the two layouts: values ↔ ciphertexts of a segment.

Layer: ``heinfer.protocol``. Batch axis: tensor element ``f`` of every item is ciphertext
``f``, item ``b`` in slot ``b`` (real packing), in the real and imaginary parts of slots
``b`` and ``b − N/2`` (complex packing, nGraph-HE2 §3.1.2), or in coefficient ``b``
(coefficient packing: no FFT, √N less fresh noise per item). Slots: the client fills the
segment's gather map (one element may fill many slots) and reads outputs at their placement.
Both encrypt with the secret key (seed-compressed, one NTT per limb) in parallel in Rust.
"""

from __future__ import annotations

import numpy as np

from heinfer import _native
from heinfer.program.model import Segment

__all__ = ["decrypt_rows", "decrypt_segment_output", "encrypt_rows", "encrypt_rows_bytes", "encrypt_segment_input", "input_rows", "output_values"]


def input_rows(seg: Segment, values: np.ndarray, slots: int, lanes: int = 1) -> np.ndarray:
    """``values`` ``(items, in_size)`` → one row per input ciphertext of the segment: complex
    slots (slot layout, real and complex packing) or real coefficients (coefficient packing).
    In the slot layout item ``j`` fills lane ``j`` of ``lanes`` (the gather map names lane 0;
    :mod:`heinfer.compiler.latency.lanes`). Row ``i`` is encrypted on its own
    (:func:`encrypt_rows`), so rows can be encrypted chunk by chunk."""
    lay = seg.layout
    if lay.kind == "slots":
        if len(values) > lanes:
            raise ValueError(f"{len(values)} items for {lanes} lane(s)")
        g = lay.gather[:, ::lanes]
        rows = np.zeros(lay.gather.shape, dtype=np.complex128)
        for j, item in enumerate(values):
            rows[:, j::lanes] = np.where(g >= 0, item[np.maximum(g, 0)], 0.0)
        return rows
    rows = np.ascontiguousarray(values.T, dtype=np.float64)  # (in_size, items)
    return rows if lay.packing == "coeff" else _pack(rows, slots)


def encrypt_rows(kg: _native.KeyGenerator, seg: Segment, rows: np.ndarray) -> _native.CiphertextBatch:
    """Rows of :func:`input_rows` (any contiguous range of them) → input ciphertexts."""
    if rows.dtype == np.float64:
        return _native.encrypt_batch_coefficients(kg, np.ascontiguousarray(rows), seg.input_scale, seg.input_level)
    return _native.encrypt_batch(kg, np.ascontiguousarray(rows), seg.input_scale, seg.input_level)


def encrypt_rows_bytes(kg: _native.KeyGenerator, seg: Segment, rows: np.ndarray, frame=None) -> bytes:
    """:func:`encrypt_rows` then ``to_bytes(frame=frame)``, without the batch: each row is
    encrypted and serialized into the message as it goes, so at most one ciphertext per
    engine thread is alive (not the whole batch, both polynomials of each)."""
    if rows.dtype == np.float64:
        return _native.encrypt_batch_coefficients_bytes(kg, np.ascontiguousarray(rows), seg.input_scale, seg.input_level, frame)
    return _native.encrypt_batch_bytes(kg, np.ascontiguousarray(rows), seg.input_scale, seg.input_level, frame)


def encrypt_segment_input(kg: _native.KeyGenerator, seg: Segment, values: np.ndarray, slots: int, lanes: int = 1) -> _native.CiphertextBatch:
    """``values`` ``(items, in_size)`` → the segment's input ciphertexts (``slots`` per
    ciphertext, ``lanes`` items per ciphertext in the slot layout)."""
    return encrypt_rows(kg, seg, input_rows(seg, values, slots, lanes))


def decrypt_rows(dec: _native.Decryptor, seg: Segment, batch: _native.CiphertextBatch) -> np.ndarray:
    """Output ciphertexts (any contiguous range of the segment's) → one row each: real
    coefficients (coefficient packing) or complex slots."""
    if seg.layout.kind == "batch" and seg.layout.packing == "coeff":
        return _native.decrypt_batch_coefficients(dec, batch)
    return _native.decrypt_batch(dec, batch)


def output_values(seg: Segment, rows: np.ndarray, items: int) -> np.ndarray:
    """The rows of every output ciphertext of the segment (:func:`decrypt_rows`, in order) →
    values ``(items, out_size)`` (slot layout: item ``j`` at lane ``j`` of the placement)."""
    lay = seg.layout
    if lay.kind == "slots":
        out, real = seg.output, rows.real
        return np.stack([real[out.ct, out.slot + j] for j in range(items)])
    if lay.packing == "coeff":
        return rows[:, :items].T
    s = rows.shape[1]
    vals = rows.real[:, :items] if items <= s else np.concatenate([rows.real[:, :s], rows.imag[:, : items - s]], axis=1)
    return vals.T


def decrypt_segment_output(dec: _native.Decryptor, seg: Segment, batch: _native.CiphertextBatch, items: int) -> np.ndarray:
    """The segment's output ciphertexts → values ``(items, out_size)``."""
    return output_values(seg, decrypt_rows(dec, seg, batch), items)


def _pack(values: np.ndarray, slots: int) -> np.ndarray:
    """``(count, n)`` real values → ``(count, min(n, S))`` complex slots (items beyond the
    slots go to the imaginary parts: complex packing)."""
    count, n = values.shape
    width = min(n, slots)
    z = np.zeros((count, width), dtype=np.complex128)
    z.real[:, :width] = values[:, :width]
    if n > slots:
        z.imag[:, : n - slots] = values[:, slots:]
    return z
