"""Consistency checks of a program (both artifacts), run on construction and after loading.

Layer: ``heinfer.program``. :func:`validate_public` walks every segment's ops with a dry run
of levels (and, in slots, ciphertext counts), so a program whose levels, sizes, keys or step
shapes do not chain is refused with a :class:`~heinfer.errors.CompileError` naming the
segment and op; :func:`validate_weights` checks that the server's layers fit their ops.
"""

from __future__ import annotations

import numpy as np

from heinfer.errors import CompileError
from heinfer.program.model import op_input_parts
from heinfer.program.ops import DropTo, Linear, Relinearize, Rescale, Square
from heinfer.program.transform import Transform
from heinfer.program.weights import LinearStep

__all__ = ["validate_public", "validate_weights", "check_params"]

PACKINGS = {"batch": ("real", "complex", "coeff"), "slots": ("slots",)}


def _bad(msg: str) -> None:
    raise CompileError(f"invalid program: {msg}")


def validate_public(p) -> None:
    """Checks parameters, layouts, the level walk of every segment, steps, keys and I/O."""
    check_params(p.params, need_special=bool(p.rotation_steps) or p.needs_relin_key)
    levels = len(p.params["log_q"])
    S = 1 << (int(p.params["log_n"]) - 1)
    if not p.segments or len(p.segments) != len(p.steps) + 1:
        _bad(f"{len(p.segments)} segments for {len(p.steps)} steps")
    kinds = {s.layout.kind for s in p.segments}
    if len(kinds) != 1:
        _bad("segments of one program share one layout kind")
    if not all(_int(s) and 0 < abs(s) < S for s in p.rotation_steps) or len(set(p.rotation_steps)) != len(p.rotation_steps):
        _bad("rotation steps must be distinct integers with 0 < |step| < N/2")
    _lanes(p, kinds, S)
    if not _positive(p.input_bound):
        _bad(f"input bound {p.input_bound!r} (a finite positive number)")
    for i, seg in enumerate(p.segments):
        _segment(p, i, seg, levels, S)
    for i, st in enumerate(p.steps):
        if st.protocol != "client-aided":
            _bad(f"step {i}: protocol {st.protocol!r} is not supported yet")
        if st.in_size != p.segments[i].out_size or st.out_size != p.segments[i + 1].in_size:
            _bad(f"step {i} sizes {st.in_size} → {st.out_size} do not chain with its segments")
        fns = st.functions
        _chained(fns, f"step {i}")
        if fns and (_size(fns[0].in_shape) != st.in_size or _size(fns[-1].out_shape) != st.out_size):
            _bad(f"step {i}: its functions do not take {st.in_size} values to {st.out_size}")
        if not fns and st.in_size != st.out_size:
            _bad(f"step {i}: no function, yet {st.in_size} values become {st.out_size}")
    check_io(p, p.segments[0].in_size, p.segments[-1].out_size)


