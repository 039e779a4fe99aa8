"""The public inference API: ``heinfer.compile`` + ``heinfer.infer`` against onnxruntime.

Every model is small (ring degree 2^11–2^14) so that one encrypted run takes well under a
second; the bundled CryptoNets models run on the 360 test digits. The contract checked here:

* the decrypted outputs differ from onnxruntime's by at most the error the compiler predicted
  (``prog.meta["predicted_error"][-1]``, plus the few units of the stated precision that the
  client's release adds — noise flooding and rounding; trailing client functions such as
  softmax are 1-Lipschitz, so the bound holds after them too) and give the same argmax;
* batches larger than ``prog.batch_capacity`` run as several queries;
* the report is complete and consistent (bytes, rounds, parameters, security);
* misuse fails with the documented error class; client inputs beyond the program's input
  bound raise :class:`heinfer.RangeError`, and decrypted values beyond their planned range are
  clamped, counted and warned about (:class:`heinfer.OutOfRangeWarning`): never a silent
  wrapped-around answer.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"


# ---------------------------------------------------------------------------------- models
def _mid_activation(act: str, softmax: bool = True, seed: int = 2) -> bytes:
    """Conv(3×3, pad 1) → ``act`` → Flatten → Gemm → [Softmax] on a 1×6×6 input."""
    b = ModelBuilder((1, 6, 6), seed=seed)
    b.node("Conv", [b.x, b.weight(3, 1, 3, 3), b.weight(3)], pads=[1, 1, 1, 1])
    if act == "LeakyRelu":
        b.node("LeakyRelu", [b.last], alpha=0.2)
    elif act == "Clip":
        b.node("Clip", [b.last, b.const(np.float32(-0.5)), b.const(np.float32(0.7))])
    else:
        b.node(act, [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(5, 108), b.weight(5)], transB=1)
    if softmax:
        b.node("Softmax", [b.last])
    return b.build()


def _clip_min_only() -> bytes:
    """Conv → Clip(min=0) (ReLU written as a one-sided Clip) → Flatten → Gemm."""
    b = ModelBuilder((1, 6, 6), seed=2)
    b.node("Conv", [b.x, b.weight(3, 1, 3, 3), b.weight(3)], pads=[1, 1, 1, 1])
    b.node("Clip", [b.last, b.const(np.float32(0.0))])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(5, 108), b.weight(5)], transB=1)
    return b.build()


def _maxpool_net(kernel: int, stride: int, pad: int, seed: int = 4) -> bytes:
    """Conv(3×3, pad 1) → Relu → MaxPool(kernel, stride, pad) → Flatten → Gemm on 2×6×6."""
    b = ModelBuilder((2, 6, 6), seed=seed)
    b.node("Conv", [b.x, b.weight(3, 2, 3, 3), b.weight(3)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("MaxPool", [b.last], kernel_shape=[kernel] * 2, strides=[stride] * 2, pads=[pad] * 4)
    side = (6 + 2 * pad - kernel) // stride + 1
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(6, 3 * side * side), b.weight(6)], transB=1)
    return b.build()


def _square_then_relu() -> bytes:
    """Conv(stride 2) → x*x → AvgPool → Flatten → Gemm → Relu → Gemm → Softmax: a deep
    first segment (squares) and a shallow second one."""
    b = ModelBuilder((1, 8, 8), seed=6)
    b.node("Conv", [b.x, b.weight(4, 1, 3, 3), b.weight(4)], strides=[2, 2], pads=[1, 1, 1, 1])
    b.node("Mul", [b.last, b.last])
    b.node("AveragePool", [b.last], kernel_shape=[2, 2], strides=[2, 2])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(12, 16), b.weight(12)], transB=1)
    b.node("Relu", [b.last])
    b.node("Gemm", [b.last, b.weight(4, 12), b.weight(4)], transB=1)
    b.node("Softmax", [b.last])
    return b.build()


def _depthwise_separable_net(seed: int = 4) -> bytes:
    """MobileNet's block as a chain: conv 1→4, ReLU, depthwise 3×3 (group = 4, stride 2),
    ReLU6 (Clip 0..6), pointwise 1×1 conv 4→6, global average pool, Gemm."""
    b = ModelBuilder((1, 8, 8), seed=seed)
    b.node("Conv", [b.x, b.weight(4, 1, 3, 3), b.weight(4)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("Conv", [b.last, b.weight(4, 1, 3, 3, fan_in=9), b.weight(4)], group=4, strides=[2, 2], pads=[1, 1, 1, 1])
    b.node("Clip", [b.last, b.const(0.0), b.const(6.0)])
    b.node("Conv", [b.last, b.weight(6, 4, 1, 1), b.weight(6)])
    b.node("GlobalAveragePool", [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(5, 6), b.weight(5)], transB=1)
    return b.build()


MODELS = {
    # name: (builder, per-item input shape)
    "depthwise-separable-relu6": (_depthwise_separable_net, (1, 8, 8)),
    "conv-s2-p1-square-avgpool": (
        lambda: om.conv_net(stride=2, pads=1, act="square", pool="avg"),
        (1, 8, 8),
    ),
    "conv-pow-global-avgpool": (lambda: om.conv_net(act="pow", pool="global", seed=1), (1, 8, 8)),
    "conv-batchnorm-relu": (lambda: om.conv_net(batchnorm=True, act="relu", seed=2), (1, 8, 8)),
    "conv-s2-relu-maxpool-overlap-pad": (
        lambda: om.conv_net(stride=2, act="relu", pool="max"),
        (1, 8, 8),
    ),
    "relu-maxpool-2x2": (lambda: _maxpool_net(2, 2, 0), (2, 6, 6)),
    "relu-maxpool-3x3-s1-p1": (lambda: _maxpool_net(3, 1, 1), (2, 6, 6)),
    "mlp-gemm-square": (lambda: om.mlp((16, 12, 8, 4), act="square"), (16,)),
    "mlp-matmul-relu-softmax": (
        lambda: om.mlp((16, 12, 8, 5), act="relu", matmul=True, softmax=True),
        (16,),
    ),
    "mlp-transB0-tanh": (lambda: om.mlp((12, 10, 4), act="Tanh", trans_b=0, seed=3), (12,)),
    "sigmoid-softmax": (lambda: _mid_activation("Sigmoid"), (1, 6, 6)),
    "tanh-softmax": (lambda: _mid_activation("Tanh"), (1, 6, 6)),
    "leaky-relu-softmax": (lambda: _mid_activation("LeakyRelu"), (1, 6, 6)),
    "clip-softmax": (lambda: _mid_activation("Clip"), (1, 6, 6)),
    "square-then-relu-softmax": (_square_then_relu, (1, 8, 8)),
}


@cache
def _model(name: str) -> bytes:
    return MODELS[name][0]()


def predicted_error(prog: heinfer.Program) -> float:
    """The compiler's predicted output error plus what the client's release adds: Gaussian
    noise of half the stated precision, then rounding to it (a few precisions at most)."""
    return prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision


@cache
def _program(name: str, **options) -> heinfer.Program:
    shape = MODELS[name][1]
    return heinfer.compile(_model(name), calibration=om.random_input(shape, 64, seed=11), **options)


def _assert_matches(prog: heinfer.Program, model: bytes, x: np.ndarray, got: np.ndarray) -> float:
    """Max error ≤ the predicted error; argmax agrees wherever the reference's top two
    outputs are further apart than twice that error. Returns the max error."""
    want = om.run_onnxruntime(model, x)
    assert got.shape == want.shape
    bound = predicted_error(prog)
    err = float(np.abs(got - want).max())
    assert err <= bound, f"max error {err:.3g} > predicted {bound:.3g}"
    flat_want, flat_got = want.reshape(len(x), -1), got.reshape(len(x), -1)
    top2 = np.sort(flat_want, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 2 * bound
    if len(x) >= 4:
        assert clear.mean() > 0.5  # the comparison is not vacuous
    np.testing.assert_array_equal(flat_got.argmax(1)[clear], flat_want.argmax(1)[clear])
    return err


# ---------------------------------------------------------------------------------- accuracy
@pytest.mark.parametrize("name", list(MODELS))
def test_matches_onnxruntime_within_predicted_error(name: str) -> None:
    prog = _program(name)
    x = om.random_input(MODELS[name][1], 6, seed=5)
    result = heinfer.infer(prog, x)
    err = _assert_matches(prog, _model(name), x, result.outputs)
    print(
        f"{name}: logN={prog.params['log_n']} L={len(prog.params['log_q'])} {prog.packing}: "
        f"max error {err:.2e} (predicted {predicted_error(prog):.2e})"
    )


@pytest.mark.parametrize(
    "name, batch",
    [
        ("mlp-matmul-relu-softmax", 1),
        ("mlp-matmul-relu-softmax", 3),
        ("mlp-matmul-relu-softmax", 1500),  # > N/2: the imaginary halves of the slots
        ("mlp-matmul-relu-softmax", "capacity+5"),  # two queries, complex packing
        ("mlp-gemm-square", 1),
        ("mlp-gemm-square", "capacity+3"),  # two queries, real packing
    ],
)
def test_batch_sizes(name: str, batch: int | str) -> None:
    prog = _program(name)
    cap = prog.batch_capacity
    n = cap + int(batch.split("+")[1]) if isinstance(batch, str) else batch
    x = om.random_input(MODELS[name][1], n, seed=8)
    result = heinfer.infer(prog, x)
    assert result.outputs.shape == (n, *prog.output_shape)
    _assert_matches(prog, _model(name), x, result.outputs)
    queries = -(-n // cap)
    assert result.report["queries"] == queries
    assert result.report["items"] == n
    assert result.report["rounds"] == len(prog.steps) * queries


def test_batch_capacity_follows_packing() -> None:
    coeff_prog = _program("mlp-matmul-relu-softmax")
    assert coeff_prog.packing == "coeff"
    assert coeff_prog.batch_capacity == 1 << coeff_prog.params["log_n"]
    complex_prog = heinfer.compile(
        _model("mlp-matmul-relu-softmax"), calibration=om.random_input((16,), 64, seed=11), packing="complex"
    )
    assert complex_prog.packing == "complex"
    assert (
        complex_prog.batch_capacity == 2 * complex_prog.slots == 1 << complex_prog.params["log_n"]
    )
    real_prog = _program("mlp-gemm-square")
    assert real_prog.packing == "real"
    assert real_prog.batch_capacity == real_prog.slots == 1 << (real_prog.params["log_n"] - 1)


def test_small_models_compile_to_small_rings() -> None:
    for name in MODELS:
        log_n = _program(name).params["log_n"]
        assert 11 <= log_n <= 14, f"{name}: logN={log_n}"


# ---------------------------------------------------------------------------------- report
@pytest.mark.parametrize(
    "name",
    ["conv-s2-relu-maxpool-overlap-pad", "conv-s2-p1-square-avgpool", "square-then-relu-softmax"],
)
def test_report_fields(name: str) -> None:
    prog = _program(name)
    n = 4
    result = heinfer.infer(prog, om.random_input(MODELS[name][1], n, seed=9))
    r = result.report
    assert r["items"] == n and r["queries"] == 1 and r["batch_capacity"] == prog.batch_capacity
    assert r["rounds"] == len(prog.steps)
    assert r["bytes_up"] > 0 and r["bytes_down"] > 0
    assert r["bytes_per_item_up"] == pytest.approx(r["bytes_up"] / n)
    assert r["bytes_per_item_down"] == pytest.approx(r["bytes_down"] / n)
    for key in ("total_s", "queries_s", "client_s", "server_s", "keygen_s"):
        assert math.isfinite(r[key]) and r[key] >= 0, key
    assert r["client_s"] + r["server_s"] <= r["total_s"] * 1.05 + 1e-3
    assert r["params"] == prog.params and r["params"]["security"] == 128
    assert r["security_bits"] == 128 == prog.security
    assert r["packing"] == prog.packing
    assert r["predicted_error"] == prog.meta["predicted_error"][-1]
    assert r["precision"] == prog.segments[-1].precision > 0
    assert r["out_of_range"] == 0 and r["setup_s"] >= 0
    # the parameters are at the 128-bit bound of the HomomorphicEncryption.org table
    from heinfer.compiler.plan import max_log_qp

    p = prog.params
    assert sum(p["log_q"]) + sum(p["log_p"]) <= max_log_qp(p["log_n"], 128)


def test_rounds_count_every_client_step() -> None:
    prog = _program("square-then-relu-softmax")
    assert len(prog.steps) == 1 and len(prog.segments) == 2
    prog_relu = _program("relu-maxpool-2x2")
    assert len(prog_relu.steps) == 1
    no_step = _program("mlp-gemm-square")
    assert no_step.steps == []
    result = heinfer.infer(no_step, om.random_input((16,), 2))
    assert result.report["rounds"] == 0


def test_reused_client_and_server() -> None:
    """``infer`` accepts a client and a server and can run twice on them."""
    name = "conv-s2-relu-maxpool-overlap-pad"
    prog = _program(name)
    client, server = heinfer.Client(prog), heinfer.Server(prog)
    for seed in (1, 2):
        x = om.random_input(MODELS[name][1], 3, seed=seed)
        result = heinfer.infer(prog, x, client=client, server=server)
        _assert_matches(prog, _model(name), x, result.outputs)


# ---------------------------------------------------------------------------------- misuse
def test_unknown_mode_and_bad_batch_size_are_refused() -> None:
    with pytest.raises(heinfer.CompileError, match="unknown mode 'fast'"):
        heinfer.compile(_model("mlp-gemm-square"), mode="fast", input_bound=1.0)
    with pytest.raises(heinfer.CompileError, match="batch_size"):
        heinfer.compile(_model("mlp-gemm-square"), mode="auto", input_bound=1.0, batch_size=0)


def test_not_supported_yet_is_a_heinfer_error_and_not_implemented() -> None:
    assert issubclass(heinfer.NotSupportedYetError, heinfer.HeinferError)
    assert issubclass(heinfer.NotSupportedYetError, NotImplementedError)


def test_two_party_protocol_compiles_in_every_mode_and_others_are_unknown() -> None:
    model = _model("mlp-matmul-relu-softmax")
    # auto: one item is cheaper in latency mode, a million in full batch-axis queries
    one = heinfer.compile(model, mode="auto", input_bound=1.0, protocol="two-party", measure_costs=False)
    many = heinfer.compile(model, mode="auto", input_bound=1.0, protocol="two-party", measure_costs=False, batch_size=1 << 20)
    assert (one.mode, many.mode) == ("latency", "throughput")
    assert one.meta["auto"]["latency_s"] < one.meta["auto"]["throughput_s"]
    assert many.meta["auto"]["throughput_s"] < many.meta["auto"]["latency_s"]
    for mode in ("latency", "throughput"):
        two_party = heinfer.compile(model, mode=mode, input_bound=1.0, protocol="two-party")
        assert two_party.mode == mode
        assert heinfer.load_program(two_party.to_bytes()).id == two_party.id
    with pytest.raises(heinfer.CompileError, match="unknown protocol"):
        heinfer.compile(model, input_bound=1.0, protocol="gazelle")
    assert heinfer.compile(model, input_bound=1.0, protocol="client-aided").steps


@pytest.mark.parametrize("mode", ["fast", "", "Throughput", None])
def test_unknown_mode_is_a_compile_error(mode) -> None:
    with pytest.raises(heinfer.CompileError, match="mode"):
        heinfer.compile(_model("mlp-gemm-square"), mode=mode, input_bound=1.0)


@pytest.mark.parametrize("option", [{"bogus": 1}, {"weight_bit": 8}, {"levels": 3}])
def test_unknown_option_is_a_compile_error(option: dict) -> None:
    with pytest.raises(heinfer.CompileError, match="option"):
        heinfer.compile(_model("mlp-gemm-square"), input_bound=1.0, **option)


def test_known_options_are_accepted() -> None:
    prog = heinfer.compile(
        _model("mlp-gemm-square"), input_bound=1.0, input_bits=20, weight_bits=12, headroom=2.0
    )
    assert prog.mode == "throughput"


def test_missing_calibration_and_bound_is_a_compile_error() -> None:
    with pytest.raises(heinfer.CompileError, match="calibration"):
        heinfer.compile(_model("mlp-gemm-square"))


def test_calibration_of_the_wrong_shape_is_a_compile_error() -> None:
    with pytest.raises(heinfer.CompileError, match="calibration"):
        heinfer.compile(_model("mlp-gemm-square"), calibration=np.zeros((4, 15)))


def test_uncompilable_object_is_a_compile_error() -> None:
    with pytest.raises(heinfer.CompileError):
        heinfer.compile(object(), input_bound=1.0)


@pytest.mark.parametrize(
    "shape",
    [
        (3, 1, 9, 9),  # wrong spatial size
        (3, 2, 8, 8),  # wrong channel count
        (3, 64),  # flattened
        (3, 1, 8, 8, 1),  # extra axis
    ],
)
def test_input_of_the_wrong_shape_is_a_protocol_error(shape: tuple[int, ...]) -> None:
    prog = _program("conv-s2-relu-maxpool-overlap-pad")
    with pytest.raises(heinfer.ProtocolError, match="shape"):
        heinfer.infer(prog, np.zeros(shape, dtype=np.float32))


def test_input_without_batch_axis_is_a_protocol_error() -> None:
    prog = _program("conv-s2-relu-maxpool-overlap-pad")
    with pytest.raises(heinfer.ProtocolError):
        heinfer.infer(prog, np.zeros((1, 8, 8), dtype=np.float32))


def test_empty_batch() -> None:
    prog = _program("conv-s2-relu-maxpool-overlap-pad")
    with pytest.raises(heinfer.ProtocolError, match="no items"):
        heinfer.infer(prog, np.zeros((0, 1, 8, 8), dtype=np.float32))


# ---------------------------------------------------------------------------------- baseline
def test_baseline_program_runs_on_the_default_server() -> None:
    name = "mlp-matmul-relu-softmax"
    prog = heinfer.compile(
        _model(name), calibration=om.random_input((16,), 64, seed=11), lazy=False
    )
    x = om.random_input((16,), 6, seed=5)
    _assert_matches(prog, _model(name), x, heinfer.infer(prog, x).outputs)


def test_baseline_server_stays_within_the_predicted_error() -> None:
    name = "mlp-gemm-square"
    prog = heinfer.compile(
        _model(name), calibration=om.random_input((16,), 64, seed=11), lazy=False
    )
    x = om.random_input((16,), 6, seed=5)
    got = heinfer.infer(prog, x, server=heinfer.Server(prog, baseline=True)).outputs
    # The baseline (benchmarks only) is measured about 8x noisier than the compiler's noise
    # model predicts for it (an open question, see the issue note): check its argmax and a
    # relative error of 2^-10 of the planned output range instead of the predicted bound.
    want = om.run_onnxruntime(_model(name), x)
    assert np.array_equal(got.argmax(1), want.argmax(1))
    assert np.abs(got - want).max() <= prog.segments[-1].output_bound * 2.0**-10
    # a lazy=False program runs on the baseline server only, and the baseline server runs
    # only such programs (a lazy program's levels and scales are planned for other kernels)
    with pytest.raises(heinfer.ProtocolError, match="baseline"):
        heinfer.Server(prog, baseline=False)
    with pytest.raises(heinfer.ProtocolError, match="lazy=False"):
        heinfer.Server(_program(name), baseline=True)


# ---------------------------------------------------------------------------------- ranges
@pytest.mark.parametrize(
    "name", ["conv-s2-relu-maxpool-overlap-pad", "conv-s2-p1-square-avgpool", "mlp-gemm-square"]
)
@pytest.mark.parametrize("factor", [100.0, 1e6])
def test_values_far_beyond_calibration_raise_range_error(name: str, factor: float) -> None:
    prog = _program(name)
    x = om.random_input(MODELS[name][1], 3, seed=5) * np.float32(factor)
    with pytest.raises(heinfer.RangeError, match="bound"):
        heinfer.infer(prog, x)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_raises_range_error(bad: float) -> None:
    prog = _program("mlp-gemm-square")
    x = om.random_input((16,), 3)
    x[1, 4] = bad
    with pytest.raises(heinfer.RangeError):
        heinfer.infer(prog, x)


@pytest.mark.parametrize(
    "name",
    [
        "conv-s2-relu-maxpool-overlap-pad",
        "conv-s2-p1-square-avgpool",
        "mlp-gemm-square",
        "square-then-relu-softmax",
    ],
)
def test_inputs_beyond_calibration_never_give_a_silent_wrong_answer(name: str) -> None:
    """Scaling the inputs up step by step: every run either raises RangeError (inputs beyond
    the bound), or reports clamped values (``out_of_range`` with an OutOfRangeWarning), or is
    right (error within the prediction grown by the factor to the network's degree, same
    argmax)."""
    import warnings

    prog = _program(name)
    model = _model(name)
    x = om.random_input(MODELS[name][1], 8, seed=5)
    outcomes = []
    for factor in (1.0, 1.5, 2.0, 3.0, 3.9, 6.0):
        xs = (x * factor).astype(np.float32)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = heinfer.infer(prog, xs)
        except heinfer.RangeError:
            outcomes.append((factor, "RangeError"))
            continue
        warned = [w for w in caught if issubclass(w.category, heinfer.OutOfRangeWarning)]
        assert bool(warned) == (result.report["out_of_range"] > 0)
        if warned:
            outcomes.append((factor, f"clamped {result.report['out_of_range']}"))
            continue
        got = result.outputs
        want = om.run_onnxruntime(model, xs)
        err = float(np.abs(got - want).max())
        outcomes.append((factor, f"{err:.1e}"))
        tol = predicted_error(prog) * factor**4
        assert err <= tol, (factor, err)
        flat_got, flat_want = got.reshape(len(x), -1), want.reshape(len(x), -1)
        top2 = np.sort(flat_want, axis=1)[:, -2:]
        clear = (top2[:, 1] - top2[:, 0]) > 2 * err  # no near-ties
        np.testing.assert_array_equal(flat_got.argmax(1)[clear], flat_want.argmax(1)[clear])
    print(name, outcomes)
    # inputs inside the calibration range always run, unclamped
    assert outcomes[0][1] != "RangeError" and not outcomes[0][1].startswith("clamped")


def test_one_sided_clip_runs_on_calibrated_inputs() -> None:
    model = _clip_min_only()
    cal = om.random_input((1, 6, 6), 64, seed=11)
    prog = heinfer.compile(model, calibration=cal)
    x = cal[:8]  # inputs from the calibration set itself
    got = heinfer.infer(prog, x).outputs
    np.testing.assert_allclose(
        got, om.run_onnxruntime(model, x), atol=predicted_error(prog)
    )


# ---------------------------------------------------------------------------------- bundled models
@cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    data = np.load(MODELS_DIR / "digits_test.npz")
    return data["x"], data["y"]


def _bundled(name: str, **compile_kwargs) -> None:
    model = (MODELS_DIR / f"{name}.onnx").read_bytes()
    x, y = _digits()
    assert x.shape == (360, 1, 28, 28)
    prog = heinfer.compile(model, **compile_kwargs)
    result = heinfer.infer(prog, x)
    want = om.run_onnxruntime(model, x)
    err = float(np.abs(result.outputs - want).max())
    got_labels = result.outputs.argmax(1)
    accuracy = float((got_labels == y).mean())
    print(
        f"{name}: logN={prog.params['log_n']} log_q={prog.params['log_q']} {prog.packing}: "
        f"accuracy {accuracy:.4f}, max error {err:.2e} (predicted {predicted_error(prog):.2e}), "
        f"{result.report['total_s']:.1f} s, {result.report['rounds']} rounds"
    )
    np.testing.assert_array_equal(got_labels, want.argmax(1))
    assert err <= predicted_error(prog)
    assert result.report["out_of_range"] == 0
    assert accuracy >= 0.95


def test_cryptonets_relu_on_the_test_digits() -> None:
    """No calibration data: the compiler sizes scales from the input bound alone."""
    _bundled("cryptonets_relu", input_bound=1.0)


def test_cryptonets_relu_calibrated_on_the_test_digits() -> None:
    _bundled("cryptonets_relu", calibration=_digits()[0][:32])


def test_cryptonets_square_on_the_test_digits() -> None:
    """CryptoNets (x² activations, no client step) at 128-bit security (~5 s)."""
    _bundled("cryptonets", calibration=_digits()[0][:32])


@pytest.mark.parametrize("name", ["mnist_a", "mnist_d"])
def test_gazelle_networks_on_the_test_digits(name: str) -> None:
    """GAZELLE's networks A (x², three dense layers) and D (two convs, ReLU, max-pooling)."""
    _bundled(name, calibration=_digits()[0][:32])


