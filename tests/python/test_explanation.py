"""``heinfer.explain`` on two-party programs: every linear layer and garbled-circuit step, the
rotation keys and ``mode="auto"``'s predictions, for the server's program and the public one."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import heinfer

MODELS = Path(__file__).resolve().parents[2] / "models"
CAL = np.load(MODELS / "digits_test.npz")["x"][100:132]


def _explain(prog) -> str:
    out = io.StringIO()
    text = heinfer.explain(prog, file=out)
    assert out.getvalue() == text
    return text


@pytest.mark.parametrize("mode", ["latency", "throughput"])
def test_a_two_party_program_is_explained_layer_by_layer(mode: str) -> None:
    prog = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode=mode, protocol="two-party", calibration=CAL)
    text = _explain(prog)
    lines = text.splitlines()
    assert lines[0].startswith(f"two-party protocol (GAZELLE), {mode} mode, {prog.batch_capacity} item(s) per query: BFV N = 2^13")
    layers = [ln for ln in lines if ln.startswith("layer ")]
    steps = [ln for ln in lines if ln.startswith("step ")]
    assert len(layers) == len(prog.segments) and len(steps) == len(prog.steps)
    for seg, ln in zip(prog.segments, layers):
        assert f"{seg.in_size} → {seg.out_size} values" in ln and f"flooded with 2^{seg.flood_bits}" in ln
    for st, ln in zip(prog.steps, steps):
        assert "ReLU in a garbled circuit" in ln and f"{st.instances} instance(s) per item" in ln
    assert lines[-3].startswith(f"rotation keys: {prog.galois_key_count} ")
    # the compiler's choice of parameters and its exact simulation on the calibration inputs:
    # the server's program only
    assert lines[-2].startswith("BFV parameters chosen: a 20-bit plaintext modulus (worst error / agreement on 16 calibration inputs: 20 bits ")
    assert lines[-1].startswith("fixed point, simulated exactly on 16 calibration input(s): outputs off by up to ")
    assert "simulated_error" not in prog.public().meta and "bfv_choice" not in prog.public().meta
    lines = lines[:-2]
    # the public program shows the same plan (every line of it is public), without layer names
    public = _explain(prog.public()).splitlines()
    assert [ln.split(":")[0] for ln in public] == [ln.split(":")[0].split(" '")[0] for ln in lines]
    assert [ln.split(":", 1)[1] for ln in public[1:]] == [ln.split(":", 1)[1] for ln in lines[1:]]


def test_auto_says_what_it_predicted() -> None:
    prog = heinfer.compile(MODELS / "cryptonets.onnx", mode="auto", protocol="two-party", calibration=CAL,
                           batch_size=3, measure_costs=False)
    text = _explain(prog)
    assert "mode chosen by auto for 3 item(s): latency " in text and " vs throughput " in text and "garbled circuits" in text
    assert "truncation (then GAZELLE's AHE square) in a garbled circuit" in text