def _lanes(p, kinds: set, S: int) -> None:
    """``lanes`` items per ciphertext: a power of two from 1 to ``N/2``, 1 on the batch axis;
    in slots every gathered input and placed output in lane 0 (a slot ``≡ 0 mod lanes``: the
    client puts item ``j`` at ``+ j``) and every rotation a multiple of ``lanes`` (a rotation
    by ``k·lanes`` moves each lane's values within their lane)."""
    m = p.lanes
    if not _int(m) or m < 1 or m & (m - 1) or m > S:
        _bad(f"lanes {m!r}: a power of two from 1 to N/2 = {S}")
    if m == 1:
        return
    if kinds != {"slots"}:
        _bad(f"{m} lanes on the batch axis (lanes are items per ciphertext of the slot layout)")
    if any(s % m for s in p.rotation_steps):
        _bad(f"a rotation step is not a multiple of the {m} lanes: it would move values from one item to another")
    for i, seg in enumerate(p.segments):
        g = seg.layout.gather
        if isinstance(g, np.ndarray) and g.ndim == 2 and g.shape[1] == S and (g.reshape(len(g), S // m, m)[:, :, 1:] != -1).any():
            _bad(f"segment {i}: the gather map fills a slot outside lane 0 of {m}")
        if seg.output is not None and (seg.output.slot % m).any():
            _bad(f"segment {i}: an output is placed outside lane 0 of {m}")


def _segment(p, i: int, seg, levels: int, S: int) -> None:
    lay = seg.layout
    if lay.kind not in PACKINGS or lay.packing not in PACKINGS[lay.kind]:
        _bad(f"segment {i}: layout {lay.kind!r}/{lay.packing!r}")
    for name in ("input_scale", "output_scale", "output_bound", "precision"):
        if not _positive(getattr(seg, name)):
            _bad(f"segment {i}: {name} must be a finite positive number")
    if seg.input_scale < 1 or seg.in_size < 1 or seg.out_size < 1:
        _bad(f"segment {i}: sizes and input scale must be positive")
    if not 0 <= seg.output_level <= seg.input_level < levels:
        _bad(f"segment {i}: levels {seg.input_level} → {seg.output_level} (top {levels - 1})")
    if lay.kind == "slots":
        g = lay.gather
        if not isinstance(g, np.ndarray) or g.ndim != 2 or g.shape[1] != S or g.dtype != np.int64 or len(g) == 0:
            _bad(f"segment {i}: gather map of shape {getattr(g, 'shape', None)}")
        if g.min() < -1 or g.max() >= seg.in_size:
            _bad(f"segment {i}: the gather map names an element outside the input of {seg.in_size}")
        out = seg.output
        if out is None or out.slots != S or out.size != seg.out_size:
            _bad(f"segment {i}: output placement does not hold {seg.out_size} values in {S} slots")
    elif lay.gather is not None or seg.output is not None:
        _bad(f"segment {i}: a batch layout has no gather map or output placement")
    level = seg.input_level
    for j, (op, parts) in enumerate(zip(seg.ops, op_input_parts(seg.ops))):
        _parts_allow(i, j, op, parts)
        if op.inputs != (j,):
            _bad(f"segment {i} op {j}: reads values {op.inputs}; graph-shaped segments are not supported yet")
        if isinstance(op, Linear):
            if not _int(op.layer) or op.layer < 0:
                _bad(f"segment {i} op {j}: layer {op.layer!r}")
            level -= lay.kind == "slots"
        elif isinstance(op, Rescale):
            if op.primes < 1:
                _bad(f"segment {i} op {j}: rescale by {op.primes} primes")
            level -= op.primes
        elif isinstance(op, DropTo):
            if not 0 <= op.level < level:
                _bad(f"segment {i} op {j}: drop to level {op.level} from {level}")
            level = op.level
        elif isinstance(op, Relinearize):
            if not p.needs_relin_key:
                _bad(f"segment {i} op {j}: relinearizes without a relinearization key")
        elif not isinstance(op, Square):
            _bad(f"segment {i} op {j}: unknown op {op!r}")
        if level < 0:
            _bad(f"segment {i} op {j}: runs out of levels")
    if level != seg.output_level:
        _bad(f"segment {i}: the ops end at level {level}, the segment says {seg.output_level}")


def _parts_allow(i: int, j: int, op, parts: int) -> None:
    """Refuses an op that the ciphertexts' ``parts`` polynomials do not allow: a square of
    more than 3 (the engine stops at 5), a relinearization of other than 3, a rescale of 5
    (an open tail's last part would bring its rounding back multiplied by ``s⁴``)."""
    if isinstance(op, Square) and parts > 3:
        _bad(f"segment {i} op {j}: squares a ciphertext of {parts} parts (at most 3)")
    if isinstance(op, Relinearize) and parts != 3:
        _bad(f"segment {i} op {j}: relinearizes a ciphertext of {parts} parts (only 3)")
    if isinstance(op, Rescale) and parts > 3:
        _bad(f"segment {i} op {j}: rescales a ciphertext of {parts} parts (its rounding would grow by s^4)")


def validate_weights(p) -> None:
    """Checks that every Linear op names a layer of the right kind, sizes and keys."""
    S = p.slots
    used = set()
    for i, seg in enumerate(p.segments):
        size = seg.in_size if seg.layout.kind == "batch" else seg.n_input_cts
        for j, op in enumerate(seg.ops):
            if not isinstance(op, Linear):
                continue
            if op.layer >= len(p.layers) or op.layer in used:
                _bad(f"segment {i} op {j}: layer {op.layer} does not exist or is used twice")
            used.add(op.layer)
            lay = p.layers[op.layer]
            if seg.layout.kind == "batch":
                if not isinstance(lay, LinearStep) or lay.in_size != size:
                    _bad(f"segment {i} op {j}: layer {op.layer} does not take {size} values")
                if not (np.isfinite(lay.weight_scale) and lay.weight_scale >= 1.0) or lay.digits not in (1, 2):
                    _bad(f"layer {op.layer}: weight scale {lay.weight_scale} and {lay.digits} digits")
                size = lay.out_size
            else:
                if not isinstance(lay, Transform) or lay.n_in != size or lay.slots != S:
                    _bad(f"segment {i} op {j}: transform does not take {size} ciphertexts of {S} slots")
                if not lay.rotation_steps() <= set(p.rotation_steps):
                    _bad(f"segment {i} op {j}: rotations without keys")
                if p.lanes > 1 and not _lane_periodic(lay, p.lanes):
                    _bad(f"layer {op.layer}: a plaintext differs between the {p.lanes} lanes or a step stays within none")
                size = lay.n_out
        if size != (seg.out_size if seg.layout.kind == "batch" else seg.n_output_cts):
            _bad(f"segment {i}: the layers give {size} outputs, the segment returns {seg.out_size}")
    if used != set(range(len(p.layers))):
        _bad("some layers belong to no op")


def _lane_periodic(t: Transform, m: int) -> bool:
    """Whether every plaintext and bias of ``t`` repeats each value ``m`` times and every
    step (giant, baby, fold, replication) is a multiple of ``m``: then ``t`` acts on each of
    ``m`` interleaved items as on one."""
    S = t.slots
    steps = [*t.terms[:, 1], *t.terms[:, 3], *t.fold, *t.replicate]
    if any(int(s) % m for s in steps):
        return False
    for v in (t.vectors, t.bias):
        if v is not None and len(v):
            w = v.reshape(len(v), S // m, m)
            if (w != w[:, :, :1]).any():
                return False
    return True


def check_params(p: dict, need_special: bool) -> None:
    """Refuses parameters without prime sizes, a ring degree 2^11..2^16 and a security level
    (and special primes when ``need_special``: key switching needs them)."""
    if not _bit_sizes(p.get("log_q"), nonempty=True) or not _bit_sizes(p.get("log_p"), nonempty=need_special):
        _bad(f"prime sizes in {p}" + (" (key switching needs special primes)" if need_special else ""))
    if not _int(p.get("log_n")) or not 11 <= p["log_n"] <= 16:
        _bad(f"ring degree in {p}")
    if not _int(p.get("log_scale")) or not 10 <= p["log_scale"] <= 61:
        _bad(f"scale bits in {p}")
    if p.get("security") not in (128, 192, 256):
        _bad(f"security {p.get('security')!r}")


def check_io(program, first_size: int, last_size: int) -> None:
    """Refuses input/output shapes that disagree with the pre-/post-processing functions and
    with the first and last segments' sizes."""
    pre, post = program.pre, program.post
    _chained(pre, "pre-processing")
    _chained(post, "post-processing")
    if pre and _size(pre[0].in_shape) != _size(program.input_shape):
        _bad(f"input shape {tuple(program.input_shape)} for a pre-processing step taking {tuple(pre[0].in_shape)}")
    if post and _size(post[-1].out_shape) != _size(program.output_shape):
        _bad(f"output shape {tuple(program.output_shape)} for a post-processing step giving {tuple(post[-1].out_shape)}")
    first_in = _size(pre[-1].out_shape) if pre else _size(program.input_shape)
    if first_in != first_size:
        _bad(f"input of {first_in} values for a first segment of {first_size}")
    last_out = _size(post[0].in_shape) if post else _size(program.output_shape)
    if last_out != last_size:
        _bad(f"last segment gives {last_size} values, the output needs {last_out}")


def _chained(fns, where: str) -> None:
    """Refuses functions that do not chain: each takes as many values as the one before gives."""
    for j in range(1, len(fns)):
        if _size(fns[j - 1].out_shape) != _size(fns[j].in_shape):
            _bad(f"{where}: function {j - 1} gives {_size(fns[j - 1].out_shape)} values, function {j} takes {_size(fns[j].in_shape)}")


def _size(shape) -> int:
    return int(np.prod(shape))


def _int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _bit_sizes(v: object, nonempty: bool) -> bool:
    """Whether ``v`` is a list of prime bit sizes (ints in 10..=62), non-empty if asked."""
    return isinstance(v, list) and (bool(v) or not nonempty) and all(_int(b) and 10 <= b <= 62 for b in v)


def _positive(v: object) -> bool:
    """Whether ``v`` is a finite positive number."""
    return isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) and bool(np.isfinite(v)) and v > 0
