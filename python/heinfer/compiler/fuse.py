"""The ``fold_linear`` pass: merge adjacent Linear ops and drop identities.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy).

Two affine maps in a row are one affine map,

.. math:: A_2 (A_1 x + b_1) + b_2 = (A_2 A_1)\\,x + (A_2 b_1 + b_2),

which saves a rescale level and a round of rotations under CKKS when the product stays sparse
(a convolution followed by average pooling, batch normalization folded into a convolution, a
padding folded into the next layer). A dense low-rank product, however, can cost far more than
its factors, so the pass merges only when

* ``nnz(A2 A1) <= nnz(A1) + nnz(A2)``, or
* either factor holds at most one non-zero per row (diagonal, permutation or selection:
  scaling, batch normalization, padding), whose product is never denser than the other factor
  by more than a row-wise copy.

Linear ops that are exact identities (identity matrix, zero bias) are removed. The pass returns
a new :class:`~.ir.Graph` and never mutates its input.
"""

from __future__ import annotations

import numpy as np

from heinfer.compiler.ir import Graph, Linear

__all__ = ["fold_linear", "is_identity", "linear_nnz", "merge_linear"]


def _at_most_one_per_row(op: Linear) -> bool:
    return bool(np.diff(op.matrix.indptr).max(initial=0) <= 1)


def merge_linear(first: Linear, second: Linear, force: bool = False) -> Linear | None:
    """``second ∘ first`` as one Linear, or None when the merge rule says keep both.

    ``force=True`` merges regardless of the nnz rule.
    """
    product = (second.matrix @ first.matrix).tocsr()
    product.eliminate_zeros()
    sparse_enough = product.nnz <= first.nnz + second.nnz
    if not (force or sparse_enough or _at_most_one_per_row(first) or _at_most_one_per_row(second)):
        return None
    bias = second.matrix @ first.bias + second.bias
    return Linear(f"{first.name}+{second.name}", product, bias, first.in_shape, second.out_shape, first.in_parts, second.out_parts)


def is_identity(op: object) -> bool:
    """True when ``op`` is a Linear with an identity matrix and a zero bias."""
    if not isinstance(op, Linear):
        return False
    m, n = op.matrix, op.matrix.shape[0]
    return (
        m.shape[1] == n
        and m.nnz == n
        and np.array_equal(m.indices, np.arange(n))
        and bool((m.data == 1.0).all())
        and not op.bias.any()
    )


def fold_linear(graph: Graph) -> Graph:
    """Merge adjacent Linear ops (by the rule in the module docstring) and drop identities.

    Merged ops are named by joining their names with ``'+'``. Returns a new Graph with the
    same input and output; ``graph`` is left unchanged.
    """
    ops: list = []
    for op in graph.ops:
        if isinstance(op, Linear) and ops and isinstance(ops[-1], Linear):
            merged = merge_linear(ops[-1], op)
            if merged is not None:
                ops[-1] = merged
                continue
        ops.append(op)
    ops = [op for op in ops if not is_identity(op)]
    return Graph(graph.input_name, graph.input_shape, graph.output_name, graph.output_shape, ops)


def linear_nnz(graph: Graph) -> int:
    """Total number of stored non-zeros over the Linear ops of ``graph``."""
    return sum(op.nnz for op in graph.ops if isinstance(op, Linear))
