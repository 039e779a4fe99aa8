"""The compiled program: the contract between compiler, runtime and protocol.

A :class:`Program` holds everything a client and a server need and nothing secret: the CKKS
parameters, the packing, the instructions of every server segment (with the weights of its
linear layers), the client steps between segments, the key manifest, and the ranges and
errors the compiler predicted. Latency mode has its own :class:`LatencyProgram` (layouts and
lowered kernels instead of batch-axis instructions) in the same archive format. It is versioned and validated when loaded from bytes
(:meth:`Program.to_bytes` / :func:`load`).
"""

from heinfer.program.latency import LatencyProgram, LatencySegment, LatencyStep
from heinfer.program.model import ClientStep, Instr, LinearStep, Program, Segment
from heinfer.program.serialize import load

__all__ = ["LatencyProgram", "LatencySegment", "LatencyStep", "ClientStep", "Instr", "LinearStep", "Program", "Segment", "load"]
