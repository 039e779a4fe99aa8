"""``heinfer.compiler.latency.noise``: a latency plan's simulated error and its released
precision kept above the noise."""

from __future__ import annotations

import heinfer
import numpy as np
import pytest
from heinfer.compiler.latency import noise

from compiler import onnx_models as om

MODEL = om.mlp((16, 12, 8, 4), act="square", seed=1)


def _compile(**options) -> heinfer.Program:
    return heinfer.compile(MODEL, mode="latency", calibration=om.random_input((16,), 64, seed=11), **options)


def test_the_plan_states_its_simulated_error_and_keeps_the_asked_precision_above_it() -> None:
    prog = _compile()
    assert prog.meta["predicted_error_source"] == "simulated"
    seg = prog.segments[-1]
    assert "precision_requested" not in prog.meta  # 16 bits of the bound: well above the noise
    assert seg.precision >= noise.NOISE_MARGIN * prog.meta["noise_rms"]
    # the encrypted run's error: the noise and the client's release (flooding of precision/2,
    # rounding to precision). Each run draws a fresh secret key s, and the errors a rescale
    # or ModDown leaves are multiplied by s: in slot j by s(ζ_j), whose |s(ζ_j)|² is
    # exponentially distributed from one key to the next. The throughput simulation draws it
    # per slot (simulate._secret_in_slots); the slot-layout simulation behind
    # predicted_error does not — the likely cause (not yet confirmed by a per-slot test) of
    # the spread measured from run to run (12 runs, 2026-11-28: RMS error 0.55-1.18
    # precisions, largest 1.5-3.6; over 30 runs the
    # largest reached 4.7 and 2x the stated error plus 4 precisions failed ~1 run in 40). The
    # bound leaves room for such a key, not for a wrong answer.
    x = om.random_input((16,), 32, seed=3)
    err = np.abs(heinfer.infer(prog, x).outputs - om.run_onnxruntime(MODEL, x)).max()
    assert err < 4 * prog.meta["predicted_error"][-1] + 6 * seg.precision


def test_a_precision_finer_than_the_noise_is_raised_to_it() -> None:
    # 22-bit scales and 30 bits of the bound: the asked precision is ~1e-8, the noise ~1e-4
    prog = _compile(scale_bits=(22,), precision_bits=30)
    seg = prog.segments[-1]
    asked = prog.meta["precision_requested"]
    assert seg.precision == pytest.approx(noise.NOISE_MARGIN * prog.meta["noise_rms"])
    assert seg.precision > 1000 * asked
    # what the client releases is rounded to it (every output a multiple of the precision)
    out = heinfer.infer(prog, om.random_input((16,), 4, seed=3)).outputs
    np.testing.assert_allclose(out / seg.precision, np.round(out / seg.precision), atol=1e-6)


def test_a_program_over_the_budget_is_not_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(noise, "MAX_TERMS", 0)
    prog = _compile(scale_bits=(22,), precision_bits=30)
    assert prog.meta["predicted_error_source"].startswith("not simulated")
    assert "predicted_error" not in prog.meta and "precision_requested" not in prog.meta
