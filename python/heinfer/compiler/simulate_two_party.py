"""Exact simulation of a two-party program: what the protocol computes, without keys.

Layer: ``heinfer.compiler`` (pure numpy, over a :class:`~heinfer.program.two_party.TwoPartyProgram`).

GAZELLE's protocol has no approximation to model: BFV computes the linear layers exactly on
integers mod ``p`` (noise flooding hides the server's noise in the ciphertext, not in the
plaintext it decrypts to), and the garbled circuits reconstruct the additive shares, apply
ReLU or max-pooling and truncate by the fixed-point plan's shift exactly. So running the
server's program on integers mod ``p`` — the transforms' diagonals and rotations in latency
mode, the integer matrices in throughput mode, each step as its circuit computes it — gives the
outputs a protocol run decrypts, digit for digit (tests check it against real runs). Values are
read as signed (above ``(p − 1)/2`` they are negative), as the circuits read them; plaintext
moduli up to 40 bits (BFV's range: :mod:`heinfer.program.modular`'s exact products).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.fixed_point import _signed
from heinfer.errors import CompileError, NotSupportedYetError, RangeError
from heinfer.program.transform import Transform
from heinfer.program.modular import MAX_MODULUS_BITS, matmul_mod
from heinfer.program.two_party import TwoPartyProgram, TwoPartyStep
from heinfer.program.weights import LinearStep

__all__ = ["simulate_two_party"]


def simulate_two_party(program: TwoPartyProgram, x: np.ndarray) -> np.ndarray:
    """The outputs ``(batch, *output_shape)`` a protocol run of ``program`` (the server's, with
    its layers) gives on ``x`` ``(batch, *input_shape)``: exact, see the module documentation.
    Raises :class:`~heinfer.errors.RangeError` for an input beyond the plan's range (the client
    refuses it too) and :class:`~heinfer.errors.CompileError` without the layers."""
    if program.layers is None:
        raise CompileError("simulate needs the server's two-party program (with its layers), got the public part")
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1:] != tuple(program.input_shape):
        raise CompileError(f"simulate: input has shape {x.shape}, expected (batch, *{tuple(program.input_shape)})")
    p = program.plain_modulus
    if p >= 1 << MAX_MODULUS_BITS:  # heinfer.program.modular's products
        raise NotSupportedYetError(f"simulating a two-party program with a {p.bit_length()}-bit plaintext modulus (above {MAX_MODULUS_BITS} bits)")
    y = x.reshape(x.shape[0], -1)
    for f in program.pre:
        y = f.apply(y)
    m = float(np.abs(y).max(initial=0.0))
    if not np.isfinite(m) or m > program.input_bound:  # the client refuses the same inputs
        raise RangeError(
            f"input values reach {m:.4g}, beyond the bound {program.input_bound:.4g} the program was compiled for "
            "(recompile with calibration inputs that cover these inputs)"
        )
    v = np.rint(y * 2.0**program.input_frac).astype(np.int64) % p
    for k, layer in enumerate(program.layers):
        v = _linear(program, k, layer, v, p)
        if k < len(program.steps):
            v = _step(program.steps[k], _signed(v, p)) % p
    out = _signed(v, p).astype(np.float64) / 2.0**program.output_frac
    for f in program.post:
        out = f.apply(out)
    return out.reshape((x.shape[0], *program.output_shape))


def _linear(program: TwoPartyProgram, k: int, layer: Transform | LinearStep, v: np.ndarray, p: int) -> np.ndarray:
    """Segment ``k``'s layer on residues ``v`` ``(items, in_size)`` → residues ``(items, out_size)``."""
    if isinstance(layer, LinearStep):
        w = layer.matrix.tocsc()
        w = sp.csc_matrix((np.rint(w.data).astype(np.int64), w.indices, w.indptr), shape=w.shape)
        out = matmul_mod(w.tocsr(), v, p)
        bias = 0 if layer.bias is None else np.rint(layer.bias).astype(np.int64) % p
        return (out + bias) % p
    seg = program.segments[k]
    g = seg.gather
    slots = np.where(g >= 0, v[:, np.maximum(g, 0)], 0)  # (items, n_in, S): BFV's row 0
    return seg.output.gather(seg.folded(layer.simulate(slots, p), p))  # folds on the shares, if any


def _step(step: TwoPartyStep, s: np.ndarray) -> np.ndarray:
    """A garbled-circuit step on signed values ``s`` ``(items, in_size)``: each instance's
    window (ReLU: one element; max-pooling: the max of the ReLUs), truncated by ``shift``
    (a floor, as the circuit drops the low bits); a clip clamps to its integer bounds first;
    a square step truncates the signed value and
    the AHE protocol squares it; then the optional sum-pool of the instances, and the values
    kept, truncated, in their places."""
    w = s[:, step.groups]  # (items, instances, window)
    if step.kind == "square":
        t = w[..., 0] >> step.shift
        out = t * t
    elif step.kind == "clip":  # bounds at the integers' scale, as the circuit clamps
        out = np.clip(w[..., 0], step.lo, step.hi) >> step.shift
    else:
        out = np.maximum(w, 0).max(axis=-1) >> step.shift
    out = out if step.pool is None else out[:, step.pool].sum(axis=-1)
    if sum(step.keep):  # the values kept: truncated, in their places around the layer's
        kept, before = s[:, step.kept] >> step.shift, step.keep[0]
        out = np.concatenate([kept[:, :before], out, kept[:, before:]], axis=1)
    return out
