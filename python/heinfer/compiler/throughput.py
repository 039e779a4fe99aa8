"""Compiling a graph for throughput mode (batch-axis packing): graph → :class:`Program`.

Passes, in order (each a function of this module or of its imports, tested on its own):

1. :func:`heinfer.compiler.fuse.fold_linear` — folds BatchNorm/constants (already linear ops)
   and fuses adjacent linear layers (LoLa §3);
2. :func:`split_segments` — leading client functions become client pre-processing, trailing
   ones post-processing, the rest client-aided steps between server segments;
3. :func:`heinfer.compiler.ranges.tensor_bounds` — value ranges;
4. :func:`heinfer.compiler.plan.plan_segment` per segment and prime size — weight scales,
   lazy rescaling, levels, and :func:`choose_parameters` — the ring degree and prime chain at
   the requested security;
5. :func:`build_program` — instructions, key manifest and predicted errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heinfer.compiler.fuse import fold_linear
from heinfer.compiler.ir import ClientFunction, Graph, Linear, Square
from heinfer.compiler.plan import max_log_qp, op_in_size, op_out_size, plan_segment
from heinfer.compiler.ranges import calibrated_bounds, check_precision_bits
from heinfer.errors import CompileError
from heinfer.program import Layout, LinearStep, Program, Segment, Step
from heinfer.program.ops import DropTo, Relinearize, Rescale
from heinfer.program.ops import Linear as OpLinear
from heinfer.program.ops import Square as OpSquare

__all__ = ["Options", "compile_graph", "split_segments", "step_error"]

#: Standard deviation of the error distribution (as in the engine).
SIGMA = 3.19
#: Slot-domain bound of a rescale's rounding error over N: the rounding term times the
#: ternary secret has variance ≈ N/18 per coefficient and the embedding multiplies by √N, so
#: its standard deviation is ≈ N/4.2; 6σ ≈ 1.5·N.
RESCALE_NOISE = 1.5
#: The same for a 3-part ciphertext (a square not yet relinearized), over N·√N: the rounding
#: of ``c_2`` times ``s²`` (‖s²‖² ≈ 8N²/9) adds ≈ 2N²/27 per coefficient, so σ ≈ 0.27·N·√N in
#: the slots; 6σ ≈ 1.65·N·√N — √N times the 2-part bound, and what a lazy plan pays for
#: rescaling before it relinearizes.
RESCALE_NOISE_SQUARE = 1.65
#: Bits of fresh-noise advantage of coefficient packing over slot packing at the smallest
#: secure ring (√2^11 ≈ 2^5.5), spent on a smaller input scale.
COEFF_NOISE_BITS = 5


@dataclass(frozen=True)
class Options:
    """Compiler options (every field has a safe default).

    ``security``: 128, 192 or 256 bits. ``input_bits``: bits of the largest input value at
    its encryption scale (the input precision). ``weight_bits``: bits of the largest weight
    of a layer once quantized. ``headroom``: factor over calibrated maxima.
    ``precision_bits``: the client releases decrypted values rounded to ``bound · 2^-bits``
    (with noise flooding of half that), so their low bits carry nothing about the key.
    ``packing``: ``"real"``, ``"complex"`` (two items per slot, nGraph-HE2 §3.1.2),
    ``"coeff"`` (one item per coefficient: no FFT on the client, √N less fresh noise) or
    ``None``: coefficient packing when no segment squares (both packings need that), real
    packing otherwise. ``complex_packing=True/False`` is shorthand for complex/real.
    ``lazy``: ``False`` builds the baseline without the nGraph-HE2 optimizations (weights at
    scale ``q``, a rescale after every multiplication, real packing).
    """

    security: int = 128
    input_bits: int = 24
    weight_bits: int = 16
    headroom: float = 4.0
    precision_bits: int = 16
    complex_packing: bool | None = None
    packing: str | None = None
    lazy: bool = True
    prime_bits: tuple[int, ...] = (30, 36, 42, 50)


def split_segments(ops: list) -> tuple[list, list[list], list[list], list]:
    """``(pre, segments, steps, post)``: client functions before the first server op, the
    runs of server ops, the client functions between runs, the client functions after."""
    pre, post = [], []
    i, j = 0, len(ops)
    while i < j and isinstance(ops[i], ClientFunction):
        pre.append(ops[i])
        i += 1
    while j > i and isinstance(ops[j - 1], ClientFunction):
        post.insert(0, ops[j - 1])
        j -= 1
    segments: list[list] = [[]]
    steps: list[list] = []
    for op in ops[i:j]:
        if isinstance(op, ClientFunction):
            if segments[-1]:
                steps.append([])
                segments.append([])
            steps[-1].append(op)
        else:
            segments[-1].append(op)
    if not segments[0]:
        raise CompileError("the model has no linear layer or square to evaluate on encrypted data")
    return pre, segments, steps, post


#: Largest ``input_bits`` (the encoder turns scaled values into integers through float64: at
#: most about 2^126) and ``weight_bits``.
MAX_INPUT_BITS = 120
MAX_WEIGHT_BITS = 60


def compile_graph(graph: Graph, calibration: np.ndarray | None = None, input_bound: float | None = None, options: Options = Options()) -> Program:
    """Compiles ``graph`` for throughput mode (see the module documentation).

    ``calibration``: sample inputs ``(batch, *input_shape)`` used for value ranges (strongly
    recommended: without them only sound interval bounds are used, which are loose after
    wide layers). ``input_bound``: largest ``|input|`` (default: from the calibration).
    """
    if options.security not in (128, 192, 256):
        raise CompileError(f"security must be 128, 192 or 256 bits, got {options.security}")
    check_precision_bits(options.precision_bits)
    for name, most in (("input_bits", MAX_INPUT_BITS), ("weight_bits", MAX_WEIGHT_BITS)):
        v = getattr(options, name)
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= most:
            raise CompileError(f"{name} must be an integer from 1 to {most}, got {v!r}")
    g = fold_linear(graph)
    calibration, input_bound, bounds = calibrated_bounds(g, calibration, input_bound, options.headroom)
    pre, seg_ops, step_fns, post = split_segments(g.ops)
    # index of every op in g.ops → its output bound
    pos = {id(op): i + 1 for i, op in enumerate(g.ops)}
    seg_bounds, seg_in_bounds = [], []
    for k, ops in enumerate(seg_ops):
        seg_bounds.append([bounds[pos[id(op)]] for op in ops])
        seg_in_bounds.append(bounds[pos[id(pre[-1])]] if (k == 0 and pre) else (bounds[0] if k == 0 else bounds[pos[id(step_fns[k - 1][-1])]]))
    has_square = any(isinstance(op, Square) for ops in seg_ops for op in ops)
    packing = options.packing
    if packing is None and options.complex_packing is not None:
        packing = "complex" if options.complex_packing else "real"
    if packing is None:
        packing = "real" if (has_square or not options.lazy) else "coeff"
    if packing not in ("real", "complex", "coeff"):
        raise CompileError(f"unknown packing {packing!r}: 'real', 'complex' or 'coeff'")
    if packing != "real" and has_square:
        raise CompileError(f"{packing} packing cannot evaluate squares (ciphertext × ciphertext products)")
    if not options.lazy and packing != "real":
        raise CompileError("the baseline (lazy=False) uses real packing")
    best = None
    # the baseline rescales after every product: each rescale adds noise at the running scale,
    # so it needs primes (and scales) of at least 40 bits to keep its precision
    prime_candidates = options.prime_bits if options.lazy else tuple(b for b in (40, 45, 50) if b >= 40)
    # coefficient packing keeps the fresh error per item √N ≥ 2^5.5 times smaller than slot
    # packing: the same precision above the noise at a 5-bit smaller input scale
    input_bits = options.input_bits - (COEFF_NOISE_BITS if packing == "coeff" else 0)
    for b in prime_candidates:
        plans = []
        for k, ops in enumerate(seg_ops):
            s_in = (b - 2) if not options.lazy else input_bits - math.ceil(math.log2(seg_in_bounds[k]))
            if s_in < 1:
                raise CompileError(
                    f"input_bits={options.input_bits} leaves segment {k}'s inputs (up to {seg_in_bounds[k]:.3g}) a scale of "
                    f"2^{s_in}" + (f" ({COEFF_NOISE_BITS} bits go to the noise in coefficient packing)" if packing == "coeff" else "")
                    + ": give more input_bits"
                )
            plans.append((s_in, plan_segment(ops, seg_bounds[k], s_in, b, options.weight_bits, [1.0] * len(ops), options.lazy)))
        top = max(p.top_limbs for _, p in plans)
        p_bits = b if any(p.needs_relin for _, p in plans) else 0
        log_n = next((n for n in range(11, 17) if (m := max_log_qp(n, options.security)) and top * b + p_bits <= m), None)
        if log_n is None:
            continue
        cost = sum(p.cost for _, p in plans)
        if best is None or cost < best[0]:
            best = (cost, b, log_n, plans, p_bits)
    if best is None:
        raise CompileError(
            f"no parameters at {options.security}-bit security hold this network's depth and precision "
            "(try fewer input_bits/weight_bits or a smaller model)"
        )
    _, b, log_n, plans, p_bits = best
    return build_program(g, pre, seg_ops, step_fns, post, plans, b, log_n, p_bits, packing, seg_bounds, seg_in_bounds, options)


def _rescale_noise(n: int, parts: int) -> float:
    """Slot-domain bound of one rescale's rounding error (in units of the scale after it) for
    a ciphertext of ``parts`` parts in a ring of degree ``n``."""
    return RESCALE_NOISE * n if parts == 2 else RESCALE_NOISE_SQUARE * n * math.sqrt(n)


def step_error(functions: list, err: float, bound: float) -> float:
    """Error bound after a client step's ``functions`` given ``err`` on values of ``|x| ≤
    bound``: every kind is 1-Lipschitz but ``square``, for which ``|(x+e)² − x²| ≤ 2·bound·e +
    e²``."""
    for f in functions:
        if f.kind == "square":
            err, bound = 2 * bound * err + err * err, bound * bound
        elif f.kind in ("sigmoid", "softmax", "tanh"):
            bound = max(bound, 1.0)
    return err


def build_program(g, pre, seg_ops, step_fns, post, plans, b, log_n, p_bits, packing, seg_bounds, seg_in_bounds, options) -> Program:
    """Lowers the chosen plans to a :class:`Program` (instructions, layers, steps, errors)."""
    top = max(p.top_limbs for _, p in plans)
    n = 1 << log_n
    # bound on the fresh encryption error per item: 6σ per coefficient, spread over the slots
    # by the canonical embedding (×√N) unless the items sit in the coefficients
    fresh = 6.0 * SIGMA * (1.0 if packing == "coeff" else math.sqrt(n))
    layers: list[LinearStep] = []
    segments: list[Segment] = []
    errors: list[float] = []
    err = 0.0
    for k, ((s_in, plan), ops) in enumerate(zip(plans, seg_ops)):
        if k:  # the client's release (rounding and flooding, a few precisions) and its step
            err = step_error(step_fns[k - 1], err + 2 * segments[-1].precision, seg_bounds[k - 1][-1])
        scale_in = 2.0**s_in
        err += fresh / scale_in
        instrs: list = []
        level = plan.top_limbs - 1
        in_b = seg_in_bounds[k]
        parts = 2
        for t, op in enumerate(ops):
            if plan.limbs[t] - 1 < level:
                level = plan.limbs[t] - 1
                instrs.append(DropTo(level, (len(instrs),)))
            if plan.relin_before[t]:
                instrs.append(Relinearize((len(instrs),)))
                # key switching, one-prime digits and a prime-sized P: Σ_j c2_j·e_j/P has
                # ≈ σ·√N·√β per coefficient, ×√N in the slots (6σ bound)
                s_now = plan.log_scales[t - 1] - plan.rescales[t - 1] * b
                err += 6.0 * SIGMA * n * math.sqrt(plan.limbs[t]) / 2.0**s_now
                parts = 2
            if isinstance(op, Linear):
                lp = plan.layers[t]
                bias = op.bias if np.any(op.bias) else None
                layers.append(LinearStep(op.name, op.matrix, bias, 2.0**lp.exponent, lp.digits))
                instrs.append(OpLinear(len(layers) - 1, (len(instrs),)))
                # independent errors add in quadrature: the row 2-norm propagates them
                l2 = float(np.sqrt(np.asarray(op.matrix.multiply(op.matrix).sum(axis=1)).max())) if op.nnz else 0.0
                per_row = float(np.diff(op.matrix.indptr).max()) if op.nnz else 0.0
                err = l2 * err + math.sqrt(per_row) * in_b / 2.0**lp.exponent
                if not options.lazy:  # one rescale per product, each adding rounding noise
                    err += math.sqrt(per_row) * _rescale_noise(n, parts) / 2.0 ** (plan.log_scales[t] - b)
            else:
                instrs.append(OpSquare((len(instrs),)))
                err = 2 * in_b * err + err * err
                parts = 2 * parts - 1  # 3, or 5 for an open tail (plan.py)
            in_b = seg_bounds[k][t]
            if plan.rescales[t]:
                instrs.append(Rescale(plan.rescales[t], (len(instrs),)))
                level -= plan.rescales[t]
                err += _rescale_noise(n, parts) / 2.0 ** (plan.log_scales[t] - plan.rescales[t] * b)
        out_bound = seg_bounds[k][-1]
        segments.append(
            Segment(
                layout=Layout("batch", packing),
                in_size=op_in_size(ops[0]),
                input_level=plan.top_limbs - 1,
                input_scale=scale_in,
                ops=instrs,
                out_size=op_out_size(ops[-1]),
                output_level=level,
                output_scale=2.0 ** (plan.log_scales[-1] - plan.rescales[-1] * b),
                output_bound=out_bound,
                precision=out_bound * 2.0**-options.precision_bits,
            )
        )
        errors.append(err)
    steps = [Step(list(st), segments[k].out_size, segments[k + 1].in_size) for k, st in enumerate(step_fns)]
    params = {
        "log_n": log_n,
        "log_q": [b] * top,
        "log_p": [p_bits] if p_bits else [],
        "log_scale": min(b - 1, 60),
        "security": options.security,
    }
    return Program(
        params=params,
        **g.io(),
        input_bound=float(seg_in_bounds[0]) * options.headroom,
        pre=list(pre),
        segments=segments,
        steps=steps,
        post=list(post),
        needs_relin_key=bool(p_bits),
        rotation_steps=[],
        meta={
            "mode": "throughput", "lazy": options.lazy, "prime_bits": b, "graph": g.summary(),
            "cost_ns_per_coeff": sum(p.cost for _, p in plans), "predicted_error": errors,
        },
        layers=layers,
    )
