"""Convolution layouts of latency mode: placements of a ``(C, H, W)`` tensor, the convolution
as a sparse matrix, and the lowering of a layer between any two placements.

Layer: ``heinfer.compiler`` (pure numpy + scipy). With these, every convolution kernel of
GAZELLE (§6) and of packing-configurations (§IV-A) is one
:class:`~heinfer.program.transform.Transform` between two placements, lowered by
:func:`to_placement` (or :func:`~heinfer.compiler.latency.kernels.diagonal` for a dense
output) with a giant-step modulus ``M``:

==============================  ==========================  ==========================
kernel                          input placement             output placement
==============================  ==========================  ==========================
GAZELLE channel packing,        :func:`channel_blocked`     :func:`channel_blocked`
input rotations (Table 4)       (block ``B``)               (block ``B``), ``M ≥ S``
… output rotations              same                        same, ``M = B``
strided, decomposed (§6.1)      :func:`polyphase`           :func:`channel_blocked`
direct, output not compacted    :func:`channel_blocked`     :func:`strided` (same grid)
split with data stride ``d``    :func:`split` (``d``)       :func:`split` (``d / s``)
one value per ciphertext        :func:`unbatched`           :func:`unbatched`
(packing-configurations'
baseline: no batching)
==============================  ==========================  ==========================

A placement only says where each element is read; a transform's plaintext diagonals are zero
on every other slot, so whatever those slots hold never reaches an output. The number of
distinct diagonals ``(in_slot − out_slot) mod S`` is what a kernel costs: it is small when the
map from input to output positions is a translation per channel pair, which is why the
output placement of a strided convolution matters (direct to a compact output is correct
but has a diagonal per output position).

Every block placement puts block ``k`` (a channel, or a sub-image of the polyphase split)
at slots ``[(k mod P)·B, (k mod P + 1)·B)`` of ciphertext ``⌊k / P⌋`` with ``B`` the block
size and ``P = ⌊S / B⌋`` blocks per ciphertext (``per_ct`` lowers it); inside a block,
element ``(y, x)`` sits at ``y·row + x`` (``row``: the grid's row length).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.latency.kernels import bias_slots
from heinfer.compiler.latency.layout import Placement
from heinfer.program.transform import Transform
from heinfer.program.transform import split as split_steps
from heinfer.compiler.onnx_windows import window_indices as _window_indices
from heinfer.errors import CompileError

__all__ = [
    "Diagonals",
    "channel_blocked",
    "conv_matrix",
    "conv_output_shape",
    "diagonals",
    "interleaved",
    "polyphase",
    "split",
    "strided",
    "to_placement",
    "unbatched",
]


def _pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _blocks(
    block_of: np.ndarray,
    pos: np.ndarray,
    n_blocks: int,
    block: int,
    slots: int,
    per_ct: int | None,
    what: str,
) -> Placement:
    """Element ``e`` at position ``pos[e]`` of block ``block_of[e]`` (see the module doc)."""
    if len(pos) and int(pos.max()) >= block:
        raise CompileError(
            f"{what}: a block of {block} slots cannot hold position {int(pos.max())}"
        )
    if block > slots:
        raise CompileError(f"{what}: a block of {block} slots does not fit a ciphertext of {slots}")
    fit = slots // block
    per = fit if per_ct is None else per_ct
    if not 1 <= per <= fit:
        raise CompileError(f"{what}: {per} blocks of {block} slots per ciphertext of {slots}")
    return Placement(-(-n_blocks // per), slots, block_of // per, (block_of % per) * block + pos)


def _chw(C: int, H: int, W: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if min(C, H, W) < 1:
        raise CompileError(f"a (C, H, W) tensor needs positive sizes, got {(C, H, W)}")
    c, y, x = np.indices((C, H, W), dtype=np.int64).reshape(3, -1)
    return c, y, x


def _grid(C, H, W, slots, step, row, block, pow2, per_ct, what) -> Placement:
    c, y, x = _chw(C, H, W)
    row = W * step if row is None else row
    if row < (W - 1) * step + 1:
        raise CompileError(f"{what}: a row of {row} slots cannot hold {W} elements {step} apart")
    size = H * step * row
    block = (_pow2(size) if pow2 else size) if block is None else block
    return _blocks(c, y * step * row + x * step, C, block, slots, per_ct, what)


def channel_blocked(
    C: int,
    H: int,
    W: int,
    slots: int,
    block: int | None = None,
    *,
    pow2: bool = False,
    row: int | None = None,
    per_ct: int | None = None,
) -> Placement:
    """GAZELLE's channel packing (§6, "channel packing"): channel ``c`` in block ``c`` of
    ``block`` slots (default ``H·W``, or the next power of two with ``pow2=True``), the image
    row-major inside (rows ``row`` slots apart, default ``W``), ``⌊S / block⌋`` channels per
    ciphertext and as many ciphertexts as the channels need."""
    return _grid(C, H, W, slots, 1, row, block, pow2, per_ct, "channel-blocked placement")


def strided(
    C: int,
    H: int,
    W: int,
    slots: int,
    data_stride: int,
    *,
    row: int | None = None,
    block: int | None = None,
    pow2: bool = False,
    per_ct: int | None = None,
) -> Placement:
    """Data stride ``s``: element ``(y, x)`` of channel ``c`` at ``(y·s, x·s)`` of a grid
    with rows ``row`` slots long (default ``W·s``; block default ``H·s·row``), channels
    blocked as in :func:`channel_blocked`. A strided convolution leaves its output so when it
    is not compacted (packing-configurations §IV-A1, "direct convolution"); give the input's
    grid (``row`` and ``block``) to keep the kernel a translation per channel pair."""
    if data_stride < 1:
        raise CompileError(f"strided placement: data stride must be positive, got {data_stride}")
    return _grid(C, H, W, slots, data_stride, row, block, pow2, per_ct, "strided placement")


def interleaved(C: int, H: int, W: int, slots: int, channels: int | None = None) -> Placement:
    """The channels of one pixel adjacent: element ``(c, y, x)`` at offset ``c`` of pixel
    group ``y·W + x`` (groups of ``channels`` slots, default ``C``; no group straddles two
    ciphertexts). A convolution is then a translation over pixels: the diagonals of a
    ``k×k`` filter are the ``k²`` pixel offsets times the channel differences."""
    c, y, x = _chw(C, H, W)
    g = C if channels is None else channels
    if g < C:
        raise CompileError(f"interleaved placement: groups of {g} slots cannot hold {C} channels")
    return _blocks(y * W + x, c, H * W, g, slots, None, "interleaved placement")


def split(
    C: int,
    H: int,
    W: int,
    slots: int,
    data_stride: int,
    *,
    row: int | None = None,
    block: int | None = None,
    pow2: bool = False,
    per_ct: int | None = None,
) -> Placement:
    """Packing-configurations' split layout (§IV-A3) with data stride ``d``: the image is cut
    into ``d²`` sub-images, sub-image ``(p, q)`` of channel ``c`` holding the elements
    ``(y, x)`` with ``y ≡ p``, ``x ≡ q (mod d)`` at ``(⌊y/d⌋, ⌊x/d⌋)`` of a
    ``⌈H/d⌉ × ⌈W/d⌉`` grid; each sub-image is a block (order ``c, p, q``), blocked as in
    :func:`channel_blocked`. A convolution of stride ``s`` with ``d`` a multiple of ``s``
    maps it to the split layout of the output with data stride ``d / s`` (``d = s``: the
    compact output) by one translation per pair of sub-images; ``d = H = W`` puts every
    element in its own sub-image (``per_ct=1``: its own ciphertext, the paper's full split).
    """
    if data_stride < 1:
        raise CompileError(f"split placement: data stride must be positive, got {data_stride}")
    d = data_stride
    c, y, x = _chw(C, H, W)
    hb, wb = -(-H // d), -(-W // d)
    row = wb if row is None else row
    if row < wb:
        raise CompileError(f"split placement: a row of {row} slots cannot hold {wb} elements")
    size = hb * row
    block = (_pow2(size) if pow2 else size) if block is None else block
    k = (c * d + y % d) * d + x % d
    return _blocks(k, (y // d) * row + x // d, C * d * d, block, slots, per_ct, "split placement")


def polyphase(
    C: int,
    H: int,
    W: int,
    slots: int,
    stride: int,
    *,
    row: int | None = None,
    block: int | None = None,
    pow2: bool = False,
    per_ct: int | None = None,
) -> Placement:
    """GAZELLE §6.1: a convolution of stride ``s`` as ``s²`` convolutions of stride 1, the
    input split into its ``s²`` polyphase sub-images, each a channel block — the
    :func:`split` layout with data stride ``s``."""
    return split(C, H, W, slots, stride, row=row, block=block, pow2=pow2, per_ct=per_ct)


def unbatched(C: int, H: int, W: int, slots: int) -> Placement:
    """One value per ciphertext (slot 0), row-major ``(C, H, W)``: no batching at all, the
    baseline of packing-configurations §V."""
    n = C * H * W
    if n < 1:
        raise CompileError(f"a (C, H, W) tensor needs positive sizes, got {(C, H, W)}")
    return Placement(n, slots, np.arange(n, dtype=np.int64), np.zeros(n, np.int64))


def _pair(v, what: str) -> tuple[int, int]:
    t = (v, v) if np.isscalar(v) else tuple(v)
    if len(t) != 2:
        raise CompileError(f"convolution: {what} must be an int or a pair, got {v!r}")
    return int(t[0]), int(t[1])


def _pads(pad) -> tuple[np.ndarray, np.ndarray]:
    """``(begin, end)`` pads from an int, ``(ph, pw)`` or ONNX's ``(top, left, bottom, right)``."""
    p = (pad,) * 4 if np.isscalar(pad) else tuple(pad)
    if len(p) == 2:
        p = p + p
    if len(p) != 4 or min(p) < 0:
        raise CompileError(
            f"convolution: pad must be non-negative: an int, a pair or 4 values, got {pad!r}"
        )
    return np.array(p[:2], np.int64), np.array(p[2:], np.int64)


def conv_output_shape(H: int, W: int, kernel: tuple[int, int], stride=1, pad=0) -> tuple[int, int]:
    """``(Ho, Wo)`` of a convolution (no dilation, floor rounding, as ONNX's ``Conv``)."""
    begin, end = _pads(pad)
    s = np.array(_pair(stride, "stride"), np.int64)
    if (s < 1).any():
        raise CompileError(f"convolution: stride must be positive, got {stride!r}")
    out = (np.array([H, W]) + begin + end - np.array(kernel)) // s + 1
    if (out < 1).any():
        raise CompileError(
            f"convolution: a {kernel} filter does not fit a {H}×{W} input padded by {pad!r}"
        )
    return int(out[0]), int(out[1])


def conv_matrix(weight: np.ndarray, H: int, W: int, stride=1, pad=0) -> sp.csr_matrix:
    """The convolution ``weight (Co, Ci, kh, kw)`` on a ``(Ci, H, W)`` input as the sparse
    matrix from the row-major ``(Ci, H, W)`` vector to the row-major ``(Co, Ho, Wo)`` one
    (cross-correlation, zero padding, as ONNX's ``Conv``; taps on padding are left out).
    The window geometry is the ONNX importer's (:mod:`heinfer.compiler.onnx_windows`)."""
    w = np.asarray(weight, dtype=np.float64)
    if w.ndim != 4:
        raise CompileError(f"convolution: weight must be (Co, Ci, kh, kw), got shape {w.shape}")
    co, ci, kh, kw = w.shape
    ho, wo = conv_output_shape(H, W, (kh, kw), stride, pad)
    begin, _ = _pads(pad)
    idx = _window_indices((H, W), (kh, kw), np.array(_pair(stride, "stride")), begin, (ho, wo))
    o_i, k_i = np.nonzero(idx >= 0)  # (output position, tap) pairs that read the input
    n_pos, taps = ho * wo, len(o_i)
    # one output channel's rows, entries in CSR order (position, input channel, tap); every
    # output channel repeats the pattern with its own weights
    c, t = (
        v.ravel()
        for v in np.meshgrid(np.arange(ci, dtype=np.int64), np.arange(taps), indexing="ij")
    )
    order = np.lexsort((t, c, o_i[t]))
    c, t = c[order], t[order]
    cols = c * (H * W) + idx[o_i[t], k_i[t]]
    weight_ix = c * (kh * kw) + k_i[t]
    row_len = np.tile(np.bincount(o_i, minlength=n_pos) * ci, co)
    indptr = np.concatenate([[0], np.cumsum(row_len)])
    data = w.reshape(co, ci * kh * kw)[:, weight_ix].ravel()
    m = sp.csr_matrix((data, np.tile(cols, co), indptr), shape=(co * n_pos, ci * H * W))
    m.eliminate_zeros()
    return m


@dataclass(frozen=True, eq=False)
class Diagonals:
    """A linear map between two placements as its generalized diagonals, before the split
    into baby and giant steps: ``y_o[t] += Σ u_i[t] · x_{a_i}[t + d_i]`` over the unique
    ``(o_i, a_i, d_i)`` (sorted). :meth:`lower` turns it into a
    :class:`~heinfer.program.transform.Transform` for any giant-step modulus, so a
    layer is analysed once and lowered for many moduli."""

    n_in: int
    n_out: int
    slots: int
    o: np.ndarray
    a: np.ndarray
    d: np.ndarray
    u: np.ndarray

    def lower(self, giant_modulus: int, bias: np.ndarray | None = None) -> Transform:
        """The transform with giant-step modulus ``M`` (negative: baby steps in ``(−|M|, 0]``,
        see :func:`~heinfer.program.transform.split`; ``bias``: ``(n_out, S)`` slot
        values or ``None``) — the same terms and plaintexts as
        :func:`~heinfer.program.transform.build_transform` gives."""
        if giant_modulus == 0:
            raise CompileError("giant-step modulus must be non-zero")
        b, g = split_steps(self.d, giant_modulus, self.slots)
        order = np.lexsort((b, self.a, g, self.o))
        o, g, a, b = self.o[order], g[order], self.a[order], b[order]
        u = self.u[order]
        vectors = np.empty_like(u)
        for step in np.unique(g):  # rot(v, −g)[t + g] = v[t]
            sel = g == step
            vectors[sel] = np.roll(u[sel], int(step), axis=1)
        terms = np.stack([o, g, a, b], axis=1).astype(np.int64)
        return Transform(self.n_in, self.n_out, self.slots, terms, vectors, bias)


#: Largest (output ct × input ct × slots) range indexed by a dense table in :func:`diagonals`.
_DENSE_KEYS = 1 << 26


def diagonals(matrix: sp.spmatrix, inp: Placement, out: Placement) -> Diagonals:
    """The generalized diagonals of ``y = A x`` from placement ``inp`` to ``out``, in time
    linear in the non-zeros (a convolution of 128 to 128 channels of 16×16 with a 3×3 filter,
    35 million of them, takes seconds)."""
    m = sp.csr_matrix(matrix)
    if m.shape != (out.size, inp.size):
        raise CompileError(
            f"diagonals: a {m.shape} matrix between placements of {inp.size} and {out.size} elements"
        )
    if inp.slots != out.slots:
        raise CompileError(f"diagonals: input of {inp.slots} slots, output of {out.slots}")
    S = inp.slots
    rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    cols = m.indices.astype(np.int64)
    out_slot = out.slot[rows]
    key = (out.ct[rows] * inp.n_cts + inp.ct[cols]) * S + (inp.slot[cols] - out_slot) % S
    del rows
    span = out.n_cts * inp.n_cts * S
    if span <= _DENSE_KEYS:
        present = np.zeros(span, bool)
        present[key] = True
        uniq = np.flatnonzero(present)
        rank = np.cumsum(present, dtype=np.int64) - 1
        inv = rank[key]
        del present, rank
    else:
        uniq, inv = np.unique(key, return_inverse=True)
    del key
    u = np.bincount(inv * S + out_slot, weights=m.data, minlength=len(uniq) * S).reshape(
        len(uniq), S
    )
    d = uniq % S
    oa = uniq // S
    return Diagonals(inp.n_cts, out.n_cts, S, oa // inp.n_cts, oa % inp.n_cts, d, u)


def to_placement(
    matrix: sp.spmatrix, bias: np.ndarray | None, inp: Placement, out: Placement, giant_modulus: int
) -> Transform:
    """``y = A x + bias`` lowered from placement ``inp`` to an arbitrary output placement
    ``out`` (:func:`~heinfer.compiler.latency.kernels.diagonal` always outputs dense):
    generalized diagonals with giant-step modulus ``M`` (``M ≥ S``: input rotations only,
    ``M = 1``: output rotations only, negative ``M``: baby steps of the other sign) — :func:`~heinfer.program.transform.build_transform`
    with the rows mapped through ``out``, computed by :func:`diagonals` in linear time."""
    return diagonals(matrix, inp, out).lower(giant_modulus, bias_slots(bias, out))
