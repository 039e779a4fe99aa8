"""The two-party cost model (``heinfer.compiler.two_party_cost``) and ``mode="auto"`` with the
two-party protocol: what a prediction counts, how it grows with the items and the link, and
which mode ``compile`` keeps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import heinfer
import heinfer.compilation as compilation
from heinfer.compiler.two_party_cost import (
    TWO_PARTY_KINDS,
    analytic_two_party_costs,
    ciphertext_bytes,
    cost_params,
    predict_two_party_seconds,
    result_bytes,
)
from heinfer.errors import CompileError

MODELS = Path(__file__).resolve().parents[3] / "models"
CAL = np.load(MODELS / "digits_test.npz")["x"][100:132]


@pytest.fixture(scope="module")
def programs():
    model = MODELS / "cryptonets_relu.onnx"
    return {
        mode: heinfer.compile(model, mode=mode, protocol="two-party", calibration=CAL, measure_costs=False)
        for mode in ("latency", "throughput")
    }


def _wire_bytes(prog) -> float:
    """Every ciphertext of one query on the wire, counted from the program's segments: the
    client's fresh ones (seed-compressed: half) and the server's results."""
    fresh, result = ciphertext_bytes(prog.bfv) / 2, result_bytes(prog.bfv)
    total = 0.0
    for k, seg in enumerate(prog.segments):
        total += seg.n_input_cts * prog.input_lists(k) * fresh
        total += (seg.out_size if prog.batch_axis else seg.output.n_cts) * result
    return total


def test_a_query_costs_the_same_for_any_item_count_up_to_the_capacity(programs) -> None:
    costs = analytic_two_party_costs(programs["latency"].bfv)
    thr, lat = programs["throughput"], programs["latency"]
    cap = thr.batch_capacity
    one = predict_two_party_seconds(thr, costs, 1)
    assert predict_two_party_seconds(thr, costs, cap) == one
    assert predict_two_party_seconds(thr, costs, cap + 1) == pytest.approx(2 * one)
    assert predict_two_party_seconds(lat, costs, 7) == pytest.approx(7 * predict_two_party_seconds(lat, costs, 1))


@pytest.mark.parametrize("mode", ["latency", "throughput"])
def test_the_link_prices_every_ciphertext_of_a_query(programs, mode: str) -> None:
    prog = programs[mode]
    costs = analytic_two_party_costs(prog.bfv)
    fast, slow = 1e9, 1e6
    delta = predict_two_party_seconds(prog, costs, 1, slow) - predict_two_party_seconds(prog, costs, 1, fast)
    assert delta == pytest.approx(_wire_bytes(prog) * (1 / slow - 1 / fast), rel=1e-9)


def test_the_prices_come_from_the_programs_own_ring() -> None:
    bfv = {"log_n": 12, "log_q": [36, 36], "log_p": [37], "plain_modulus": 65537, "security": 128}
    params = cost_params(bfv)
    assert (params["log_n"], params["log_q"], params["log_p"], params["security"]) == (12, [36, 36], [37], 128)
    assert params["log_scale"] < min(bfv["log_q"])
    small, large = analytic_two_party_costs(bfv), analytic_two_party_costs({**bfv, "log_n": 13})
    assert small["encrypt"][1] < large["encrypt"][1]


def test_the_protocol_kinds_are_measured_per_ciphertext_on_this_machine(programs) -> None:
    from heinfer.runtime.two_party_costs import measure_two_party_costs

    bfv = programs["latency"].bfv
    measured = measure_two_party_costs(bfv, max(seg.flood_bits for seg in programs["latency"].segments), reps=1)
    assert set(measured) == set(TWO_PARTY_KINDS) == set(analytic_two_party_costs(bfv)) & set(TWO_PARTY_KINDS)
    # each is a few hundred microseconds per ciphertext at N = 2^13 (flooding and rounding
    # make a result the dearest): far above timer resolution, far below a second
    assert all(1e-6 < t < 0.1 for t in measured.values()), measured


def test_a_public_program_and_a_bad_link_are_refused(programs) -> None:
    prog = programs["latency"]
    costs = analytic_two_party_costs(prog.bfv)
    with pytest.raises(ValueError, match="layers"):
        predict_two_party_seconds(prog.public(), costs)
    with pytest.raises(ValueError, match="bandwidth"):
        predict_two_party_seconds(prog, costs, 1, 0.0)


def test_auto_keeps_the_mode_predicted_faster_and_says_why() -> None:
    model = MODELS / "cryptonets_relu.onnx"
    # measured on this machine: one item costs a few ciphertexts in latency mode against one per
    # input element in throughput mode (a 200-fold margin, beyond any noise of the machine)
    prog = heinfer.compile(model, mode="auto", protocol="two-party", calibration=CAL, batch_size=1)
    a = prog.meta["auto"]
    assert a["batch_size"] == 1 and "garbled circuits" in a["priced"] and a["bandwidth"] == 125e6
    assert prog.mode == "latency" and 50 * a["latency_s"] < a["throughput_s"]
    x = np.load(MODELS / "digits_test.npz")["x"][:2]
    want = heinfer.infer(heinfer.compile(model, mode="latency", protocol="two-party", calibration=CAL), x).outputs
    np.testing.assert_array_equal(heinfer.infer(prog, x).outputs, want)  # the same fixed-point plan
    # the analytic table (deterministic): network A's full queries are 1.3× cheaper per item
    # than latency mode's (measured here: the margins are within this machine's noise)
    picks = {}
    for items in (1, 4096):
        prog = heinfer.compile(MODELS / "mnist_a.onnx", mode="auto", protocol="two-party", calibration=CAL,
                               batch_size=items, measure_costs=False)
        a = prog.meta["auto"]
        assert prog.mode == min(("latency", "throughput"), key=lambda m: a[f"{m}_s"])
        picks[items] = prog.mode
    assert picks == {1: "latency", 4096: "throughput"}


def test_auto_refuses_a_bad_link_as_a_compile_error() -> None:
    for bad in (0.0, -1.0, "fast"):
        with pytest.raises(CompileError, match="bandwidth must be positive"):
            heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="auto", protocol="two-party", calibration=CAL,
                            bandwidth=bad, measure_costs=False)


def test_auto_falls_back_to_the_mode_that_compiles(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise CompileError("two-party protocol: refused for the test")

    monkeypatch.setattr(compilation, "compile_two_party_throughput", refuse)
    prog = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="auto", protocol="two-party", calibration=CAL,
                           batch_size=4096, measure_costs=False)
    assert prog.mode == "latency"
    assert prog.meta["auto"]["refused"] == {"throughput": "two-party protocol: refused for the test"}
    monkeypatch.setattr(compilation, "compile_two_party", refuse)
    with pytest.raises(CompileError, match="^two-party protocol: refused for the test$"):
        heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="auto", protocol="two-party", calibration=CAL,
                        measure_costs=False)
