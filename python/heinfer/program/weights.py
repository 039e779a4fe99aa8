"""The weights of a batch-axis linear layer (server side only).

Layer: ``heinfer.program``. Slot-layout layers keep their weights in a
:class:`~heinfer.program.transform.Transform` (generalized diagonals); batch-axis layers in a
:class:`LinearStep` (a sparse matrix quantized once by the runtime).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["LinearStep"]


@dataclass(eq=False)
class LinearStep:
    """A batch-axis linear layer: ``y = matrix @ x + bias``.

    The runtime quantizes ``matrix`` to integers at ``weight_scale`` (``Δ_w``) once per program
    and evaluates it with ``digits`` digits per residue (see ``heinfer_kernels::linear``).
    """

    name: str
    matrix: sp.csr_matrix
    bias: np.ndarray | None
    weight_scale: float
    digits: int

    @property
    def in_size(self) -> int:
        """Number of inputs."""
        return int(self.matrix.shape[1])

    @property
    def out_size(self) -> int:
        """Number of outputs."""
        return int(self.matrix.shape[0])

    def rows(self, start: int, stop: int) -> LinearStep:
        """Rows ``start:stop`` of the layer (same weight scale and digits, so its outputs are
        exactly those rows of the whole layer's): a tile of the output, or a worker's share."""
        bias = None if self.bias is None else self.bias[start:stop]
        return LinearStep(self.name, self.matrix.tocsr()[start:stop], bias, self.weight_scale, self.digits)
