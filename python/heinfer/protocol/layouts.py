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

__all__ = ["encrypt_segment_input", "decrypt_segment_output"]


def encrypt_segment_input(kg: _native.KeyGenerator, seg: Segment, values: np.ndarray, slots: int) -> _native.CiphertextBatch:
    """``values`` ``(items, in_size)`` → the segment's input ciphertexts (``slots`` per ciphertext)."""
    lay = seg.layout
    if lay.kind == "slots":
        g = lay.gather
        slots = np.where(g >= 0, values[0][np.maximum(g, 0)], 0.0)
        return _native.encrypt_batch(kg, slots.astype(np.complex128), seg.input_scale, seg.input_level)
    rows = np.ascontiguousarray(values.T, dtype=np.float64)  # (in_size, items)
    if lay.packing == "coeff":
        return _native.encrypt_batch_coefficients(kg, rows, seg.input_scale, seg.input_level)
    return _native.encrypt_batch(kg, _pack(rows, slots), seg.input_scale, seg.input_level)


def decrypt_segment_output(dec: _native.Decryptor, seg: Segment, batch: _native.CiphertextBatch, items: int) -> np.ndarray:
    """The segment's output ciphertexts → values ``(items, out_size)``."""
    lay = seg.layout
    if lay.kind == "slots":
        z = _native.decrypt_batch(dec, batch).real
        return seg.output.gather(z)[None, :]
    if lay.packing == "coeff":
        return _native.decrypt_batch_coefficients(dec, batch)[:, :items].T
    z = _native.decrypt_batch(dec, batch)
    s = z.shape[1]
    vals = z.real[:, :items] if items <= s else np.concatenate([z.real[:, :s], z.imag[:, : items - s]], axis=1)
    return vals.T


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
