"""The ``pools_to_client`` pass: an average pool right after a client step runs on the client.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy).

An average pool is linear, so the server could run it, but on slot layouts a pool of stride
``k`` is the worst case of the packing search: its output is a compacted grid, one plaintext
diagonal per output position (MiniONN's CIFAR net: 33,808 diagonals for a 2×2 pool of
64×32×32, against 2,304 for the 3×3 convolution after it). When the pool follows a client
step (a ReLU, a max-pool, …) the client already holds its input in the clear, so it can sum
the windows itself:

.. math:: W\\,\\mathrm{avg}_k(\\mathrm{relu}(x)) = \\tfrac{W}{k}\\,\\mathrm{sum}_k(\\mathrm{relu}(x))

— the pool becomes the client function ``sumpool`` appended to the step and the ``1/k`` moves
into the next linear layer. Nothing new reaches the client (it computes the sums of values it
has decrypted; the pool has no weights), and the next query message carries the pooled
tensor, ``k`` times fewer values. GAZELLE's two-party protocol does the same on its shares.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from heinfer.compiler.ir import ClientFunction, Graph, Linear

__all__ = ["pools_to_client", "sum_pool_groups"]


def sum_pool_groups(op: Linear) -> np.ndarray | None:
    """The windows of an average pool — every row ``j`` equal entries ``1/k`` over columns no
    other row reads, no bias — as an int64 array ``(rows, k)``, or None."""
    m = op.matrix
    k = int(m.indptr[1] - m.indptr[0]) if m.shape[0] else 0
    if k < 2 or np.any(np.diff(m.indptr) != k) or op.bias.any() or not np.allclose(m.data, 1.0 / k, rtol=0, atol=1e-12):
        return None
    groups = m.indices.reshape(-1, k).astype(np.int64)
    return groups if len(np.unique(groups)) == groups.size else None


def pools_to_client(g: Graph, after: frozenset[str] | None = None) -> Graph:
    """``step → average pool → linear`` becomes ``step → sum-pool → linear / k`` (see the
    module documentation). ``after``: the client-function kinds a pool may follow (``None``:
    any function on the whole vector; the two-party protocol passes ``{"relu"}``, the one
    circuit a sum-pool is fused into)."""
    ops = list(g.ops)
    for i in range(1, len(ops) - 1):
        prev, op, nxt = ops[i - 1], ops[i], ops[i + 1]
        if not (isinstance(prev, ClientFunction) and isinstance(op, Linear) and isinstance(nxt, Linear)):
            continue
        if prev.keep != (0, 0) or (after is not None and prev.kind not in after):
            continue
        groups = sum_pool_groups(op)
        if groups is None:
            continue
        k = groups.shape[1]
        ops[i] = ClientFunction(f"{op.name}(sum)", "sumpool", {}, op.in_shape, op.out_shape, groups)
        ops[i + 1] = replace(nxt, matrix=nxt.matrix / k)
    return replace(g, ops=ops)
