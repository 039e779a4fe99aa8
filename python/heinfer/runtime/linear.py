"""Preparing a :class:`~heinfer.program.weights.LinearStep` for the native kernel.

Layer: ``heinfer.runtime``. The kernel takes a layer as groups of output rows that read the
same inputs (one convolution window for every output channel, or all inputs of a dense
layer); the grouping and the quantization at the layer's weight scale happen once per program.
"""

from __future__ import annotations

import numpy as np

from heinfer import _native
from heinfer.program.weights import LinearStep

__all__ = ["PreparedLinear"]


class PreparedLinear:
    """A linear layer grouped by shared input support, ready to quantize."""

    def __init__(self, step: LinearStep) -> None:
        m = step.matrix.tocsr()
        m.sort_indices()
        self.step = step
        self.data = m.data
        groups: dict[bytes, list[int]] = {}
        for r in range(m.shape[0]):
            cols = m.indices[m.indptr[r] : m.indptr[r + 1]]
            if len(cols):
                groups.setdefault(cols.astype(np.uint32).tobytes(), []).append(r)
        self.groups = []
        for key, rows in groups.items():
            cols = np.frombuffer(key, dtype=np.uint32)
            gather = np.concatenate([np.arange(m.indptr[r], m.indptr[r + 1]) for r in rows])
            self.groups.append((np.array(rows, dtype=np.uint32), cols.copy(), gather.reshape(len(rows), len(cols))))

    def build(self) -> tuple[_native.LinearLayer, np.ndarray | None]:
        """The native layer: ``W`` quantized at the layer's weight scale, and the bias."""
        q = np.rint(self.data * self.step.weight_scale)
        groups = [(rows, cols, np.ascontiguousarray(q[g])) for rows, cols, g in self.groups]
        layer = _native.LinearLayer(self.step.out_size, self.step.in_size, groups, self.step.weight_scale, self.step.digits)
        return layer, self.step.bias
