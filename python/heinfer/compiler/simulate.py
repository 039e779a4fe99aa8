"""What an encrypted run of a throughput-mode program would return, simulated in the clear.

Layer: ``heinfer.compiler`` (reads a :class:`~heinfer.program.Program`; no keys, no engine).
A throughput plan fixes every rounding the encrypted run makes: the weights at each layer's
scale ``Δ_w``, the inputs at each segment's scale ``Δ_in``, the rescales, the rounded wire
format of each output, the released precision of the result. :func:`simulate` runs the
program's layers in float64 with each of those errors drawn from its distribution, so the
error a set of compile options gives (``input_bits``, ``weight_bits``, ``precision_bits``) can
be read in seconds, where an encrypted run of a large network takes minutes. Per value, with
``v`` the variance of an error per ring coefficient (in the integer units of its scale ``Δ``)
and ``N`` the ring degree:

* coefficient packing (one item per coefficient): ``std = √v / Δ``;
* slot packing (real or complex; the canonical embedding sums ``N`` coefficients into each
  slot): ``std = √(N·v/2) / Δ`` for each real value.

The errors: encoding and fresh (secret-key) encryption ``v = 1/12 + σ²`` (``σ = 3.19``); a
rescale's rounding of every part, ``v = (1 + h + h₂)/12`` with ``h = 2N/3`` (the variance of
``s``'s coefficients summed: a uniform ternary secret) and, for the 3-part ciphertext a
square leaves until it is relinearized, ``h₂ = 8N²/9`` (``‖s²‖²``); a relinearization's key
switching (:func:`~heinfer.compiler.simulate_slots.keyswitch_variance`: balanced digits, the
key's error, ModDown's rounding) — in slot packing, the roundings the secret multiplies
(``δ_1·s``, ``δ_2·s²``) drawn per slot with the run's key factor ``|s(ζ_j)|²``
(:func:`~heinfer.compiler.simulate_slots.rounded`; one key per simulated run, over all its
segments); a rounded output the budget ``σ`` of
:func:`heinfer.program.rounding.output_rounding_std` (an upper bound: the dropped bits give
at most that); the result flooded with Gaussian noise of deviation ``precision/2`` and
rounded to ``precision``, as the client releases it. Weights are rounded exactly as the
runtime quantizes them (``rint(W·Δ_w)/Δ_w``); biases, encoded at a layer's product scale,
are taken as exact.

Latency-mode (slot-layout) segments are simulated by :mod:`heinfer.compiler.simulate_slots`
(the same errors, plus each diagonal's encoding and the key switches of the rotations).

What it does not model: the centred reduction of a value beyond its modulus (the encrypted
run fails or wraps there; the simulation shows a plain number). Two-party programs have no
error to model: :mod:`heinfer.compiler.simulate_two_party` runs them exactly, as the protocol
computes.
"""

from __future__ import annotations

import numpy as np

from heinfer.compiler.simulate_slots import keyswitch_variance, keyswitched, noisy, rescale_variance, rounded, secret_in_slots, slot_segment
from heinfer.compiler.simulate_two_party import simulate_two_party
from heinfer.compiler.throughput import SIGMA
from heinfer.errors import CompileError, NotSupportedYetError
from heinfer.program.model import Program, Segment, op_input_parts
from heinfer.program.ops import DropTo, Linear, Relinearize, Rescale, Square
from heinfer.program.rounding import output_rounding_std
from heinfer.program.two_party import TwoPartyProgram

__all__ = ["output_noise", "simulate"]


def simulate(program: Program, x: np.ndarray, seed: int | None = 0, errors: bool = True) -> np.ndarray:
    """The outputs ``(batch, *output_shape)`` an encrypted run of ``program`` on ``x``
    ``(batch, *input_shape)`` would give, its rounding and noise drawn with ``seed`` (a
    model of the errors, not a prediction of one run's digits: see the module
    documentation). ``program``: the server's (it holds the weights), throughput or latency
    mode. ``errors=False``: the plan's layers and steps exactly, nothing rounded (the reference
    the errors are measured from). A two-party program is run exactly, as its protocol
    computes (:func:`~heinfer.compiler.simulate_two_party.simulate_two_party`; ``seed`` and
    ``errors`` do not apply)."""
    if isinstance(program, TwoPartyProgram):  # exact: nothing to draw
        return simulate_two_party(program, x)
    x = _checked(program, x)
    y = _outputs(program, x, np.random.default_rng(seed) if errors else None, release=True)
    for f in program.post:
        y = f.apply(y)
    return y.reshape((x.shape[0], *program.output_shape))


def output_noise(program: Program, x: np.ndarray, seeds: tuple[int, ...] = (0, 1)) -> np.ndarray:
    """The simulated errors ``(len(seeds), batch, out_size)`` of the last segment's outputs on
    ``x`` as the client decrypts them — every error of :func:`simulate` up to the server's
    rounding of the result, before the client's release (flooding and rounding to the stated
    precision) and before the client's last functions. ``program`` as for :func:`simulate`;
    a two-party program's outputs carry no error (zeros, see :mod:`.simulate_two_party`)."""
    if isinstance(program, TwoPartyProgram):
        out = simulate_two_party(program, x)
        return np.zeros((len(seeds), out.shape[0], int(np.prod(out.shape[1:]))))
    x = _checked(program, x)
    exact = _outputs(program, x, None, release=False)
    return np.stack([_outputs(program, x, np.random.default_rng(s), release=False) - exact for s in seeds])


