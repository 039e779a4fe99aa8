"""Any precision options a user may pass: a program that compiles runs, within its promise.

Property test over the throughput compiler's precision options (``input_bits``,
``weight_bits``, ``precision_bits``, the packing) on the small models of
``test_inference``: either ``heinfer.compile`` refuses with a :class:`heinfer.CompileError`,
or an encrypted run answers, its outputs within the compiler's predicted error of
onnxruntime's, and ``heinfer.simulate`` gives the same error to within a small factor. Found
two plans that compiled and then failed: a step whose rounded ciphertexts were smaller than a
seed-compressed one (refused by the client as "cannot fit") and a bias at a product scale past
126 bits (refused by the layer, saturated in the fused square chain). The reference is float64
(:func:`~compiler.onnx_models.run_float64`): at ``precision_bits=30`` a plan promises less error
than onnxruntime's float32 rounding (it found one: 5.1e-7 of float32 error, 4.6e-8 of encrypted
error, a 4.8e-7 prediction).
"""

from __future__ import annotations

import warnings

import heinfer
import numpy as np
import test_inference as ti
from compiler import dag_models as dm
from compiler import onnx_models as om
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st


#: name → (onnx bytes, per-item input shape)
MODELS = {
    **{name: (lambda name=name: ti._model(name), ti.MODELS[name][1]) for name in ti.MODELS},
    **{f"dag:{name}": (build, shape) for name, (build, shape, *_) in dm.DAG_MODELS.items()},
}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(sorted(MODELS)),
    input_bits=st.integers(8, 40),
    weight_bits=st.integers(4, 26),
    precision_bits=st.integers(4, 30),
    packing=st.sampled_from([None, "real", "complex", "coeff"]),
)
@example(name="conv-batchnorm-relu", input_bits=36, weight_bits=26, precision_bits=30, packing=None)  # float32's error
def test_a_compiled_plan_runs_within_its_predicted_error(name, input_bits, weight_bits, precision_bits, packing) -> None:
    build, shape = MODELS[name]
    options = {"input_bits": input_bits, "weight_bits": weight_bits, "precision_bits": precision_bits}
    if packing:
        options["packing"] = packing
    try:
        prog = heinfer.compile(build(), mode="throughput", calibration=om.random_input(shape, 64, seed=11), **options)
    except heinfer.CompileError:
        event("refused by the compiler")
        return  # refused with a message: allowed
    event("ran")
    x = om.random_input(shape, 32, seed=3)
    # float64: a plan at precision_bits=30 promises less error than onnxruntime's float32 result
    # carries (conv-batchnorm-relu: 5.1e-7 off near 2.7, over a 4.8e-7 prediction); onnxruntime
    # still vouches for the float64 reference to float32 accuracy
    want = om.run_float64(build(), x)
    np.testing.assert_allclose(om.run_onnxruntime(build(), x), want, rtol=1e-5, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", heinfer.OutOfRangeWarning)
        got = heinfer.infer(prog, x).outputs
    err = float(np.abs(got - want).max())
    assert err <= ti.predicted_error(prog), f"{name} {options}: error {err:.3g} over the prediction"
    # where errors are small against the outputs they grow linearly from their sources and the
    # simulation tracks them; near the outputs' size (a square of a value that is mostly noise)
    # one run's largest error moves by several times between runs, encrypted or simulated
    if err < 0.05 * float(np.abs(want).max()):
        sim = float(np.abs(heinfer.simulate(prog, x) - want).max())
        floor = 4 * prog.segments[-1].precision + 1e-5
        assert err <= 4 * sim + floor and sim <= 4 * err + floor, f"{name} {options}: encrypted {err:.3g}, simulated {sim:.3g}"


def test_bits_outside_what_the_engine_can_encode_are_refused_at_compile_time() -> None:
    """``input_bits=200`` compiled, and every query then failed in the encoder ("scaled
    coefficients reach 2^191.7, beyond Q/2 = 2^239": the float64 encoder's limit is ~2^126);
    ``input_bits=1`` failed as "invalid program: … input scale must be positive"."""
    import pytest

    model, shape = MODELS["conv-batchnorm-relu"]
    cal = om.random_input(shape, 16, seed=1)
    for bad, match in (({"input_bits": 200}, "input_bits must be an integer from 1 to 120"),
                       ({"weight_bits": 0}, "weight_bits must be an integer from 1 to 60"),
                       ({"input_bits": 24.0}, "input_bits must be an integer"),
                       ({"input_bits": 1, "packing": "coeff"}, "give more input_bits")):
        with pytest.raises(heinfer.CompileError, match=match):
            heinfer.compile(model(), mode="throughput", calibration=cal, **bad)
