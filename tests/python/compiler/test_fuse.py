"""Golden before/after tests of the ``fold_linear`` pass, and the IR invariants it relies on."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler import (
    ClientFunction,
    Graph,
    Linear,
    Square,
    fold_linear,
    linear_nnz,
    load_onnx,
)
from heinfer.errors import CompileError

from . import onnx_models as om
from .onnx_models import ModelBuilder

RNG = np.random.default_rng(3)


def _dense(name: str, rows: int, cols: int) -> Linear:
    return Linear(
        name, sp.csr_matrix(RNG.normal(size=(rows, cols))), RNG.normal(size=rows), (cols,), (rows,)
    )


def _graph(ops: list, n_in: int, n_out: int) -> Graph:
    return Graph("x", (n_in,), "y", (n_out,), ops)


def _same_outputs(a: Graph, b: Graph) -> None:
    x = RNG.normal(size=(4, *a.input_shape))
    np.testing.assert_allclose(b.run(x), a.run(x), rtol=1e-12, atol=1e-12)


def _kinds(g: Graph) -> list[str]:
    return [type(op).__name__ for op in g.ops]


def test_conv_avgpool_flatten_gemm_folds_to_one_linear() -> None:
    model = om.conv_net(act=None, pool="avg")
    graph = load_onnx(model)
    assert _kinds(graph) == ["Linear", "Linear", "Linear"]
    folded = fold_linear(graph)
    assert _kinds(folded) == ["Linear"]
    (op,) = folded.ops
    assert op.name == "+".join(o.name for o in graph.ops)
    assert op.in_shape == (1, 8, 8) and op.out_shape == (10,)
    _same_outputs(graph, folded)
    x = om.random_input((1, 8, 8))
    np.testing.assert_allclose(folded.run(x), om.run_onnxruntime(model, x), rtol=1e-5, atol=1e-5)


def test_conv_batchnorm_folds_into_conv() -> None:
    graph = load_onnx(om.conv_net(batchnorm=True, act="relu"))
    folded = fold_linear(graph)
    assert _kinds(graph) == ["Linear", "Linear", "ClientFunction", "Linear"]
    assert _kinds(folded) == ["Linear", "ClientFunction", "Linear"]
    assert folded.ops[0].nnz == graph.ops[0].nnz  # a diagonal factor adds no entries
    _same_outputs(graph, folded)


def test_conv_square_gemm_keeps_three_ops() -> None:
    graph = load_onnx(om.conv_net(act="square"))
    folded = fold_linear(graph)
    assert _kinds(folded) == ["Linear", "Square", "Linear"]
    assert [op.name for op in folded.ops] == [op.name for op in graph.ops]
    _same_outputs(graph, folded)


def test_identity_linear_is_removed() -> None:
    ident = Linear("id", sp.identity(3, format="csr"), np.zeros(3), (3,), (3,))
    graph = _graph([Square("sq", (3,)), ident, ClientFunction("r", "relu", {}, (3,), (3,))], 3, 3)
    folded = fold_linear(graph)
    assert _kinds(folded) == ["Square", "ClientFunction"]
    _same_outputs(graph, folded)


def test_identity_from_onnx_add_zero_and_mul_one() -> None:
    b = ModelBuilder((2, 3))
    b.node("Relu", [b.x])
    b.node("Mul", [b.last, b.const(1.0)])
    b.node("Add", [b.last, b.const(np.zeros(3))])
    graph = load_onnx(b.build())
    assert _kinds(graph) == ["ClientFunction", "Linear"]
    assert _kinds(fold_linear(graph)) == ["ClientFunction"]


def test_non_identity_is_kept() -> None:
    shift = Linear("shift", sp.identity(3, format="csr"), np.ones(3), (3,), (3,))
    assert _kinds(fold_linear(_graph([shift], 3, 3))) == ["Linear"]


def test_nnz_rule_merges_when_product_is_sparse_enough() -> None:
    first, second = _dense("a", 20, 4), _dense("b", 5, 20)  # product 5×4: 20 ≤ 80 + 100
    graph = _graph([first, second], 4, 5)
    folded = fold_linear(graph)
    assert [op.name for op in folded.ops] == ["a+b"]
    assert linear_nnz(folded) == 20 < linear_nnz(graph) == 180
    _same_outputs(graph, folded)


def test_nnz_rule_keeps_a_low_rank_pair() -> None:
    first, second = _dense("a", 2, 50), _dense("b", 50, 2)  # product 50×50: 2500 > 100 + 100
    graph = _graph([first, second], 50, 50)
    folded = fold_linear(graph)
    assert [op.name for op in folded.ops] == ["a", "b"]


def test_nnz_rule_merges_a_selection_even_when_denser() -> None:
    # second copies each of the 2 values 25 times: one non-zero per row, so merge anyway
    first = _dense("a", 2, 50)
    select = Linear(
        "sel",
        sp.csr_matrix((np.ones(50), (np.arange(50), np.arange(50) % 2)), shape=(50, 2)),
        np.zeros(50),
        (2,),
        (50,),
    )
    graph = _graph([first, select], 50, 50)
    folded = fold_linear(graph)
    assert [op.name for op in folded.ops] == ["a+sel"]
    _same_outputs(graph, folded)


def test_greedy_chain_of_three() -> None:
    ops = [_dense("a", 2, 50), _dense("b", 50, 2), _dense("c", 3, 50)]
    folded = fold_linear(_graph(ops, 50, 3))
    assert [op.name for op in folded.ops] == ["a", "b+c"]
    _same_outputs(_graph(ops, 50, 3), folded)


def test_input_graph_is_not_mutated_and_pass_is_idempotent() -> None:
    graph = load_onnx(om.conv_net(act=None, pool="avg"))
    before = list(graph.ops)
    matrices = [op.matrix.copy() for op in graph.ops]
    once = fold_linear(graph)
    assert graph.ops == before and once is not graph
    for op, m in zip(graph.ops, matrices):
        assert (op.matrix != m).nnz == 0
    twice = fold_linear(once)
    assert [op.name for op in twice.ops] == [op.name for op in once.ops]


def test_linear_nnz_and_summary() -> None:
    graph = load_onnx(om.cryptonets())
    assert linear_nnz(graph) == sum(op.matrix.nnz for op in graph.ops if isinstance(op, Linear))
    lines = graph.summary().splitlines()
    assert len(lines) == len(graph.ops) + 2 and "nnz=" in lines[1] and "Square" in lines[2]


# ---- IR invariants ------------------------------------------------------------------------


def test_linear_validates_shapes() -> None:
    with pytest.raises(CompileError, match="matrix has shape"):
        Linear("l", sp.csr_matrix((3, 4)), np.zeros(3), (5,), (3,))
    with pytest.raises(CompileError, match="bias"):
        Linear("l", sp.csr_matrix((3, 4)), np.zeros(2), (4,), (3,))
    with pytest.raises(CompileError, match="non-finite"):
        Linear("l", sp.csr_matrix((3, 4)), np.full(3, np.nan), (4,), (3,))


def test_linear_is_canonical() -> None:
    m = sp.coo_matrix(([1.0, 2.0, 0.0], ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
    op = Linear("l", m, np.zeros(2), (2,), (2,))
    assert isinstance(op.matrix, sp.csr_matrix) and op.matrix.dtype == np.float64
    assert op.nnz == 1 and op.matrix[0, 1] == 3.0


def test_client_function_validates() -> None:
    with pytest.raises(CompileError, match="unknown kind"):
        ClientFunction("f", "gelu", {}, (3,), (3,))
    with pytest.raises(CompileError, match="groups"):
        ClientFunction("f", "softmax", {}, (4,), (4,), np.array([[0, 1], [1, 2]]))
    with pytest.raises(CompileError, match="groups"):
        ClientFunction("f", "maxpool", {}, (4,), (1,), np.array([[-1, -1]]))


def test_client_function_apply() -> None:
    x = np.array([[-2.0, -0.5, 0.5, 3.0]])
    pool = ClientFunction("p", "maxpool", {}, (4,), (2,), np.array([[0, 1, -1], [2, 3, 1]]))
    np.testing.assert_array_equal(pool.apply(x), [[-0.5, 3.0]])
    soft = ClientFunction("s", "softmax", {}, (4,), (4,), np.array([[0, 2], [1, 3]]))
    y = soft.apply(x)
    np.testing.assert_allclose([y[0, [0, 2]].sum(), y[0, [1, 3]].sum()], [1, 1])
    np.testing.assert_allclose(y[0, 2] / y[0, 0], np.exp(0.5 + 2.0))
    clip = ClientFunction("c", "clip", {"min": -1, "max": None}, (4,), (4,))
    np.testing.assert_array_equal(clip.apply(x), [[-1.0, -0.5, 0.5, 3.0]])
    leaky = ClientFunction("l", "leaky_relu", {"alpha": 0.1}, (4,), (4,))
    np.testing.assert_allclose(leaky.apply(x), [[-0.2, -0.05, 0.5, 3.0]])
    assert leaky.positively_homogeneous and not clip.positively_homogeneous


def test_graph_validates_sizes() -> None:
    with pytest.raises(CompileError, match="takes"):
        _graph([Square("sq", (4,))], 3, 4)
    with pytest.raises(CompileError, match="output"):
        _graph([Square("sq", (3,))], 3, 4)
    with pytest.raises(CompileError, match="not a Linear"):
        _graph(["relu"], 3, 3)
    g = _graph([Square("sq", (2, 3))], 6, 6)  # shapes may differ by a (free) reshape
    with pytest.raises(CompileError, match="input has shape"):
        g.run(np.zeros((1, 5)))