def _checked(program: Program, x: np.ndarray) -> np.ndarray:
    """``x`` as float64, after checking that ``program`` can be simulated on it."""
    if not isinstance(program, Program):
        raise CompileError(f"simulate needs the server's Program (with its weights), got {type(program).__name__}")
    for k, step in enumerate(program.steps):
        if step.protocol != "client-aided":
            raise NotSupportedYetError(f"simulating step {k}: only client-aided steps are supported yet, not {step.protocol!r}")
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1:] != tuple(program.input_shape):
        raise CompileError(f"simulate: input has shape {x.shape}, expected (batch, *{tuple(program.input_shape)})")
    return x


def _outputs(program: Program, x: np.ndarray, rng: np.random.Generator | None, release: bool) -> np.ndarray:
    """The last segment's values ``(batch, out_size)`` on ``x``, errors drawn from ``rng``
    (none without it), after the client's release when ``release``."""
    n = 1 << int(program.params["log_n"])
    y = x.reshape(x.shape[0], -1)
    for f in program.pre:
        y = f.apply(y)
    last = len(program.segments) - 1
    key: dict = {}  # the run's secret key, as far as the errors see it (secret_in_slots)
    for k, seg in enumerate(program.segments):
        if seg.layout.kind == "batch":
            y = _segment(program, seg, y, n, rng, key)
        else:
            y = slot_segment(program, seg, y, n, rng, key)
        if k < last:
            if rng is not None:
                y = _noisy(y, output_rounding_std(program, k) ** 2, seg.output_scale, seg, n, rng)
            y = program.steps[k].apply(y)
    seg = program.segments[-1]
    if rng is not None:
        y = _noisy(y, output_rounding_std(program, last) ** 2, seg.output_scale, seg, n, rng)
        if release:
            y = np.round((y + rng.normal(0.0, seg.precision / 2.0, y.shape)) / seg.precision) * seg.precision
    return y


def _segment(program: Program, seg: Segment, y: np.ndarray, n: int, rng: np.random.Generator | None, key: dict) -> np.ndarray:
    """One segment: its input encrypted, then its ops with their roundings (none without
    ``rng``; ``key`` holds the run's :func:`~heinfer.compiler.simulate_slots.secret_in_slots`)."""
    log_q = [float(b) for b in program.params["log_q"]]
    log_p = [float(b) for b in program.params["log_p"]]
    scale, level = seg.input_scale, seg.input_level
    y = _noisy(y, 1.0 / 12.0 + SIGMA**2, scale, seg, n, rng)
    yt = y.T  # (values, items): the layers' matrices act on the rows
    # parts each op receives: 5 after an open tail, which no rescale follows (validated)
    for i, (op, parts) in enumerate(zip(seg.ops, op_input_parts(seg.ops))):
        if tuple(op.inputs) != (i,):  # what the executor runs: each op on the value before it
            raise NotSupportedYetError(f"simulating op {i} of a segment: it reads values {tuple(op.inputs)}, only chains are supported yet")
        if isinstance(op, Linear):
            step = program.layers[op.layer]
            m = step.matrix
            if rng is not None:
                m = m.copy()
                m.data = np.rint(m.data * step.weight_scale) / step.weight_scale
            yt = np.asarray(m @ yt)
            if step.bias is not None:
                yt = yt + step.bias[:, None]
            scale *= step.weight_scale
        elif isinstance(op, Square):
            yt = yt * yt
            scale *= scale
        elif isinstance(op, Relinearize):
            ks = keyswitch_variance(log_q, log_p, level + 1, n)
            if rng is not None and seg.layout.packing != "coeff":
                yt = keyswitched(yt, ks, scale, n, rng, _item_factors(yt, n, rng, key))
            else:
                yt = _noisy(yt, ks, scale, seg, n, rng)
        elif isinstance(op, Rescale):
            scale /= 2.0 ** sum(log_q[level - op.primes + 1 : level + 1])
            level -= op.primes
            if rng is not None and seg.layout.packing != "coeff":
                yt = rounded(yt, parts, scale, n, rng, _item_factors(yt, n, rng, key))
            else:
                yt = _noisy(yt, rescale_variance(n, parts), scale, seg, n, rng)
        elif isinstance(op, DropTo):
            level = op.level
        else:
            raise NotSupportedYetError(f"simulating a {type(op).__name__} op is not supported yet")
    return yt.T


def _noisy(y: np.ndarray, var: float, scale: float, seg: Segment, n: int, rng: np.random.Generator | None) -> np.ndarray:
    """``y`` plus the error of variance ``var`` per coefficient at ``scale``, embedded as
    ``seg`` packs its values (see the module documentation); ``y`` itself without ``rng``."""
    return noisy(y, var, scale, n, rng, coefficients=seg.layout.packing == "coeff")


def _item_factors(yt: np.ndarray, n: int, rng: np.random.Generator, key: dict) -> np.ndarray:
    """The key factors (:func:`~heinfer.compiler.simulate_slots.secret_in_slots`) of the slots
    of ``yt`` ``(values, items)``'s items: item ``b`` in slot ``b mod N/2``. With squares the
    ``a²`` term of a 3-part rescale gives the few slots where the key's embedding is large
    several times the average error, in every rescale of the run: the heavy tail encrypted
    runs show (one run's largest error over 128 values: 2.3e-3 to 2.1e-2 over 30 encrypted
    runs of a test network, 2.8e-3 to 7.4e-3 simulated before this term)."""
    return secret_in_slots(key, rng, n)[np.arange(yt.shape[1]) % (n // 2)]
