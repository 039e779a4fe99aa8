"""A segment's output in tiles of rows, computed when asked for (throughput mode, server side).

Layer: ``heinfer.runtime``. A batch-axis segment holds one ciphertext per tensor element; its
last linear layer may produce more ciphertexts than fit in memory (MobileNetV2-0.35 at 96 px
expands to 48 channels at 48×48: 110,592 ciphertexts, 14.5 GB at N = 2^12 with two primes).
The executor then stops before that layer and returns a :class:`TiledOutput`: the layer's
input and the layer cut into tiles of consecutive output rows (each a
:class:`~heinfer.program.weights.LinearStep` of those rows, quantized once per program, so a
tile's ciphertexts are exactly those rows of the whole layer's). ``to_bytes(start, stop)``
computes the tiles that hold rows ``start:stop``, applies the segment's element-wise ops
that follow the layer (square, relinearization, rescale, drop), serializes, and forgets the
tiles the protocol will not ask for again: the protocol server sends a step in chunks, in
order, so at most two tiles and one chunk's bytes are in memory besides the layer's input.

The cost: every tile reads the whole input again (its conversion to the kernel's
floating-point digits), a few percent of the layer at the default :data:`TILE_BYTES`.
"""

from __future__ import annotations

from heinfer import _native
from heinfer.program.model import Segment, op_parts
from heinfer.program.ops import DropTo, Linear, Relinearize, Rescale, Square
from heinfer.runtime.linear import PreparedLinear

__all__ = ["TILE_BYTES", "TiledOutput", "apply_elementwise", "plan_tiles", "tile_rows"]

#: Ciphertext bytes of one tile of a segment's output: a layer whose output exceeds this is
#: computed tile by tile.
TILE_BYTES = 1 << 30


def apply_elementwise(op, batch: _native.CiphertextBatch, relin_key: _native.RelinKey | None) -> None:
    """One element-wise op of a batch-axis segment, in place: a square, a relinearization,
    a rescale or a drop of primes."""
    if isinstance(op, Square):
        _native.batch_square(batch)
    elif isinstance(op, Relinearize):
        _native.batch_relinearize(batch, relin_key)
    elif isinstance(op, Rescale):
        _native.batch_rescale(batch, op.primes)
    elif isinstance(op, DropTo):
        _native.batch_drop_to_level(batch, op.level)
    else:  # pragma: no cover - the planner emits no other op here
        raise TypeError(f"{type(op).__name__} is not an element-wise op")


def tile_rows(seg: Segment, layers: list, log_n: int, tile_bytes: int | None = None) -> tuple[int, int] | None:
    """``(op index, rows per tile)`` when segment ``seg``'s last linear layer produces more
    than ``tile_bytes`` (default :data:`TILE_BYTES`) of ciphertexts, else None.
    Only a last linear layer followed by element-wise ops alone is tiled (not the end of a
    fused linear → square → linear chain, which runs as one kernel)."""
    ops = seg.ops
    idx = max((i for i, op in enumerate(ops) if isinstance(op, Linear)), default=None)
    if idx is None or (idx >= 2 and isinstance(ops[idx - 1], Square) and isinstance(ops[idx - 2], Linear)):
        return None
    level = seg.input_level
    for op in ops[:idx]:
        if isinstance(op, Rescale):
            level -= op.primes
        elif isinstance(op, DropTo):
            level = op.level
    tile_bytes = TILE_BYTES if tile_bytes is None else tile_bytes
    parts = op_parts(ops)[idx]  # the layer's outputs: 3 or 5 after a fused square
    per_ct = parts * (level + 1) * (1 << log_n) * 8
    out = layers[ops[idx].layer].out_size
    if out * per_ct <= tile_bytes:
        return None
    return idx, max(1, tile_bytes // per_ct)


def plan_tiles(seg: Segment, layers: list, log_n: int, tile_bytes: int | None = None) -> tuple[int, list] | None:
    """``(op index, [(start, stop, native layer, bias), …])``: the tiles of segment ``seg``'s
    last linear layer (:func:`tile_rows`), each quantized for the native kernel; None when the
    segment needs none."""
    found = tile_rows(seg, layers, log_n, tile_bytes)
    if found is None:
        return None
    idx, rows = found
    step = layers[seg.ops[idx].layer]
    tiles = []
    for start in range(0, step.out_size, rows):
        stop = min(start + rows, step.out_size)
        layer, bias = PreparedLinear(step.rows(start, stop)).build()
        tiles.append((start, stop, layer, bias))
    return idx, tiles


class TiledOutput:
    """A segment's output ciphertexts, computed tile by tile when serialized (see the module's
    documentation). ``len()`` is the number of ciphertexts; :meth:`to_bytes` serializes a
    range of them as :meth:`~heinfer._native.CiphertextBatch.to_bytes` does."""

    def __init__(self, inputs: _native.CiphertextBatch, tiles: list, packing: str, fuse: bool, tail: list, relin_key) -> None:
        self._inputs, self._tiles, self._packing, self._fuse = inputs, tiles, packing, fuse
        self._tail, self._relin = tail, relin_key
        self._done: dict[int, _native.CiphertextBatch] = {}
        #: Tiles computed so far (a tile asked for again after it was forgotten counts twice).
        self.computed = 0

    def __len__(self) -> int:
        return self._tiles[-1][1]

    def to_bytes(self, start: int = 0, stop: int | None = None, drop_bits: list[int] | None = None, frame=None) -> bytes:
        """Ciphertexts ``start:stop`` serialized (rounded with ``drop_bits``, after
        ``frame(n)``: as a batch's ``to_bytes``); the tiles that end by ``stop`` are forgotten
        afterwards (the protocol asks for its chunks in order)."""
        stop = len(self) if stop is None else stop
        if not 0 <= start < stop <= len(self):
            raise ValueError(f"ciphertexts {start}:{stop} of {len(self)}")
        parts = []
        for j, (a, b, _, _) in enumerate(self._tiles):
            if a < stop and start < b:
                parts.append((self._tile(j), max(start, a) - a, min(stop, b) - a))
        if len(parts) == 1:
            tile, lo, hi = parts[0]
            data = tile.to_bytes(lo, hi, drop_bits=drop_bits, frame=frame)
        else:
            data = _native.CiphertextBatch.concat([t.take(list(range(lo, hi))) for t, lo, hi in parts], consume=True).to_bytes(drop_bits=drop_bits, frame=frame)
        for j in [j for j in self._done if self._tiles[j][1] <= stop]:
            del self._done[j]
        return data

    def _tile(self, j: int) -> _native.CiphertextBatch:
        if j not in self._done:
            _, _, layer, bias = self._tiles[j]
            out = layer.apply(self._inputs, bias, self._packing, self._fuse)
            for op in self._tail:
                apply_elementwise(op, out, self._relin)
            self._done[j] = out
            self.computed += 1
        return self._done[j]
