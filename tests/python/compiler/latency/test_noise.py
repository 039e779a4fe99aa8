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
    # rounding to precision). Each run draws a fresh secret key s; the errors a rescale or
    # ModDown leaves are multiplied by s(ζ_j) in slot j, which the simulation draws per slot
    # (simulate_slots.secret_in_slots). Over 20 encrypted runs (2026-11-28): largest error
    # 1.2-2.2 precisions, RMS 0.51-0.66; simulated 1.2-2.3 and 0.49-0.65. (Before rounded
    # results had a mean-zero error, the first output carried a key-dependent offset of up to
    # 3 precisions: 1.5-3.7 over 20 runs, and this bound was 4x the stated error plus 6.)
    x = om.random_input((16,), 32, seed=3)
    err = np.abs(heinfer.infer(prog, x).outputs - om.run_onnxruntime(MODEL, x)).max()
    assert err < 2 * prog.meta["predicted_error"][-1] + 4 * seg.precision


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
