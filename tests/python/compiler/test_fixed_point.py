"""Fixed-point plans for the two-party protocol: exact integer simulation against float64."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from heinfer.compiler.fixed_point import plan_fixed_point, simulate
from heinfer.compiler.fuse import fold_linear
from heinfer.compiler.onnx_import import load_onnx
from heinfer.compiler.ranges import tensor_bounds
from heinfer.errors import CompileError, UnsupportedOperatorError

MODELS = Path(__file__).resolve().parents[3] / "models"
#: GAZELLE Table 1: plaintext primes of 18, 22 and 26 bits (p ≡ 1 mod 4096).
P18, P22, P26 = 307201, 5324801, 115351553


def _graph(name: str):
    return fold_linear(load_onnx((MODELS / f"{name}.onnx").read_bytes()))


@pytest.fixture(scope="module")
def digits():
    data = np.load(MODELS / "digits_test.npz")
    return data["x"].astype(np.float64), data["y"]


def _plan_against_float(name: str, p: int, x: np.ndarray):
    """``(plan, argmax agreement, relative logit error)`` of the model's plan mod ``p``
    (bounds and calibration from the first 64 digits, head-room 1.25) against float64."""
    graph = _graph(name)
    bounds = tensor_bounds(graph, x[:64], 1.0, 1.25)
    plan = plan_fixed_point(graph, bounds, p, calibration=x[:64])
    got = simulate(plan, x)
    want = graph.run(x).reshape(len(x), -1)
    agreement = float((got.argmax(1) == want.argmax(1)).mean())
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"{name} p={p.bit_length()} bits: input frac {plan.input_frac}, "
          f"{[(l.in_frac, l.weight_frac, l.shift) for l in plan.layers]}, "
          f"agreement {agreement:.4f}, rel. logit error {rel:.2e}")
    return plan, agreement, rel


@pytest.mark.parametrize("name", ["cryptonets_relu", "mnist_d"])
@pytest.mark.parametrize("p", [P18, P22])
def test_plan_agrees_with_float_inference(digits, name: str, p: int) -> None:
    plan, agreement, rel = _plan_against_float(name, p, digits[0])
    assert agreement >= (0.99 if p == P22 else 0.97)
    assert rel < (0.01 if p == P22 else 0.05)
    # every truncation is a right shift; precision never grows back after a truncation
    for a, b in zip(plan.layers, plan.layers[1:]):
        assert a.shift >= 0 and b.in_frac == a.out_frac - a.shift
    assert plan.layers[-1].shift == 0 and plan.output_frac == plan.layers[-1].out_frac


def test_more_plaintext_bits_give_a_smaller_error(digits) -> None:
    x, _ = digits
    graph = _graph("mnist_d")
    bounds = tensor_bounds(graph, x[:64], 1.0, 1.25)
    want = graph.run(x[:100]).reshape(100, -1)
    errs = [
        np.abs(simulate(plan_fixed_point(graph, bounds, p, x[:64]), x[:100]) - want).max()
        for p in (P18, P22, P26)
    ]
    assert errs[1] < errs[0] / 2 and errs[2] < errs[1] / 2, errs


def test_a_bound_that_is_exceeded_is_caught_not_wrapped(digits) -> None:
    x, _ = digits
    graph = _graph("cryptonets_relu")
    bounds = tensor_bounds(graph, x[:64], 1.0, 1.25)
    small = [b / 64 for b in bounds]  # a plan for values 64× smaller than the real ones
    plan = plan_fixed_point(graph, small, P22, calibration=None)
    with pytest.raises(CompileError, match="wraps around modulo p"):
        simulate(plan, x[:8])


@pytest.mark.parametrize("name", ["mnist_a", "cryptonets"])
@pytest.mark.parametrize("p", [1_032_193, P22, P26])
def test_square_plans_truncate_then_square(digits, name: str, p: int) -> None:
    """GAZELLE's square step: the circuit truncates to g bits, the AHE square doubles them, so
    the next layer's input has an even number 2g of fractional bits."""
    plan, agreement, rel = _plan_against_float(name, p, digits[0])
    for a, b in zip(plan.layers, plan.layers[1:]):
        assert [f.kind for f in a.step] == ["square"]
        assert a.shift >= 0 and b.in_frac == 2 * (a.out_frac - a.shift)
    assert agreement >= {20: 0.97, 23: 0.99, 27: 0.99}[p.bit_length()]
    assert rel < {20: 0.06, 23: 0.03, 27: 0.015}[p.bit_length()]


def test_a_modulus_too_small_for_the_values_is_refused() -> None:
    graph = _graph("cryptonets_relu")
    with pytest.raises(CompileError, match="larger plaintext modulus"):
        plan_fixed_point(graph, [1e9] * (len(graph.ops) + 1), 97)
    with pytest.raises(CompileError, match="odd prime"):
        plan_fixed_point(graph, [1.0] * (len(graph.ops) + 1), 1 << 20)
