"""Graph-shaped networks (``heinfer.compiler.dag`` and the ONNX front end): the DAG's numpy
executor and its lowering to a chain (before and after ``fold_linear``) match onnxruntime on
small DAG models; what cannot be lowered yet is refused with the documented errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from heinfer.compiler import ClientFunction, Combine, Dag, Linear, Node, Square, fold_linear, load_onnx, load_onnx_dag, to_chain
from heinfer.errors import CompileError, UnsupportedOperatorError

from . import dag_models as dm
from . import onnx_models as om
from .onnx_models import ModelBuilder


@pytest.mark.parametrize("name", list(dm.DAG_MODELS))
def test_dag_and_its_chain_match_onnxruntime(name: str) -> None:
    build, shape = dm.DAG_MODELS[name]
    model = build()
    x = om.random_input(shape, 5)
    want = om.run_onnxruntime(model, x)
    dag = load_onnx_dag(model)
    assert dag.is_chain == (name == "transpose")
    np.testing.assert_allclose(dag.run(x), want, rtol=1e-5, atol=1e-5)
    chain = load_onnx(model)
    assert chain.output_shape == want.shape[1:]
    np.testing.assert_allclose(chain.run(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fold_linear(chain).run(x), want, rtol=1e-5, atol=1e-5)


def test_a_square_beside_a_live_tensor_is_client_aided() -> None:
    """x W + x²: the server cannot square x alone (the vector also carries x W), so the
    square is a client step on x's slice; a square of the whole vector stays on the server."""
    chain = fold_linear(load_onnx(dm.linear_and_square()))
    fns = [op for op in chain.ops if isinstance(op, ClientFunction)]
    assert [(f.kind, f.keep) for f in fns] == [("square", (0, 5))]
    assert not any(isinstance(op, Square) for op in chain.ops)
    server = fold_linear(load_onnx(dm.square_then_skip()))
    assert [type(op).__name__ for op in server.ops][:2] == ["Linear", "Square"]


def test_linear_branches_that_meet_fold_into_one_linear() -> None:
    chain = fold_linear(load_onnx(dm.linear_branches_meet()))
    kinds = [type(op).__name__ for op in chain.ops]
    assert kinds == ["Linear", "ClientFunction", "Linear"]
    assert chain.ops[0].matrix.shape == (5, 6)  # (A + B) x: no copy of x survives


def test_residual_block_lowering_carries_the_skip_through_the_client_step() -> None:
    chain = fold_linear(load_onnx(dm.residual_block()))
    kinds = [type(op).__name__ for op in chain.ops]
    assert kinds == ["Linear", "ClientFunction", "Linear", "ClientFunction", "Linear", "Linear"]
    relu = chain.ops[1]
    assert relu.kind == "relu" and relu.keep == (50, 0)  # the skip x (50 values) passes through
    assert chain.ops[0].matrix.shape == (100, 50)
    assert chain.ops[2].matrix.shape == (50, 100)


def test_chain_models_lower_to_the_same_ops() -> None:
    model = om.conv_net()
    dag = load_onnx_dag(model)
    assert dag.is_chain
    chain = load_onnx(model)
    assert [(type(n.op), n.op.name) for n in dag.nodes] == [(type(op), op.name) for op in chain.ops]
    assert all(a is n.op for a, n in zip(to_chain(dag).ops, dag.nodes))


def test_concat_along_channels_is_a_selection() -> None:
    dag = load_onnx_dag(dm.concat_branches())
    (combine,) = [n.op for n in dag.nodes if isinstance(n.op, Combine)]
    assert combine.out_shape == (5, 4, 4)
    assert [b.nnz for b in combine.blocks] == [32, 48]


def test_transpose_is_a_permutation() -> None:
    dag = load_onnx_dag(om.single_node("Transpose", (2, 3, 4), perm=[0, 3, 1, 2]))
    (node,) = dag.nodes
    assert node.op.out_shape == (4, 2, 3)
    m = node.op.matrix
    assert m.nnz == 24 and (m.data == 1).all() and sorted(m.indices) == list(range(24))


def test_transpose_of_the_batch_axis_is_refused() -> None:
    with pytest.raises(UnsupportedOperatorError, match="batch axis"):
        load_onnx(om.single_node("Transpose", (2, 3), perm=[1, 0, 2]))


def test_branches_through_client_functions_compile() -> None:
    b = ModelBuilder((4,))
    r = b.node("Relu", [b.x])
    s = b.node("Sigmoid", [b.x])
    b.node("Add", [r, s])
    model = b.build()
    x = om.random_input((4,), 6)
    chain = load_onnx(model)
    np.testing.assert_allclose(chain.run(x), om.run_onnxruntime(model, x), rtol=1e-5, atol=1e-6)
    assert [type(op).__name__ for op in chain.ops] == ["Linear", "ClientFunction", "ClientFunction", "Linear"]


def test_sum_of_three_branches() -> None:
    b = ModelBuilder((2, 3))
    r = b.node("Relu", [b.x])
    t = b.node("Tanh", [b.x])
    c = b.node("Mul", [b.x, b.const(np.float32(3.0))])
    b.node("Sum", [r, t, c])
    model = b.build()
    x = om.random_input((2, 3), 4)
    np.testing.assert_allclose(load_onnx(model).run(x), om.run_onnxruntime(model, x), rtol=1e-5, atol=1e-6)


