"""Latency mode: one item packed across the slots of a few ciphertexts (LoLa, GAZELLE).

Layer: ``heinfer.compiler`` (pure Python + numpy). :mod:`.layout` (the client's gather maps;
placements live in :mod:`heinfer.program.placement`), :mod:`.conv_layouts` (convolution
layouts), :mod:`.kernels` (diagonal, hybrid, naive, expanded input, each a
:class:`~heinfer.program.transform.Transform`: a linear map between layouts lowered to
hoisted rotations and plaintext products, with its numpy simulation and operation counts),
:mod:`.search` (the packing search, priced by :mod:`heinfer.compiler.cost`) and
:mod:`.compile` (graph → a slot-layout :class:`~heinfer.program.Program`; imported on use).
"""

from heinfer.compiler.latency.layout import Placement
from heinfer.program.transform import Transform, build_transform

__all__ = ["Placement", "Transform", "build_transform"]
