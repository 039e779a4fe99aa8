"""``heinfer.compiler.simulate``: the error of an encrypted throughput run, reproduced in the clear.

Each test compares the simulation with a real encrypted run (``heinfer.infer``) of the same
program on the same inputs: where the weights' rounding dominates, the simulation gives the
encrypted outputs' digits (the rounding is deterministic); where the encryption noise does,
it gives their spread. Both packings the batch axis uses are covered: coefficients (a
client-aided ReLU6 network) and slots (squares, relinearization, rescales). The few-bit
plans drop most of each output's bits on the wire: their encrypted runs are also the
regression test of a batch of rounded ciphertexts smaller than a seed-compressed one (refused
as "cannot fit" before 2026-11-27).
"""

from __future__ import annotations

import heinfer
import numpy as np
import pytest
import test_inference as ti
from heinfer.compiler.simulate import output_noise, simulate
from heinfer.program.ops import Linear, Square

from compiler import onnx_models as om

MODELS = {
    # name: (model of test_inference, packing the plan uses)
    "relu6": ("depthwise-separable-relu6", "coeff"),  # client-aided ReLU and ReLU6
    "square": ("mlp-gemm-square", "real"),  # squares, relinearization, rescales
}


def _compiled(name: str, **options) -> tuple[heinfer.Program, np.ndarray, np.ndarray]:
    """``(program, inputs, outputs of the plan without any rounding)``."""
    model, packing = MODELS[name]
    shape = ti.MODELS[model][1]
    prog = heinfer.compile(ti._model(model), mode="throughput", calibration=om.random_input(shape, 64, seed=11), **options)
    assert {s.layout.packing for s in prog.segments} == {packing}
    x = om.random_input(shape, 256, seed=3)
    return prog, x, _plain(prog, x)


def _plain(prog: heinfer.Program, x: np.ndarray) -> np.ndarray:
    """The program's layers in float64 with nothing rounded, flattened per item."""
    return simulate(prog, x, errors=False).reshape(len(x), -1)


def test_without_errors_it_is_the_plan_in_float64() -> None:
    prog, x, exact = _compiled("relu6")
    y = x.reshape(len(x), -1).astype(np.float64)
    for k, seg in enumerate(prog.segments):  # the chain of layers and steps, by hand
        for op in seg.ops:
            if isinstance(op, Linear):
                step = prog.layers[op.layer]
                y = np.asarray(step.matrix @ y.T).T + (0.0 if step.bias is None else step.bias)
            elif isinstance(op, Square):
                y = y * y
        y = prog.steps[k].apply(y) if k < len(prog.steps) else y
    for f in prog.post:
        y = f.apply(y)
    np.testing.assert_allclose(exact, y, rtol=1e-12, atol=1e-12)
    assert np.abs(exact - om.run_onnxruntime(ti._model("depthwise-separable-relu6"), x).reshape(exact.shape)).max() < 1e-5


@pytest.mark.parametrize("name", sorted(MODELS))
def test_coarse_weights_give_the_encrypted_runs_digits(name: str) -> None:
    # 7 weight bits: the weights' rounding is far above the noise and the released precision,
    # and deterministic
    prog, x, exact = _compiled(name, weight_bits=7, input_bits=30, precision_bits=24)
    got = heinfer.infer(prog, x).outputs.reshape(len(x), -1)
    sim = simulate(prog, x).reshape(len(x), -1)
    moved = np.abs(got - exact).max()
    assert moved > 100 * prog.segments[-1].precision  # the rounding shows
    assert np.abs(sim - got).max() < 0.05 * moved


@pytest.mark.parametrize("name", sorted(MODELS))
def test_coarse_inputs_give_the_encrypted_runs_spread(name: str) -> None:
    # few input bits and many weight bits: the encryption noise dominates, drawn afresh each
    # run; after squares it is heavy-tailed (one run's spread moves by ±30 %): three of each
    prog, x, exact = _compiled(name, weight_bits=24, input_bits=14 if name == "relu6" else 18, precision_bits=24)
    enc = [np.std(heinfer.infer(prog, x).outputs.reshape(len(x), -1) - exact) for _ in range(3)]
    sims = [simulate(prog, x, seed=s).reshape(len(x), -1) for s in range(3)]
    assert min(enc) > 100 * prog.segments[-1].precision
    assert 0.7 < np.mean([np.std(sim - exact) for sim in sims]) / np.mean(enc) < 1.4
    assert not np.array_equal(sims[0], sims[1])  # seeds draw different errors
    np.testing.assert_array_equal(sims[0], simulate(prog, x, seed=0).reshape(len(x), -1))


def test_fine_plan_stays_within_the_stated_precision_of_the_plain_layers() -> None:
    prog, x, exact = _compiled("relu6", weight_bits=24, input_bits=34)
    sim = simulate(prog, x).reshape(len(x), -1)
    assert np.abs(sim - exact).max() < 4 * prog.segments[-1].precision


def test_refuses_what_it_does_not_model() -> None:
    prog, x, _ = _compiled("relu6")
    with pytest.raises(heinfer.CompileError, match="server's Program"):
        simulate(prog.public(), x)
    with pytest.raises(heinfer.CompileError, match="shape"):
        simulate(prog, x[:, :, :4])