def test_product_of_two_computed_tensors_is_refused() -> None:
    b = ModelBuilder((4,))
    r = b.node("Relu", [b.x])
    s = b.node("Sigmoid", [b.x])
    b.node("Mul", [r, s])
    with pytest.raises(UnsupportedOperatorError, match="only Add, Sub, Sum and Concat"):
        load_onnx(b.build())


def test_add_of_different_ranks_is_refused() -> None:
    b = ModelBuilder((2, 3))
    f = b.node("Flatten", [b.x], axis=1)
    g = b.node("Gemm", [f, b.weight(3, 6)], transB=1)
    b.node("Add", [b.node("Relu", [b.x]), g])
    with pytest.raises((UnsupportedOperatorError, CompileError)):
        load_onnx(b.build())


def test_concat_along_the_batch_axis_is_refused() -> None:
    b = ModelBuilder((3,))
    b.node("Concat", [b.node("Relu", [b.x]), b.x], axis=0)
    with pytest.raises(UnsupportedOperatorError, match="batch axis"):
        load_onnx(b.build())


def test_dag_validation() -> None:
    lin = Linear("l", sp.identity(3), np.zeros(3), (3,), (3,))
    with pytest.raises(CompileError, match="no earlier node"):
        Dag("x", (3,), "y", (3,), [Node(lin, ("z",), "y")])
    with pytest.raises(CompileError, match="defined twice"):
        Dag("x", (3,), "y", (3,), [Node(lin, ("x",), "y"), Node(lin, ("x",), "y")])
    with pytest.raises(CompileError, match="takes 2 inputs"):
        Dag("x", (3,), "y", (3,), [Node(Combine("c", (sp.identity(3), sp.identity(3)), np.zeros(3), ((3,), (3,)), (3,)), ("x",), "y")])
    with pytest.raises(CompileError, match="undefined"):
        Dag("x", (3,), "w", (3,), [Node(lin, ("x",), "y")])


def test_partial_client_function_keeps_the_rest() -> None:
    f = ClientFunction("r", "relu", {}, (7,), (7,), keep=(2, 1))
    x = np.array([[-1.0, -2.0, -3.0, 4.0, -5.0, 6.0, -7.0]])
    np.testing.assert_array_equal(f.apply(x), [[-1.0, -2.0, 0.0, 4.0, 0.0, 6.0, -7.0]])
    with pytest.raises(CompileError, match="leaves no values"):
        ClientFunction("r", "relu", {}, (3,), (3,), keep=(2, 1))
    with pytest.raises(CompileError, match="non-negative"):
        ClientFunction("r", "relu", {}, (3,), (3,), keep=(-1, 1))


def test_square_beside_a_live_tensor_lowers_to_a_client_square() -> None:
    sq = Square("s", (3,))
    lin = Linear("l", sp.identity(3), np.ones(3), (3,), (3,))
    add = Combine("a", (sp.identity(3), sp.identity(3)), np.zeros(3), ((3,), (3,)), (3,))
    dag = Dag("x", (3,), "y", (3,), [Node(lin, ("x",), "t"), Node(sq, ("x",), "s"), Node(add, ("t", "s"), "y")])
    x = np.array([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(dag.run(x), [[3.0, 7.0, 13.0]])
    chain = to_chain(dag)
    np.testing.assert_allclose(chain.run(x), [[3.0, 7.0, 13.0]])
    assert [(op.kind, op.keep) for op in chain.ops if isinstance(op, ClientFunction)] == [("square", (0, 3))]


@st.composite
def _random_dags(draw: st.DrawFn) -> Dag:
    """A random DAG on vectors of 3 values: Linear, Square, relu/maxpool client functions and
    two-input Combines reading any earlier tensors."""
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    names = ["x"]
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        kind = draw(st.sampled_from(["linear", "square", "relu", "maxpool", "add"]))
        a = draw(st.sampled_from(names))
        out = f"t{i}"
        if kind == "linear":
            op = Linear(out, rng.normal(size=(3, 3)), rng.normal(size=3), (3,), (3,))
        elif kind == "square":
            op = Square(out, (3,))
        elif kind == "relu":
            op = ClientFunction(out, "relu", {}, (3,), (3,))
        elif kind == "maxpool":
            op = ClientFunction(out, "maxpool", {}, (3,), (3,), np.array([[0, 1], [1, 2], [2, -1]]))
        else:
            b = draw(st.sampled_from(names))
            op = Combine(out, (rng.normal(size=(3, 3)), sp.identity(3)), np.zeros(3), ((3,), (3,)), (3,))
            nodes.append(Node(op, (a, b), out))
            names.append(out)
            continue
        nodes.append(Node(op, (a,), out))
        names.append(out)
    return Dag("x", (3,), names[-1], (3,), nodes)


@settings(max_examples=150, deadline=None)
@given(_random_dags())
def test_random_dags_lower_to_equivalent_chains(dag: Dag) -> None:
    x = np.random.default_rng(0).normal(size=(4, 3))
    want = dag.run(x)
    chain = to_chain(dag)
    scale = 1.0 + np.abs(want).max()
    np.testing.assert_allclose(chain.run(x), want, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(fold_linear(chain).run(x), want, rtol=1e-7, atol=1e-7 * scale)
