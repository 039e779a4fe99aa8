"""The compiled program: the contract between compiler, runtime and protocol.

Layer: ``heinfer.program`` (imports no compiler, runtime, protocol or service). One program
model for both layouts (:mod:`heinfer.program.model`): segments with an input layout (batch
axis or slots) and typed ops (:mod:`heinfer.program.ops`), steps between them, in two
artifacts — :class:`PublicProgram` for the client (no weights) and :class:`Program` for the
server (with the weights). One versioned, canonical byte format
(:mod:`heinfer.program.format`); :func:`load` returns either kind.
"""

from heinfer.program.format import dump, load
from heinfer.program.functions import ClientFunction, ClientKind
from heinfer.program.model import Layout, Program, PublicProgram, Segment, Step
from heinfer.program.placement import Placement
from heinfer.program.transform import Transform
from heinfer.program.weights import LinearStep

__all__ = [
    "ClientFunction", "ClientKind", "Layout", "LinearStep", "Placement", "Program", "PublicProgram",
    "Segment", "Step", "Transform", "dump", "load",
]
