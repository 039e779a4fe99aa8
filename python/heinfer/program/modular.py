"""Exact arithmetic on residues mod ``p`` in ``int64`` numpy arrays, for every plaintext modulus
the protocol takes (``p < 2^40``).

Layer: ``heinfer.program`` (pure numpy). A product of two residues below ``2^31`` fits 63 bits;
above, :func:`mul_mod` splits one factor into 20-bit halves so each partial product stays
below ``2^61``, and :func:`matmul_mod` splits the inputs into limbs narrow enough that a sum of
``2^16`` products fits.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["MAX_MODULUS_BITS", "matmul_mod", "mul_mod"]

#: The widest plaintext modulus these functions are exact for (BFV's ``12..40`` bits).
MAX_MODULUS_BITS = 40
_HALF = 20
_CHUNK_BITS = 16  # inputs summed at a time: 2^16


def mul_mod(a: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``a·b mod p`` elementwise for residues ``a, b`` in ``[0, p)``, ``p < 2^40``: directly below
    ``2^31``, else ``((a·b_hi mod p)·2^20 + a·b_lo) mod p`` with ``b = b_hi·2^20 + b_lo``
    (every term below ``2^61``)."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if p < 1 << 31:
        return a * b % p
    if p >= 1 << MAX_MODULUS_BITS:
        raise ValueError(f"mul_mod: a {p.bit_length()}-bit modulus (at most {MAX_MODULUS_BITS} bits)")
    hi, lo = b >> _HALF, b & ((1 << _HALF) - 1)
    return (((a * hi) % p << _HALF) + a * lo) % p


def matmul_mod(w: sp.csr_matrix, x: np.ndarray, p: int) -> np.ndarray:
    """``(x @ w.T) mod p`` exactly for int64 ``x`` in ``[0, p)``, integer ``w`` and ``p < 2^40``:
    ``w`` reduced mod ``p``, the inputs ``2^16`` at a time, each chunk's ``x`` in limbs of ``L``
    bits with ``p·2^L·2^16 < 2^63`` (two 16-bit limbs below ``2^31``, four 11-bit ones at 36
    bits), the limbs' products combined by Horner's rule mod ``p``."""
    if p >= 1 << MAX_MODULUS_BITS:
        raise ValueError(f"matmul_mod: a {p.bit_length()}-bit modulus (at most {MAX_MODULUS_BITS} bits)")
    w = sp.csr_matrix(w, dtype=np.int64, copy=True)
    w.data %= p
    width = 63 - p.bit_length() - _CHUNK_BITS
    limbs = -(-p.bit_length() // width)
    mask = (1 << width) - 1
    out = np.zeros((x.shape[0], w.shape[0]), dtype=np.int64)
    for c in range(0, w.shape[1], 1 << _CHUNK_BITS):
        wc, xc = w[:, c : c + (1 << _CHUNK_BITS)], x[:, c : c + (1 << _CHUNK_BITS)]
        acc = np.zeros_like(out)
        for k in reversed(range(limbs)):  # most significant limb first
            part = np.asarray(wc @ ((xc >> (k * width)) & mask).T).T % p
            acc = ((acc << width) % p + part) % p
        out = (out + acc) % p
    return out