def test_a_two_party_program_is_simulated_exactly_as_the_protocol_computes() -> None:
    """BFV and the circuits are exact: the simulation gives the protocol's digits (latency
    mode here with max-pooling; every network of the protocol tests checks it too)."""
    cal = om.random_input((2, 6, 6), 64, seed=11)
    two = heinfer.compile(ti._model("relu-maxpool-2x2"), calibration=cal, protocol="two-party")
    x = om.random_input((2, 6, 6), 2, seed=3)
    sim = simulate(two, x)
    np.testing.assert_array_equal(sim, heinfer.infer(two, x).outputs)
    assert not np.any(output_noise(two, x))  # nothing is drawn: the protocol adds no error
    with pytest.raises(heinfer.CompileError, match="with its layers"):
        simulate(two.public(), x)
    with pytest.raises(heinfer.RangeError, match="beyond the bound"):
        simulate(two, x * 1e6)


LATENCY = ["mlp-gemm-square", "depthwise-separable-relu6", "conv-pow-global-avgpool"]


def _latency(model: str, n: int, **options) -> tuple[heinfer.Program, np.ndarray, np.ndarray]:
    """``(latency program, n inputs, the model's outputs on them)``."""
    shape = ti.MODELS[model][1]
    prog = heinfer.compile(ti._model(model), mode="latency", calibration=om.random_input(shape, 64, seed=11), **options)
    assert {s.layout.kind for s in prog.segments} == {"slots"}
    x = om.random_input(shape, n, seed=3)
    return prog, x, om.run_onnxruntime(ti._model(model), x).reshape(n, -1)


@pytest.mark.parametrize("model", LATENCY)
def test_latency_plans_run_exactly_without_errors(model: str) -> None:
    # the slot layout's gather maps, diagonals, baby and giant steps, folds and output
    # placements in float64: the model's outputs
    prog, x, want = _latency(model, 4)
    exact = simulate(prog, x, errors=False).reshape(len(x), -1)
    assert np.abs(exact - want).max() < 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("model", LATENCY)
def test_latency_errors_have_the_encrypted_runs_spread(model: str) -> None:
    # 22-bit scales and fine released precision: the encryption, the key switches of the
    # rotations and the rescales dominate, drawn afresh each run (keys too): eight of each
    # (32 items: one run's spread moves by up to ±50 %, and with three of each the ratio fell
    # to 0.58 once in CI; with eight, 0.84–1.25 over 9 trials of the three models)
    prog, x, _ = _latency(model, 32, scale_bits=(22,), precision_bits=30)
    # the compiler raised the released precision above this noise (compiler/latency/noise.py);
    # back to the requested one, so that the release hides nothing of it here
    prog.segments[-1].precision = prog.meta["precision_requested"]
    exact = simulate(prog, x, errors=False).reshape(len(x), -1)
    enc = [np.std(heinfer.infer(prog, x).outputs.reshape(len(x), -1) - exact) for _ in range(8)]
    sim = [np.std(simulate(prog, x, seed=s).reshape(len(x), -1) - exact) for s in range(8)]
    assert min(enc) > 100 * prog.segments[-1].precision  # the noise shows
    assert 0.6 < np.mean(sim) / np.mean(enc) < 1.7


def test_latency_plan_of_a_graph_runs_exactly_without_errors() -> None:
    from compiler import dag_models as dm

    build, shape = dm.DAG_MODELS["inverted-residual"][:2]
    prog = heinfer.compile(build(), "latency", calibration=om.random_input(shape, 64, seed=11))
    x = om.random_input(shape, 3, seed=5)
    want = om.run_onnxruntime(build(), x)
    assert np.abs(simulate(prog, x, errors=False) - want).max() < 1e-5 * np.abs(want).max()


def test_graph_shaped_programs_are_simulated_like_their_encrypted_runs() -> None:
    # residual additions and concatenations, lowered to chains of batch-axis layers
    from compiler import dag_models as dm

    build, shape = dm.DAG_MODELS["inverted-residual"][:2]
    prog = heinfer.compile(build(), "throughput", calibration=om.random_input(shape, 64, seed=11))
    x = om.random_input(shape, 64, seed=5)
    want = om.run_onnxruntime(build(), x)
    err = np.abs(heinfer.infer(prog, x).outputs - want).max()
    sim = np.abs(simulate(prog, x) - want).max()
    assert err / 3 < sim < 3 * err


@pytest.mark.parametrize(
    "log_n,log_q,log_p",
    [(13, [39, 28, 28, 28, 28, 28], [39]), (13, [46, 40], [46]), (14, [50, 40, 40, 40, 40], [50, 50]), (12, [39, 30], [39])],
)
def test_the_simulated_key_switch_and_rescale_are_the_engines_noise_model(log_n: int, log_q: list, log_p: list) -> None:
    """``simulate_slots`` restates the engine's noise model in Python (on the program's bit
    sizes instead of its primes): the same per-slot error at every level, within 1 %."""
    from heinfer import _native
    from heinfer.compiler.simulate_slots import keyswitch_variance, rescale_variance
    from heinfer.compiler.throughput import SIGMA

    params = _native.Params(log_n, log_q, log_p, log_q[-1], None, 128)
    n, scale = 1 << log_n, 2.0**40
    slot = lambda v: np.sqrt(n * v / 2) / scale  # noqa: E731 - a coefficient variance in slots
    for level in range(len(log_q)):
        model = params.noise_model(level, scale)
        assert slot(keyswitch_variance([float(b) for b in log_q], [float(b) for b in log_p], level + 1, n)) == pytest.approx(model["key_switch"], rel=0.01)
        assert slot(rescale_variance(n, 2)) == pytest.approx(model["rescale"], rel=1e-9)
        assert slot(1.0 / 12.0 + SIGMA**2) == pytest.approx(model["fresh_symmetric"], rel=1e-3)
    with pytest.raises(heinfer.ParameterError):
        params.noise_model(len(log_q), scale)
