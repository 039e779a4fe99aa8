"""Graph-shaped networks end to end: ``heinfer.compile`` + ``heinfer.infer`` on small DAG
models (residual additions, concatenations, branches through client steps, Sub of two
branches) against onnxruntime, within the compiler's predicted error, in throughput mode
(batch axis, client-aided) and latency mode (slots)."""

from __future__ import annotations

from functools import cache

import heinfer
import numpy as np
import pytest
from compiler import dag_models as dm
from compiler import onnx_models as om
from test_inference import _assert_matches, predicted_error

DAG_NAMES = [n for n in dm.DAG_MODELS if n != "transpose"]


@cache
def _model(name: str) -> bytes:
    return dm.DAG_MODELS[name][0]()


@cache
def _program(name: str, mode: str = "throughput") -> heinfer.Program:
    shape = dm.DAG_MODELS[name][1]
    return heinfer.compile(_model(name), mode, calibration=om.random_input(shape, 64, seed=11))


@pytest.mark.parametrize("name", list(dm.DAG_MODELS))
def test_throughput_matches_onnxruntime_within_predicted_error(name: str) -> None:
    prog = _program(name)
    x = om.random_input(dm.DAG_MODELS[name][1], 6, seed=5)
    result = heinfer.infer(prog, x)
    err = _assert_matches(prog, _model(name), x, result.outputs)
    print(f"{name}: logN={prog.params['log_n']} L={len(prog.params['log_q'])} {prog.packing}: "
          f"max error {err:.2e} (predicted {predicted_error(prog):.2e})")


def test_public_program_round_trips_with_partial_client_functions() -> None:
    prog = _program("residual-block")
    public = heinfer.load_program(prog.public().to_bytes())
    kept = [f.keep for st in public.steps for f in st.functions]
    assert kept == [(50, 0), (0, 0)]  # the skip passes through the first ReLU
    assert public.id == prog.id


def test_a_client_aided_square_widens_the_predicted_error() -> None:
    """The client's square is not 1-Lipschitz: the error the step receives grows by 2·bound."""
    prog = _program("linear-and-square")
    (step,) = prog.steps
    assert [f.kind for f in step.functions] == ["square"]
    before, after = prog.meta["predicted_error"]
    assert after > 2 * prog.segments[0].output_bound * before


def _relative_errors(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per item: the largest output error over the largest output magnitude."""
    got, want = got.reshape(len(got), -1), want.reshape(len(want), -1)
    return np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1)


@pytest.mark.parametrize("name", DAG_NAMES)
def test_latency_matches_onnxruntime(name: str) -> None:
    """The slot layout: the stacked Linears are slot transforms like any other (the skip and
    the branch it meets always share a placement, a level and a scale)."""
    prog = _program(name, "latency")
    assert prog.mode == "latency"
    x = om.random_input(dm.DAG_MODELS[name][1], 2, seed=5)
    want = om.run_onnxruntime(_model(name), x)
    got = heinfer.infer(prog, x).outputs
    err = _relative_errors(got, want)
    print(f"{name}: latency logN={prog.params['log_n']} rel. error {err.max():.2e}")
    assert err.max() <= 1e-3
    np.testing.assert_array_equal(got.reshape(2, -1).argmax(1), want.reshape(2, -1).argmax(1))


@pytest.mark.parametrize("batch_size", [1, 4096])
def test_auto_mode_compiles_branches(batch_size: int) -> None:
    shape = dm.DAG_MODELS["concat-branches"][1]
    prog = heinfer.compile(_model("concat-branches"), "auto", calibration=om.random_input(shape, 64, seed=11), batch_size=batch_size)
    assert prog.mode == ("latency" if batch_size == 1 else "throughput")
    x = om.random_input(shape, 3, seed=5)
    want = om.run_onnxruntime(_model("concat-branches"), x)
    assert _relative_errors(heinfer.infer(prog, x).outputs, want).max() <= 1e-3


def test_compile_accepts_a_dag() -> None:
    from heinfer.compiler import load_onnx_dag

    shape = dm.DAG_MODELS["sub-branches"][1]
    dag = load_onnx_dag(_model("sub-branches"))
    prog = heinfer.compile(dag, calibration=om.random_input(shape, 64, seed=11))
    assert prog.id == _program("sub-branches").id
