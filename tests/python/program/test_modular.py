"""Exact residue arithmetic for every plaintext modulus (``heinfer.program.modular``), against
Python's integers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from heinfer import bfv
from heinfer.program.modular import matmul_mod, mul_mod

MODULI = [1_032_193, bfv.plain_primes(15, 31)[0], bfv.plain_primes(15, 36)[0], bfv.plain_primes(15, 40)[0]]


@pytest.mark.parametrize("p", MODULI)
def test_products_are_exact_at_every_size(p: int) -> None:
    rng = np.random.default_rng(p % 1000)
    a, b = rng.integers(0, p, 2000), rng.integers(0, p, 2000)
    a[:2], b[:2] = p - 1, p - 1  # the largest residues
    want = np.array([int(x) * int(y) % p for x, y in zip(a, b)])
    np.testing.assert_array_equal(mul_mod(a, b, p), want)


@pytest.mark.parametrize("p", MODULI)
def test_matrix_products_are_exact_beyond_one_chunk_of_inputs(p: int) -> None:
    """Signed integer weights up to ``p`` in size, ``2^16 + 300`` inputs (two chunks), inputs
    at the top of the range: every output equals Python's exact sum mod ``p``."""
    rng = np.random.default_rng(7)
    n_in = (1 << 16) + 300
    w = sp.random(3, n_in, density=0.01, random_state=3, format="csr")
    w.data = rng.integers(-(p - 1), p, w.nnz).astype(np.float64)
    w = sp.csr_matrix(w, dtype=np.int64)
    x = rng.integers(p - 1000, p, (2, n_in))
    dense = w.toarray()
    want = [[sum(int(dense[o, i]) * int(x[r, i]) for i in np.flatnonzero(dense[o])) % p for o in range(3)] for r in range(2)]
    np.testing.assert_array_equal(matmul_mod(w, x, p), np.array(want))


def test_moduli_beyond_40_bits_are_refused() -> None:
    with pytest.raises(ValueError, match="41-bit"):
        mul_mod(np.array([3]), np.array([5]), (1 << 40) + 15)
    with pytest.raises(ValueError, match="41-bit"):
        matmul_mod(sp.csr_matrix(np.eye(2, dtype=np.int64)), np.zeros((1, 2), dtype=np.int64), (1 << 40) + 15)