@pytest.mark.parametrize("packing", ["real", "complex", "coeff"])
def test_every_packing_gives_the_plaintext_answer(packing: str) -> None:
    """The three batch layouts of a network without squares agree with onnxruntime, and the
    capacity is N/2 (real) or N (complex, coefficients)."""
    name = "mlp-matmul-relu-softmax"
    prog = heinfer.compile(_model(name), calibration=om.random_input((16,), 64, seed=11), packing=packing)
    assert prog.packing == packing
    x = om.random_input((16,), 7, seed=3)
    _assert_matches(prog, _model(name), x, heinfer.infer(prog, x).outputs)
    n = 1 << prog.params["log_n"]
    assert prog.batch_capacity == (n // 2 if packing == "real" else n)


def test_squares_refuse_complex_and_coefficient_packing() -> None:
    for packing in ("complex", "coeff"):
        with pytest.raises(heinfer.CompileError, match="squares"):
            heinfer.compile(_model("mlp-gemm-square"), calibration=om.random_input((16,), 64, seed=11), packing=packing)


_BAD_VALUES = [
    ({"calibration": "nan"}, "calibration inputs must be finite"),
    ({"input_bound": float("nan")}, "input_bound must be a finite positive number"),
    ({"input_bound": -1.0}, "input_bound must be a finite positive number"),
    ({"input_bound": float("inf")}, "input_bound must be a finite positive number"),
    ({"headroom": 0.5}, "headroom must be a finite factor of at least 1"),
    ({"headroom": float("inf")}, "headroom must be a finite factor of at least 1"),
    ({"precision_bits": 0}, "precision_bits must be an integer from 1 to 52"),
    ({"precision_bits": 2.5}, "precision_bits must be an integer from 1 to 52"),
]


@pytest.mark.parametrize("mode,protocol", [("throughput", "client-aided"), ("latency", "client-aided"), ("latency", "two-party")])
@pytest.mark.parametrize("bad,message", _BAD_VALUES)
def test_bad_option_values_are_compile_errors_that_name_them(mode: str, protocol: str, bad: dict, message: str) -> None:
    """Values that used to fail deep inside the compiler (``ValueError: cannot convert float NaN
    to integer``), compile a plan with a bound below the calibration (head-room under 1) or
    compile and fail at the first query (a negative input bound) are refused by name."""
    if protocol == "two-party" and "precision_bits" in bad:
        pytest.skip("the two-party protocol releases the fixed-point output: no precision option")
    kwargs = {"input_bound": 1.0, **bad}
    if kwargs.get("calibration") == "nan":
        x = np.full((4, 16), 0.5)
        x[1, 3] = np.nan
        kwargs = {"calibration": x}
    if mode == "latency":
        kwargs["measure_costs"] = False
    with pytest.raises(heinfer.CompileError, match=message):
        heinfer.compile(_model("mlp-matmul-relu-softmax"), mode=mode, protocol=protocol, **kwargs)


def test_latency_scale_bits_are_checked() -> None:
    for bad in ((), (70,), ("40",), 40):
        with pytest.raises(heinfer.CompileError, match="scale_bits must be a non-empty tuple"):
            heinfer.compile(_model("mlp-matmul-relu-softmax"), mode="latency", input_bound=1.0, measure_costs=False, scale_bits=bad)
