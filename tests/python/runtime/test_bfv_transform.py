"""The server's half of GAZELLE's square protocol: a transform with its columns scaled.

``scaled_columns(t, input_elements(t, gather), s, p)`` must compute ``W·diag(s)`` mod ``p`` on
inputs placed by ``gather`` — for every layout the packing search picks (expanded and stacked
inputs with replication, hybrid folds, several input ciphertexts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heinfer.compiler.latency.two_party import compile_two_party
from heinfer.compiler.onnx_import import load_onnx
from heinfer.errors import ProtocolError
from heinfer.runtime.bfv_transform import input_elements, scaled_columns

MODELS = Path(__file__).resolve().parents[3] / "models"
CAL = np.load(MODELS / "digits_test.npz")["x"][100:164]
P = 1_032_193


def _placed(gather: np.ndarray, values: np.ndarray, slots: int) -> np.ndarray:
    rows = np.zeros((gather.shape[0], slots))
    rows[:, : gather.shape[1]] = np.where(gather >= 0, values[np.maximum(gather, 0)], 0)
    return rows


def _outputs(prog, k: int, slot_values: np.ndarray) -> np.ndarray:
    out = prog.segments[k].output
    return slot_values[out.ct, out.slot]


@pytest.mark.parametrize("name,bandwidth", [("mnist_a", 125e6), ("mnist_a", 1.25e6), ("cryptonets", 125e6), ("mnist_d", 125e6)])
def test_scaled_columns_compute_w_diag_s(name: str, bandwidth: float) -> None:
    prog = compile_two_party(load_onnx((MODELS / f"{name}.onnx").read_bytes()), calibration=CAL, bandwidth=bandwidth)
    rng = np.random.default_rng(3)
    for k, (seg, t) in enumerate(zip(prog.segments, prog.layers)):
        x = np.zeros(seg.in_size)  # a few inputs, the first and last among them
        x[np.r_[0, seg.in_size - 1, rng.choice(seg.in_size, 14)]] = rng.integers(1, 64, 16)
        s = rng.integers(0, P, seg.in_size)
        scaled = scaled_columns(t, input_elements(t, seg.gather), s, P)
        assert scaled.bias is None
        got = _outputs(prog, k, scaled.simulate(_placed(seg.gather, x, t.slots))) % P
        # W from the transform itself: its output on unit vectors, less the bias
        zero = _outputs(prog, k, t.simulate(_placed(seg.gather, np.zeros(seg.in_size), t.slots)))
        want = np.zeros(seg.out_size)
        for j in np.flatnonzero(x):
            e = np.zeros(seg.in_size)
            e[j] = 1.0
            col = _outputs(prog, k, t.simulate(_placed(seg.gather, e, t.slots))) - zero
            want += col * ((s[j] * int(x[j])) % P)
        np.testing.assert_array_equal(got, np.mod(want, P), err_msg=f"{name} layer {k} replicate={t.replicate} fold={t.fold}")


def test_overlapping_replication_is_refused() -> None:
    prog = compile_two_party(load_onnx((MODELS / "mnist_a.onnx").read_bytes()), calibration=CAL)
    t, seg = prog.layers[0], prog.segments[0]
    full = np.arange(t.slots * seg.gather.shape[0]).reshape(seg.gather.shape[0], t.slots)  # every slot used
    from dataclasses import replace

    with pytest.raises(ProtocolError, match="overlaps"):
        input_elements(replace(t, replicate=(1,)), full)


@pytest.mark.parametrize("name", ["cryptonets_relu", "cryptonets"])
def test_a_paired_transform_sums_to_the_transform(name: str) -> None:
    """Inputs two per ciphertext (``2j`` in row 0, ``2j + 1`` in row 1): the paired transform's
    row-0 diagonals on the even inputs plus its row-1 diagonals on the odd ones give the
    transform's output, mod ``p``, for every layer with two inputs or more."""
    from dataclasses import replace

    from heinfer.runtime.bfv_transform import paired_transform

    prog = compile_two_party(load_onnx((MODELS / f"{name}.onnx").read_bytes()), calibration=CAL)
    rng = np.random.default_rng(5)
    paired_layers = 0
    for seg, t in zip(prog.segments, prog.layers):
        if not seg.row_pairs:
            continue
        paired_layers += 1
        x = rng.integers(0, P, (t.n_in, t.slots))
        half, row1 = paired_transform(t)
        assert half.n_in == (t.n_in + 1) // 2 and row1.shape == half.vectors.shape
        even = half.simulate(x[0::2], P)
        odd_in = np.zeros((half.n_in, t.slots), dtype=np.int64)
        odd_in[: t.n_in // 2] = x[1::2]
        odd = replace(half, vectors=row1, bias=None).simulate(odd_in, P)
        np.testing.assert_array_equal((even + odd) % P, t.simulate(x, P))
    assert paired_layers
