"""Encrypting straight to bytes (``heinfer.protocol.layouts.encrypt_rows_bytes``: the native
``encrypt_batch_bytes`` / ``encrypt_batch_coefficients_bytes``): the message
``encrypt_rows(...).to_bytes(frame=...)`` gives — same framing and length, ciphertexts that
decrypt to the rows — written as each row is encrypted."""

from __future__ import annotations

import numpy as np
import pytest

import heinfer
from heinfer import _native

P = _native.Params.preset("INSECURE_LOGN10")


def _frame(n: int) -> bytes:
    return b"HEAD" + n.to_bytes(8, "little")


@pytest.mark.parametrize("coefficients", [False, True])
def test_the_bytes_are_the_two_step_message_of_the_same_rows(coefficients: bool) -> None:
    kg = _native.KeyGenerator(P)
    dec = _native.Decryptor(P, kg.secret_key())
    rng = np.random.default_rng(3)
    width = P.n if coefficients else P.slots
    rows = rng.uniform(-1, 1, (7, width))
    scale, level = 2.0**30, 1
    if coefficients:
        one = lambda: _native.encrypt_batch_coefficients_bytes(kg, rows, scale, level, _frame)  # noqa: E731
        two = _native.encrypt_batch_coefficients(kg, rows, scale, level).to_bytes(frame=_frame)
    else:
        rows = rows + 1j * rng.uniform(-1, 1, rows.shape)
        one = lambda: _native.encrypt_batch_bytes(kg, rows, scale, level, _frame)  # noqa: E731
        two = _native.encrypt_batch(kg, rows, scale, level).to_bytes(frame=_frame)
    got = one()
    assert len(got) == len(two) and got[:12] == two[:12]  # the frame saw the same body length
    batch = _native.CiphertextBatch.from_bytes(P, got[12:], 1 << 30, 100)
    assert (len(batch), batch.level, batch.size, batch.scale) == (7, level, 2, scale)
    back = _native.decrypt_batch_coefficients(dec, batch) if coefficients else _native.decrypt_batch(dec, batch)
    assert np.abs(back - rows).max() < 1e-4
    assert one() != got  # fresh randomness for every encryption


def test_bad_rows_and_frames_are_refused() -> None:
    kg = _native.KeyGenerator(P)
    rows = np.zeros((2, 4), np.complex128)
    with pytest.raises(heinfer.OperandError, match="need ≥ 1 row"):
        _native.encrypt_batch_bytes(kg, np.zeros((0, 4), np.complex128), 2.0**30, 1)
    with pytest.raises(heinfer.OperandError, match="need ≥ 1 row"):
        _native.encrypt_batch_coefficients_bytes(kg, np.zeros((2, P.n + 1)), 2.0**30, 1)
    with pytest.raises(TypeError, match="frame must return bytes"):
        _native.encrypt_batch_bytes(kg, rows, 2.0**30, 1, lambda n: "not bytes")
    with pytest.raises(heinfer.HeinferError):
        _native.encrypt_batch_bytes(kg, rows, 2.0**30, P.max_level + 1)


@pytest.mark.parametrize("layout", ["fortran", "strided"])
def test_rows_of_any_memory_layout_are_read_row_by_row(layout: str) -> None:
    """The engine copies the rows in row-major order whatever the array's layout: a
    Fortran-ordered (transposed) array, which numpy's contiguous-slice view would hand over
    column by column, and a strided one are read as their C-ordered copies are."""
    kg = _native.KeyGenerator(P)
    dec = _native.Decryptor(P, kg.secret_key())
    rng = np.random.default_rng(5)
    rows = rng.uniform(-1, 1, (3, P.n))
    odd = np.asfortranarray(rows) if layout == "fortran" else np.repeat(rows, 2, axis=1)[:, ::2]
    assert np.array_equal(odd, rows) and not odd.flags.c_contiguous
    for encrypt in (_native.encrypt_batch_coefficients_bytes, lambda *a: _native.encrypt_batch_coefficients(*a).to_bytes()):
        batch = _native.CiphertextBatch.from_bytes(P, encrypt(kg, odd, 2.0**30, 1), 1 << 30, 100)
        assert np.abs(_native.decrypt_batch_coefficients(dec, batch) - rows).max() < 1e-4
