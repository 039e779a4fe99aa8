"""Latency mode: one item packed across the slots of a few ciphertexts (LoLa, GAZELLE).

Layer: ``heinfer.compiler`` (pure Python + numpy). :mod:`.layout` (where elements live),
:mod:`.transform` (a linear map between layouts lowered to hoisted rotations and plaintext
products, with its numpy simulation and operation counts), :mod:`.kernels` (diagonal,
hybrid, naive, expanded input), :mod:`.cost` (the cost model), :mod:`.search` (the packing
search) and :mod:`.compile` (graph → :class:`~heinfer.program.latency.LatencyProgram`; imported on use, as it builds
programs and the program layer imports the pure-data modules of this package).
"""

from heinfer.compiler.latency.layout import Placement
from heinfer.program.transform import Transform, build_transform

__all__ = ["Placement", "Transform", "build_transform"]
