"""The heinfer compiler: ONNX (or PyTorch) model → IR → passes → program.

Layer: ``heinfer.compiler``, pure Python + numpy + scipy; it never imports the native module
(``heinfer._native``) nor ``heinfer.ckks``.

* :mod:`.ir` — the IR: a :class:`Graph` is a chain of :class:`Linear`, :class:`Square` and
  :class:`ClientFunction` ops on flattened per-item tensors, with a numpy reference executor;
* :mod:`.dag` — graph-shaped networks: a :class:`Dag` of named tensors (branches, residual
  additions, concatenations: :class:`Combine`) and :func:`to_chain`, its lowering to a chain;
* :mod:`.onnx_import` (+ :mod:`.onnx_node`, :mod:`.onnx_ops`, :mod:`.onnx_windows`, :mod:`.onnx_combine`) — :func:`load_onnx`,
  :func:`load_onnx_dag` and :func:`from_torch`;
* :mod:`.fuse` — :func:`fold_linear`, which merges adjacent linear ops.

>>> import numpy as np, scipy.sparse as sp
>>> g = Graph("x", (2,), "y", (2,), [Linear("scale", sp.diags([2.0, 3.0]), np.zeros(2), (2,), (2,)),
...                                  Square("sq", (2,))])
>>> g.run(np.array([[1.0, 1.0]])).tolist()
[[4.0, 9.0]]
"""

from heinfer.compiler.dag import Combine, Dag, Node, to_chain
from heinfer.compiler.fuse import fold_linear, linear_nnz
from heinfer.compiler.ir import ClientFunction, ClientKind, Graph, Linear, Square
from heinfer.compiler.onnx_import import from_torch, load_onnx, load_onnx_dag

__all__ = [
    "ClientFunction",
    "ClientKind",
    "Combine",
    "Dag",
    "Graph",
    "Linear",
    "Node",
    "Square",
    "fold_linear",
    "from_torch",
    "linear_nnz",
    "load_onnx",
    "load_onnx_dag",
    "to_chain",
]
