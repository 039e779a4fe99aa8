"""``heinfer.tune_precision``: the split of input and weight bits that errs least at the same limbs.

Checked against real encrypted runs: where the requested split starves the weights, the tuned
one keeps every parameter and level and gives a far smaller encrypted error.
"""

from __future__ import annotations

import heinfer
import numpy as np
import pytest
import test_inference as ti
from compiler import onnx_models as om
from heinfer.precision import _limbs, tuned_program


@pytest.mark.parametrize("name", ["depthwise-separable-relu6", "mlp-gemm-square"])
def test_tuned_split_keeps_the_limbs_and_errs_less_when_run(name: str) -> None:
    shape = ti.MODELS[name][1]
    cal, x = om.random_input(shape, 64, seed=11), om.random_input(shape, 256, seed=3)
    asked = {"input_bits": 30, "weight_bits": 8, "precision_bits": 24}
    options, candidates, tuned = tuned_program(ti._model(name), cal, **asked)
    assert options["precision_bits"] == 24 and options["weight_bits"] > 8
    assert options["input_bits"] + options["weight_bits"] == 38  # bits moved, not added
    assert len(candidates) == 9 and [c["input_bits"] for c in candidates] == list(range(34, 25, -1))
    chosen = next(c for c in candidates if c["input_bits"] == options["input_bits"])
    assert chosen["same_limbs"] and chosen["simulated_error"] == min(c["simulated_error"] for c in candidates if c["same_limbs"])
    a = heinfer.compile(ti._model(name), mode="throughput", calibration=cal, **asked)
    b = heinfer.compile(ti._model(name), mode="throughput", calibration=cal, **options)
    assert _limbs(a) == _limbs(b)
    assert tuned.to_bytes() == b.to_bytes()  # the chosen program, compiled once while tuning
    want = om.run_onnxruntime(ti._model(name), x)
    err_a = np.abs(heinfer.infer(a, x).outputs - want).max()
    err_b = np.abs(heinfer.infer(b, x).outputs - want).max()
    assert err_b < 0.2 * err_a


def test_a_balanced_request_is_kept() -> None:
    # at the defaults the released precision (16 bits) dominates: no split errs 5 % less
    shape = ti.MODELS["relu-maxpool-2x2"][1]
    options, _ = heinfer.tune_precision(ti._model("relu-maxpool-2x2"), om.random_input(shape, 64, seed=11))
    assert (options["input_bits"], options["weight_bits"]) == (24, 16)
    _, _, prog = tuned_program(ti._model("relu-maxpool-2x2"), om.random_input(shape, 64, seed=11))
    asked = heinfer.compile(ti._model("relu-maxpool-2x2"), mode="throughput", calibration=om.random_input(shape, 64, seed=11))
    assert prog.to_bytes() == asked.to_bytes()


def test_refusals() -> None:
    shape = ti.MODELS["relu-maxpool-2x2"][1]
    cal = om.random_input(shape, 64, seed=11)
    with pytest.raises(heinfer.CompileError, match="shift"):
        heinfer.tune_precision(ti._model("relu-maxpool-2x2"), cal, shift=-1)
    with pytest.raises(heinfer.CompileError):
        heinfer.tune_precision(ti._model("relu-maxpool-2x2"), cal, security=100)
    for other in ({"mode": "latency"}, {"protocol": "two-party"}):
        with pytest.raises(heinfer.CompileError, match="throughput-mode, client-aided"):
            heinfer.tune_precision(ti._model("relu-maxpool-2x2"), cal, **other)


CRYPTONETS = str(ti.MODELS_DIR / "cryptonets.onnx")


def test_a_budget_buys_the_cheapest_plan_within_it_and_runs_within_it() -> None:
    digits = np.load(ti.MODELS_DIR / "digits_test.npz")["x"]
    cal, x = digits[:64], digits[64:320]
    base = heinfer.compile(CRYPTONETS, mode="throughput", calibration=cal)
    options, candidates, tuned = tuned_program(CRYPTONETS, cal, max_error=2e-4)
    assert len(candidates) == 25 and candidates[0]["input_bits"] == 24 and candidates[0]["weight_bits"] == 16
    chosen = next(c for c in candidates if (c["input_bits"], c["weight_bits"]) == (options["input_bits"], options["weight_bits"]))
    assert chosen["simulated_error"] <= 2e-4
    assert chosen["cost"] < candidates[0]["cost"] and len(tuned.params["log_q"]) < len(base.params["log_q"])
    # every cheaper split was simulated and errs beyond the budget; none at the same cost errs less
    for c in candidates:
        if c["cost"] is not None and c["cost"] < chosen["cost"] * (1 - 1e-9):
            assert c["simulated_error"] is not None and c["simulated_error"] > 2e-4
        if c["cost"] is not None and abs(c["cost"] - chosen["cost"]) <= 1e-9 * chosen["cost"]:
            assert c["simulated_error"] >= chosen["simulated_error"]
    assert tuned.to_bytes() == heinfer.compile(CRYPTONETS, mode="throughput", calibration=cal, **options).to_bytes()
    # encrypted, on digits it was not tuned on: within the budget (twice it: other inputs)
    want = om.run_onnxruntime((ti.MODELS_DIR / "cryptonets.onnx").read_bytes(), x)
    got = heinfer.infer(tuned, x).outputs
    assert np.abs(got - want).max() <= 2 * 2e-4 * np.abs(want).max()
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.99


def test_a_budget_the_requested_bits_miss_is_refused() -> None:
    cal = np.load(ti.MODELS_DIR / "digits_test.npz")["x"][:64]
    with pytest.raises(heinfer.CompileError, match="no split within max_error"):
        heinfer.tune_precision(CRYPTONETS, cal, shift=1, max_error=1e-9)
    for bad in (0.0, -1e-3, float("nan"), float("inf"), "1e-3", True):
        with pytest.raises(heinfer.CompileError, match="max_error must be a positive number"):
            heinfer.tune_precision(CRYPTONETS, cal, max_error=bad)
