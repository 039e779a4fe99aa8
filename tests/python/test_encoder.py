"""Encoder: round trips at every level, complex packing, input validation."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import Kit, assert_precision
from heinfer import EncodingError, LevelError, ParameterError, ScaleError, ckks
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def test_real_round_trip_at_every_level(kit: Kit) -> None:
    x = kit.vector(1)
    for level in range(kit.params.max_level + 1):
        pt = kit.enc.encode(x, level=level)
        assert (pt.level, pt.scale, pt.params_id) == (
            level,
            kit.params.default_scale,
            kit.params.id,
        )
        out = kit.enc.decode(pt)
        assert out.dtype == np.float64 and out.shape == (kit.params.slots,)
        assert_precision(f"{kit.name} encode/decode level {level}", out, x, 25.0)


def test_complex_packing(kit: Kit) -> None:
    z = kit.vector(2, complex_=True)
    out = kit.enc.decode(kit.enc.encode(z), real=False)
    assert out.dtype == np.complex128
    assert_precision(f"{kit.name} complex encode/decode", out, z, 25.0)
    # a real vector decodes with zero imaginary parts
    im = kit.enc.decode(kit.enc.encode(z.real), real=False).imag
    assert np.abs(im).max() < 1e-6


def test_short_vectors_are_zero_padded_and_dtypes_accepted(kit10: Kit) -> None:
    enc = kit10.enc
    out = enc.decode(enc.encode([1, 2, 3]))
    assert np.allclose(out[:3], [1, 2, 3], atol=1e-6) and np.abs(out[3:]).max() < 1e-6
    for arr in [
        np.arange(5, dtype=np.int32),
        np.arange(5, dtype=np.float32),
        np.array([True, False]),
    ]:
        assert np.allclose(enc.decode(enc.encode(arr))[: len(arr)], arr, atol=1e-6)
    strided = np.arange(20.0)[::2]
    assert np.allclose(enc.decode(enc.encode(strided))[:10], strided, atol=1e-5)
    assert np.abs(enc.decode(enc.encode([]))).max() < 1e-6


def test_explicit_scale(kit12: Kit) -> None:
    x = kit12.vector(3)
    pt = kit12.enc.encode(x, scale=2.0**30)
    assert pt.scale == 2.0**30
    assert_precision("logN=12 scale 2^30", kit12.enc.decode(pt), x, 15.0)


@pytest.mark.parametrize(
    "values, exc",
    [
        (np.zeros(513), EncodingError),  # more than N/2 = 512 values
        ([1.0, float("nan")], EncodingError),
        ([1.0, float("inf")], EncodingError),
        ([[1.0, 2.0]], EncodingError),  # 2-D
        (["a", "b"], EncodingError),
        ([1e40], EncodingError),  # Δ·x beyond Q/2 (155 bits)
        # finite values whose inverse FFT overflows to ±inf or NaN (encoded silently, as
        # garbage, before the overflow was checked)
        ([1.7e308] * 512, EncodingError),
        ([1.7e308, -1.7e308] * 256, EncodingError),
        (np.array([1, 2], dtype=object), EncodingError),
    ],
)
def test_bad_values(kit10: Kit, values, exc) -> None:
    with pytest.raises(exc):
        kit10.enc.encode(values)


def test_bad_level_and_scale(kit10: Kit) -> None:
    enc = kit10.enc
    for level in (-1, kit10.params.max_level + 1, 2**70):
        with pytest.raises(LevelError):
            enc.encode([1.0], level=level)
    for scale in (0.0, -1.0, 0.5, float("nan"), float("inf"), 2.0**1001):
        with pytest.raises(ScaleError):
            enc.encode([1.0], scale=scale)


def test_extended_encoding(kit10: Kit) -> None:
    x = kit10.vector(4)
    pt = kit10.enc.encode_extended(x)
    assert pt.is_extended and not kit10.enc.encode(x).is_extended
    assert_precision("logN=10 extended", kit10.enc.decode(pt), x, 20.0)


def test_decode_foreign_plaintext(kit10: Kit, kit12: Kit) -> None:
    with pytest.raises(ParameterError):
        kit10.enc.decode(kit12.enc.encode([1.0]))
    with pytest.raises(TypeError):
        kit10.enc.decode("plaintext")  # type: ignore[arg-type]


def test_objects_are_not_constructible() -> None:
    with pytest.raises(TypeError):
        ckks.Plaintext()
    with pytest.raises(TypeError):
        ckks.Ciphertext()


@settings(max_examples=40, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        st.integers(0, 512),
        elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    )
)
def test_round_trip_property(x: np.ndarray) -> None:
    params = ckks.INSECURE_LOGN10()
    enc = ckks.Encoder(params)
    out = enc.decode(enc.encode(x))
    assert np.abs(out[: len(x)] - x).max(initial=0.0) < 1e-4


def test_encoding_many_rows_in_parallel_equals_one_at_a_time(kit: Kit) -> None:
    """``encode_real_many`` (the executor's set-up path) gives, row for row, the plaintexts
    of ``encode_real``, in the extended basis too; a bad row fails the whole call."""
    raw = kit.enc._raw
    rows = np.stack([kit.vector(s) for s in range(5)])
    scale, level = kit.params.default_scale, kit.params.max_level
    for ext in (False, True):
        many = raw.encode_real_many(rows, scale, level, ext)
        assert len(many) == 5
        for r, pt in zip(rows, many):
            one = raw.encode_real(np.ascontiguousarray(r), scale, level, ext)
            np.testing.assert_array_equal(raw.decode_real(pt), raw.decode_real(one))
    rows[3, 7] = np.nan
    with pytest.raises(EncodingError, match="NaN"):
        raw.encode_real_many(rows, scale, level, False)
