"""Aligned grid placements: strided layers without compaction.

Layer: ``heinfer.compiler`` (pure numpy). The dense placement of a ``(C, H, W)`` tensor puts
its rows ``W`` slots apart. A layer of stride ``s`` (a strided convolution, a pooling, the
``1×1`` stride-2 projection of a residual shortcut) reads input ``(y·s + i, x·s + j)`` for
output ``(y, x)``; with both tensors dense the offset between them changes with every output
position, so the map has one plaintext diagonal per output position and channel pair
(ResNet-20's first stride-2 block: 32,772 diagonals against 580 for a stride-1 block).

An **aligned** placement keeps every tensor of a segment on the segment's finest grid
``Hf × Wf`` (its largest input): channel ``c`` of the tensors, counted across the parts one
after the other, is block ``c`` of ``B = 2^⌈log2(Hf·Wf)⌉`` slots (``S / B`` blocks per
ciphertext, or ``B / S`` ciphertexts per block; ``B = Hf·Wf`` is the other candidate), and
element ``(y, x)`` of a part of size ``H × W`` sits at ``(y·sy)·Wf + x·sx`` of its block
with ``sy ≈ Hf / H`` and ``sx ≈ Wf / W`` (packing-configurations §IV-A1's *direct*
output, not compacted). Every strided layer is then a
translation per channel pair, at the price of ``s²`` times more ciphertexts downstream. The
packing search prices both placements for every layer output and for the segment's input
(the client lays its input out as it likes), and keeps the cheaper; a client step compacts
again for free, since the client re-encrypts the next segment's layout.
"""

from __future__ import annotations

import math

import numpy as np

from heinfer.program.placement import Placement

__all__ = ["aligned", "candidates", "finest", "same", "tensor_parts"]


def tensor_parts(shape: tuple[int, ...], parts: tuple[tuple[int, ...], ...] = ()) -> tuple[tuple[int, ...], ...]:
    """The tensors a flat vector holds: ``parts`` if given, else the one tensor ``shape``."""
    return tuple(parts) if parts else (tuple(shape),)


def finest(parts: tuple[tuple[int, ...], ...]) -> tuple[int, int] | None:
    """``(Hf, Wf)``: the largest height and width among ``(C, H, W)`` parts, or ``None`` when
    a part is not an image (a flat vector has no grid)."""
    if not parts or any(len(p) != 3 for p in parts):
        return None
    return max(p[1] for p in parts), max(p[2] for p in parts)


def _stride(fine: int, n: int) -> int:
    """The data stride of ``n`` positions on a line of ``fine``: ``≈ fine / n``, at most the
    largest that keeps position ``n − 1`` on the line."""
    s = max(1, round(fine / n))
    while s > 1 and (n - 1) * s >= fine:
        s -= 1
    return s


def aligned(
    parts: tuple[tuple[int, ...], ...], fine: tuple[int, int] | None, slots: int, pow2: bool = True
) -> Placement | None:
    """The aligned placement of ``parts`` on the grid ``fine`` (module documentation), or
    ``None`` where there is none (a flat part, a part larger than the grid).

    Positions are global, ``G = ct·S + slot``: channel block ``k`` starts at ``G = k·B``, so
    a grid larger than a ciphertext (a 96×96 image in 4,096 slots) spans several and a
    translation by ``δ`` still reads, for each output ciphertext, one diagonal ``δ mod S`` of
    at most two input ciphertexts. ``B`` is ``2^⌈log2(Hf·Wf)⌉`` (``pow2``: every channel
    difference is the same diagonal) or ``Hf·Wf`` (no empty slots, a diagonal per channel
    difference modulo ``S``)."""
    if fine is None or any(len(p) != 3 for p in parts):
        return None
    hf, wf = fine
    block = 1 << max(0, math.ceil(math.log2(hf * wf))) if pow2 else hf * wf
    cts, pos, base = [], [], 0
    for c_n, h, w in parts:
        if h > hf or w > wf:
            return None
        sy, sx = _stride(hf, h), _stride(wf, w)
        c, y, x = np.indices((c_n, h, w), dtype=np.int64).reshape(3, -1)
        g = (base + c) * block + y * sy * wf + x * sx
        cts.append(g // slots)
        pos.append(g % slots)
        base += c_n
    return Placement(-(-base * block // slots), slots, np.concatenate(cts), np.concatenate(pos))


def candidates(parts: tuple[tuple[int, ...], ...], fine: tuple[int, int] | None, slots: int) -> list[Placement]:
    """The aligned placements of ``parts`` that differ from the dense one and from each other
    (power-of-two blocks first)."""
    found: list[Placement] = []
    for pow2 in (True, False):
        p = aligned(parts, fine, slots, pow2)
        if p is not None and not same(p, Placement.dense(p.size, slots)) and not any(same(p, q) for q in found):
            found.append(p)
    return found


def same(a: Placement, b: Placement) -> bool:
    """Whether two placements put every element in the same slot."""
    return a.n_cts == b.n_cts and a.slots == b.slots and np.array_equal(a.ct, b.ct) and np.array_equal(a.slot, b.slot)
