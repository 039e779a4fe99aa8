"""The slot layout (latency mode) in :func:`heinfer.compiler.simulate.simulate`, exactly.

Layer: ``heinfer.compiler`` (reads a :class:`~heinfer.program.Program`; no keys, no engine).
One segment of a latency-mode program on every item at once, in float64, as
:class:`heinfer.runtime.slots.PreparedSlots` runs it but with nothing rounded: the client
places each item's values with the segment's gather map (as
``heinfer.protocol.layouts.input_rows`` does), each linear layer runs its
:class:`~heinfer.program.transform.Transform` (replications, baby and giant steps, folds,
bias) on the slot vectors, squares square, and the outputs are read at the segment's output
placement. It checks a compiled plan — its layouts, diagonals and rotations — against the
model without keys, in milliseconds.

The errors of an encrypted run are not modelled for this layout yet: the diagonals' encoding,
the key switches of the rotations and the rescales, drawn from a first model of them, gave
the spread of the encrypted runs on CryptoNets and CryptoNets-ReLU within 2× but 4–10× too
little on LoLa-Small (2026-11-27), so :func:`~heinfer.compiler.simulate.simulate` refuses
``errors=True`` on such a program rather than understate its error.
"""

from __future__ import annotations

import numpy as np

from heinfer.errors import NotSupportedYetError
from heinfer.program.model import Program, Segment
from heinfer.program.ops import DropTo, Linear, Relinearize, Rescale, Square
from heinfer.program.transform import Transform

__all__ = ["slot_segment"]


def slot_segment(program: Program, seg: Segment, y: np.ndarray) -> np.ndarray:
    """Segment ``seg`` on values ``y`` ``(items, in_size)`` → ``(items, out_size)``, nothing
    rounded."""
    g = seg.layout.gather
    x = np.where(g >= 0, y[:, np.maximum(g, 0)], 0.0)  # (items, input ciphertexts, S)
    for i, op in enumerate(seg.ops):
        if tuple(op.inputs) != (i,):
            raise NotSupportedYetError(f"simulating op {i} of a segment: it reads values {tuple(op.inputs)}, only chains are supported yet")
        if isinstance(op, Linear):
            x = _transform(program.layers[op.layer], x)
        elif isinstance(op, Square):
            x = x * x
        elif not isinstance(op, (Relinearize, Rescale, DropTo)):  # these change no value
            raise NotSupportedYetError(f"simulating a {type(op).__name__} op in the slot layout is not supported yet")
    return seg.output.gather(x)


def _transform(t: Transform, x: np.ndarray) -> np.ndarray:
    """:meth:`Transform.simulate` on every item of ``x`` ``(items, n_in, S)`` at once:
    ``(items, n_out, S)``, fold and bias included."""
    for r in t.replicate:
        x = x + np.roll(x, -r, axis=2)
    out = np.zeros((x.shape[0], t.n_out, t.slots))
    for o, gs, ix in t.groups():
        acc = np.zeros((x.shape[0], t.slots))
        for i in ix:
            _, _, a, b = t.terms[i]
            acc += t.vectors[i] * np.roll(x[:, int(a)], -int(b), axis=1)
        out[:, o] += np.roll(acc, -int(gs), axis=1)
    for s in t.fold:
        out = out + np.roll(out, -s, axis=2)
    return out if t.bias is None else out + t.bias
