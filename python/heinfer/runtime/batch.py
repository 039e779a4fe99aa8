"""Running a batch-axis segment on a batch of ciphertexts (server side).

Layer: ``heinfer.runtime``. One native call per op over all ciphertexts; squares, rescales,
relinearizations and drops work in place; a square followed by a linear layer is fused into
it (the squared ciphertexts are never stored), and linear → square → linear runs as one
kernel (CryptoNets' conv → x² → dense never stores its intermediates).
"""

from __future__ import annotations

import numpy as np

from heinfer import _native
from heinfer.program.model import Segment, op_parts
from heinfer.program.ops import DropTo, Linear, Rescale, Square
from heinfer.program.weights import LinearStep
from heinfer.runtime.linear import PreparedLinear
from heinfer.runtime.tiles import TiledOutput, apply_elementwise, tile_rows

__all__ = ["peak_ciphertext_bytes", "run_batch_segment"]


def run_batch_segment(
    seg: Segment,
    batch: _native.CiphertextBatch,
    layers: list,
    built: dict[int, tuple],
    relin_key: _native.RelinKey | None,
    baseline: bool = False,
    tiles: tuple[int, list] | None = None,
) -> _native.CiphertextBatch | TiledOutput:
    """Executes ``seg.ops`` on ``batch`` (consumed) and returns the segment's output batch.

    ``built[layer] = (native layer, bias)``: the weights quantized once per program.
    ``baseline`` runs linear layers with the naive kernel (a general plaintext product per
    weight, a rescale after each: nGraph-HE2's starting point, for benchmarks). ``tiles``
    (:func:`~heinfer.runtime.tiles.plan_tiles`): the segment stops before the op it names
    and returns a :class:`~heinfer.runtime.tiles.TiledOutput`, which computes that linear
    layer and the ops after it tile by tile when serialized."""
    packing = seg.layout.packing
    ops = seg.ops
    skip_rescale = False
    fuse = False
    i = 0
    while i < len(ops):
        op = ops[i]
        i += 1
        if not baseline and _is_chain(layers, ops, i - 1) and batch.size == 2:
            (l1, b1), (l2, b2) = built[op.layer], built[ops[i + 1].layer]
            batch = _native.square_chain(l1, l2, batch, b1, b2, packing)
            i += 2
            continue
        if isinstance(op, Square) and not baseline and i < len(ops) and isinstance(ops[i], Linear) and batch.size <= 3:
            fuse = True  # the next linear layer squares its inputs (2 or 3 parts) on the fly
            continue
        if tiles is not None and i - 1 == tiles[0] and not baseline:
            return TiledOutput(batch, tiles[1], packing, fuse, ops[i:], relin_key)
        if isinstance(op, Linear):
            step = layers[op.layer]
            if baseline:
                bias = step.bias if step.bias is not None else np.zeros(step.out_size)
                batch = _native.naive_linear_rows(batch, step.matrix.toarray(), bias, list(range(step.out_size)), step.weight_scale, True)
                skip_rescale = True
                continue
            layer, bias = built[op.layer]
            batch = layer.apply(batch, bias, packing, fuse)
            fuse = False
        elif isinstance(op, Rescale) and skip_rescale:
            skip_rescale = False
            continue
        else:
            apply_elementwise(op, batch, relin_key)
        skip_rescale = skip_rescale and isinstance(op, Linear)
    return batch


def build_layers(layers: list, which: set[int] | None = None) -> dict[int, tuple]:
    """Every batch-axis layer (of the indices ``which``, default all) quantized for the
    native kernel, once per program."""
    return {i: PreparedLinear(lay).build() for i, lay in enumerate(layers) if isinstance(lay, LinearStep) and (which is None or i in which)}


def _is_chain(layers: list, ops: list, i: int) -> bool:
    """Whether ops ``i, i+1, i+2`` are linear → square → linear with one digit each."""
    if i + 2 >= len(ops) or not (isinstance(ops[i], Linear) and isinstance(ops[i + 1], Square) and isinstance(ops[i + 2], Linear)):
        return False
    return layers[ops[i].layer].digits == 1 and layers[ops[i + 2].layer].digits == 1


def peak_ciphertext_bytes(seg: Segment, layers: list, log_n: int, tiled: bool = True) -> int:
    """The most bytes of ciphertexts a batch-axis segment holds at once: over its linear
    layers, the input tensor plus the output tensor (one ciphertext per element, 2, 3 or 5
    polynomials of ``ℓ + 1`` residue vectors of ``N`` words each), and its input alone; a
    last layer computed in tiles (:func:`~heinfer.runtime.tiles.tile_rows`; ``tiled=False``:
    as if it were not) counts two tiles, not its whole output. This is what a query needs
    whatever its number of items."""
    n = 1 << log_n
    level, parts, count = seg.input_level, 2, seg.in_size
    peak = count * parts * (level + 1) * n * 8
    found = tile_rows(seg, layers, log_n) if tiled else None
    for i, (op, after) in enumerate(zip(seg.ops, op_parts(seg.ops))):
        if isinstance(op, Linear):
            out = layers[op.layer].out_size
            if found is not None and i == found[0]:
                out = min(out, 2 * found[1])
            peak = max(peak, (count * parts + out * after) * (level + 1) * n * 8)
            count = out
        elif isinstance(op, Rescale):
            level -= op.primes
        elif isinstance(op, DropTo):
            level = op.level
        parts = after
    return peak
