"""``pools_to_client``: an average pool after a client step becomes the client's sum-pool."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction, Graph, Linear, Square
from heinfer.compiler.pools import pools_to_client, sum_pool_groups


def _pool(n: int = 8, k: int = 2) -> Linear:
    """Average over disjoint windows of ``k`` consecutive elements of ``n``."""
    rows = np.repeat(np.arange(n // k), k)
    m = sp.csr_matrix((np.full(n, 1.0 / k), (rows, np.arange(n))), shape=(n // k, n))
    return Linear("pool", m, np.zeros(n // k), (n,), (n // k,))


def _graph(first) -> Graph:
    rng = np.random.default_rng(0)
    lin = Linear("dense", sp.csr_matrix(rng.normal(size=(3, 4))), rng.normal(size=3), (4,), (3,))
    return Graph("x", (8,), "y", (3,), [first, _pool(), lin])


def _run(g: Graph, x: np.ndarray) -> np.ndarray:
    for op in g.ops:
        x = op.apply(x)
    return x


def test_a_pool_after_a_relu_moves_to_the_client_and_computes_the_same() -> None:
    g = _graph(ClientFunction("relu", "relu", {}, (8,), (8,)))
    moved = pools_to_client(g)
    assert [type(op).__name__ for op in moved.ops] == ["ClientFunction", "ClientFunction", "Linear"]
    assert moved.ops[1].kind == "sumpool"
    np.testing.assert_array_equal(moved.ops[1].groups, np.arange(8).reshape(4, 2))
    x = np.random.default_rng(1).normal(size=(5, 8))
    np.testing.assert_allclose(_run(moved, x), _run(g, x), rtol=1e-12, atol=1e-12)


def test_the_pass_leaves_what_it_must_not_move() -> None:
    # after a server op (a square) the pool stays on the server
    sq = _graph(Square("sq", (8,)))
    assert pools_to_client(sq).ops[1].__class__ is Linear
    # the two-party protocol moves it only after a ReLU (the circuit it is fused into)
    tanh = _graph(ClientFunction("tanh", "tanh", {}, (8,), (8,)))
    assert isinstance(pools_to_client(tanh).ops[1], ClientFunction)
    assert isinstance(pools_to_client(tanh, after=frozenset({"relu"})).ops[1], Linear)
    # a function on a slice of a longer vector (a residual skip beside it): not moved
    sliced = ClientFunction("relu", "relu", {}, (8,), (8,), keep=(4, 0))
    assert isinstance(pools_to_client(_graph(sliced)).ops[1], Linear)


@pytest.mark.parametrize(
    "matrix, bias",
    [
        (sp.csr_matrix(np.array([[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.4]])), np.zeros(2)),  # unequal weights
        (sp.csr_matrix(np.array([[0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0]])), np.zeros(2)),  # overlapping windows
        (sp.csr_matrix(np.array([[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])), np.ones(2)),  # a bias
        (sp.csr_matrix(np.eye(4)), np.zeros(4)),  # windows of one
    ],
)
def test_only_plain_average_pools_are_recognized(matrix, bias) -> None:
    op = Linear("x", matrix, bias, (4,), (matrix.shape[0],))
    assert sum_pool_groups(op) is None
