"""Exact ciphertext scales of a program, from the real primes.

Layer: ``heinfer.runtime``. The compiler plans with nominal scales (powers of two); the
primes of the chain differ from powers of two, so the scale a segment's outputs really have
is known only with the primes: :func:`exact_output_scales` replays every segment's ops —
a batch-axis linear layer multiplies the scale by its weight scale, a slot-layout one keeps
it (its plaintexts carry the prime it drops), a square squares it, a rescale divides by the
primes it drops — and :func:`set_exact_scales` writes them into the program, so that both
parties check received ciphertexts against exact values.
"""

from __future__ import annotations

from heinfer.program.model import Program
from heinfer.program.ops import DropTo, Linear, Rescale, Square
from heinfer.runtime.executor import native_params

__all__ = ["exact_output_scales", "set_exact_scales"]


def exact_output_scales(program: Program) -> list[float]:
    """The exact scale of every segment's outputs."""
    q = [float(v) for v in native_params(program.params).q]
    # lazy=False programs run only on the baseline server, whose naive kernel encodes the
    # weights at q_ℓ and rescales after each product: linear + its rescale keep the scale
    baseline = not program.meta.get("lazy", True)
    out = []
    for seg in program.segments:
        scale, level = seg.input_scale, seg.input_level
        absorbed = False
        for op in seg.ops:
            if isinstance(op, Linear):
                if seg.layout.kind == "batch" and baseline:
                    absorbed = True  # the next Rescale is the kernel's own (at q_ℓ)
                elif seg.layout.kind == "batch":
                    scale *= program.layers[op.layer].weight_scale
                else:
                    level -= 1  # products at q_ℓ, then a rescale by q_ℓ: the scale is unchanged
            elif isinstance(op, Rescale) and absorbed:
                level -= op.primes
                absorbed = False
            elif isinstance(op, Square):
                scale *= scale
            elif isinstance(op, Rescale):
                for _ in range(op.primes):
                    scale /= q[level]
                    level -= 1
            elif isinstance(op, DropTo):
                level = op.level
        out.append(scale)
    return out


def set_exact_scales(program: Program) -> Program:
    """Writes the exact output scales into ``program`` (validated again) and returns it."""
    for seg, s in zip(program.segments, exact_output_scales(program)):
        seg.output_scale = s
    program.validate()
    return program
