"""The slot layout (latency mode) in :func:`heinfer.compiler.simulate.simulate`.

Layer: ``heinfer.compiler`` (reads a :class:`~heinfer.program.Program`; no keys, no engine).
One segment of a latency-mode program on every item at once, in float64, as
:class:`heinfer.runtime.slots.PreparedSlots` runs it: the client places each item's values
with the segment's gather map (as ``heinfer.protocol.layouts.input_rows`` does), each linear
layer runs its :class:`~heinfer.program.transform.Transform` (replications, baby and giant
steps, folds, bias) on the slot vectors, squares square, and the outputs are read at the
segment's output placement. Without a random generator nothing is rounded: a check of a
compiled plan against its model, without keys, in milliseconds.

With one, each error of the encrypted run is drawn (an error of variance ``v`` per ring
coefficient at scale ``Δ`` is ``√(N·v/2)/Δ`` in a slot's real part, as in
:mod:`heinfer.compiler.simulate`):

* the client's encoding and secret-key encryption, ``v = 1/12 + σ²``;
* each diagonal, encoded once per program at the scale ``q_ℓ`` of the prime its layer's
  rescale removes: ``v = 1/12`` at ``q_ℓ`` in each slot of each diagonal, the same for every
  item (the slot layout's weight rounding);
* each rotation (baby steps, giant steps, folds, replications) a key switch,
  :func:`keyswitch_variance`, at the scale it runs at: baby steps and replications at the
  input's ``Δ``; giant steps and folds at the product scale ``Δ·q_ℓ``, where it is ``q_ℓ``
  times smaller. Double hoisting keeps the rotated inputs in ``Q·P`` and divides by ``P``
  only after their products, but their key-switching error, multiplied by the same
  plaintexts, is the same as single hoisting's to first order;
* each rescale (a layer's and the squares'), :func:`rescale_variance`; a relinearization, a
  key switch at ``Δ²``. Biases are taken as exact.

The roundings of a rescale and of a key switch's ModDown, ``δ_0 + δ_1·s (+ δ_2·s²)``, are
multiplied by the secret key: in slot ``j`` by ``s(ζ_j)``, whose ``|s(ζ_j)|²`` is about
exponential over the slots of one key (:func:`secret_in_slots`, drawn once per simulated run
and kept for all its segments, as one session's key is). :func:`rounded` draws them with that
factor in the slot they land in; the key switch's own error ``Σ_j D_j·e_j / P`` does not
involve ``s`` (:func:`keyswitched`). The mean over slots is the same as without the factor;
the few slots where a key's embedding is large carry more than the average error in every
rescale and key switch of the run. At the bundled models' sizes it moves the largest error
little (20 runs of ``test_noise.py``'s network: 1.2–2.3 released precisions simulated either
way, encrypted 1.2–2.2); the wider run-to-run spread encrypted runs used to show came from a
fixed offset of rounded results, since removed (docs/benchmarks-history.md, "Fixed offsets").

The model was checked against encrypted runs of CryptoNets, LoLa-Small and CryptoNets-ReLU at
22-bit scales, where the noise dominates (``tests/python/compiler/test_simulate.py`` on the
small test networks). Slots are real here: the imaginary parts the noise gives each slot are
not carried (a square mixes them in at second order only).
"""

from __future__ import annotations

import math

import numpy as np

from heinfer.compiler.throughput import SIGMA
from heinfer.errors import NotSupportedYetError
from heinfer.program.model import Program, Segment
from heinfer.program.ops import DropTo, Linear, Relinearize, Rescale, Square
from heinfer.program.transform import Transform

__all__ = ["keyswitch_variance", "keyswitched", "noisy", "rescale_variance", "rounded", "secret_in_slots", "slot_segment"]


def keyswitch_variance(log_q: list, log_p: list, limbs: int, n: int) -> float:
    """Variance per ring coefficient a key switch adds at ``limbs`` limbs of ``Q`` (bit sizes
    ``log_q``; special primes ``log_p``, as many per digit): ``Σ_j D_j·e_j / P`` with the
    engine's balanced digits (``E[D_j²] = α_j·Q_j²/12``, ``heinfer_math::rns``) and the key's
    Gaussian error, plus ModDown's rounding — the engine's ``NoiseModel::key_switch``."""
    alpha = max(len(log_p), 1)
    bits_p = float(sum(log_p))
    var = 0.0
    for j in range(0, limbs, alpha):
        digit = log_q[j : min(j + alpha, limbs)]
        var += n * SIGMA**2 * len(digit) * 2.0 ** (2.0 * (sum(digit) - bits_p)) / 12.0
    return var + rescale_variance(n, 2)


def rescale_variance(n: int, parts: int) -> float:
    """Variance per ring coefficient a rescale's rounding adds to a ciphertext of ``parts``
    parts: ``(1 + 2N/3)/12`` (the secret's coefficients summed: uniform ternary), plus
    ``8N²/9``/12 for the third part of an unrelinearized square."""
    return (1.0 + 2.0 * n / 3.0 + (8.0 * n * n / 9.0 if parts == 3 else 0.0)) / 12.0


def secret_in_slots(key: dict, rng: np.random.Generator, n: int) -> np.ndarray:
    """``|s(ζ_j)|² / E|s(ζ_j)|²`` for every slot ``j`` of the run's secret key ``s``, drawn
    once per run (``key`` keeps it): a uniform ternary secret's embedding is about complex
    Gaussian in each slot, so this is exponential with mean 1."""
    if "slots" not in key:
        key["slots"] = rng.exponential(1.0, n // 2)
    return key["slots"]


def rounded(x: np.ndarray, parts: int, scale: float, n: int, rng: np.random.Generator | None, a: np.ndarray) -> np.ndarray:
    """``x`` plus the rounding ``δ_0 + δ_1·s (+ δ_2·s²)`` of a rescale or a ModDown of a
    ciphertext of ``parts`` parts at ``scale``, each value in the slot whose key factor ``a``
    (:func:`secret_in_slots`, broadcast along ``x``'s last axis) it lands in:
    ``N/2 · (1 + h·a + h₂·a²/2)/12`` per real value, ``h = 2N/3``, ``h₂ = 8N²/9`` for three
    parts — over the slots the mean of :func:`rescale_variance`. ``x`` itself without ``rng``."""
    if rng is None:
        return x
    h, h2 = 2.0 * n / 3.0, (8.0 * n * n / 9.0 if parts == 3 else 0.0)
    std = np.sqrt(n / 2.0 * (1.0 + h * a + h2 * a * a / 2.0) / 12.0) / scale
    return x + rng.normal(0.0, 1.0, x.shape) * std


def keyswitched(x: np.ndarray, ks: float, scale: float, n: int, rng: np.random.Generator | None, a: np.ndarray) -> np.ndarray:
    """``x`` plus a key switch's error at ``scale``: ``ks`` (:func:`keyswitch_variance`) less
    its ModDown rounding, which :func:`rounded` draws per slot with the key factor ``a``."""
    return rounded(noisy(x, ks - rescale_variance(n, 2), scale, n, rng), 2, scale, n, rng, a)


def slot_segment(
    program: Program, seg: Segment, y: np.ndarray, n: int, rng: np.random.Generator | None, key: dict | None = None,
) -> np.ndarray:
    """Segment ``seg`` on values ``y`` ``(items, in_size)`` → ``(items, out_size)``, its
    errors drawn from ``rng`` (nothing rounded without it); ``key`` keeps the run's
    :func:`secret_in_slots` across segments (a fresh key without it)."""
    log_q = [float(b) for b in program.params["log_q"]]
    log_p = [float(b) for b in program.params["log_p"]]
    q = [2.0**b for b in log_q]
    g = seg.layout.gather
    x = np.where(g >= 0, y[:, np.maximum(g, 0)], 0.0)  # (items, input ciphertexts, S)
    a = secret_in_slots({} if key is None else key, rng, n)[: x.shape[-1]] if rng is not None else None
    scale, level, parts = seg.input_scale, seg.input_level, 2
    x = noisy(x, 1.0 / 12.0 + SIGMA**2, scale, n, rng)
    for i, op in enumerate(seg.ops):
        if tuple(op.inputs) != (i,):
            raise NotSupportedYetError(f"simulating op {i} of a segment: it reads values {tuple(op.inputs)}, only chains are supported yet")
        ks = keyswitch_variance(log_q, log_p, level + 1, n)
        if isinstance(op, Linear):
            x = _transform(program.layers[op.layer], x, scale, q[level], ks, n, rng, a)
            level -= 1
        elif isinstance(op, Square):
            x = x * x
            scale *= scale
            parts = 3
        elif isinstance(op, Relinearize):
            x = keyswitched(x, ks, scale, n, rng, a)
            parts = 2
        elif isinstance(op, Rescale):
            for _ in range(op.primes):
                scale /= q[level]
                level -= 1
            x = rounded(x, parts, scale, n, rng, a)
        elif isinstance(op, DropTo):
            level = op.level
        else:
            raise NotSupportedYetError(f"simulating a {type(op).__name__} op in the slot layout is not supported yet")
    return seg.output.gather(x)


def _transform(
    t: Transform, x: np.ndarray, scale: float, q_l: float, ks: float, n: int, rng: np.random.Generator | None, factors: np.ndarray | None,
) -> np.ndarray:
    """One linear layer on ``x`` ``(items, n_in, S)`` at ``scale``, its rescale by ``q_l``
    included: ``(items, n_out, S)`` at ``scale`` (see the module documentation; ``factors``:
    the key's :func:`secret_in_slots`)."""
    product = scale * q_l
    for r in t.replicate:
        x = x + keyswitched(np.roll(x, -r, axis=2), ks, scale, n, rng, factors)
    vectors = t.vectors if rng is None else t.vectors + rng.normal(0.0, math.sqrt(n / 24.0) / q_l, t.vectors.shape)
    rotated: dict[tuple[int, int], np.ndarray] = {}

    def baby(a: int, b: int) -> np.ndarray:
        if (a, b) not in rotated:
            r = np.roll(x[:, a], -b, axis=1)
            rotated[(a, b)] = keyswitched(r, ks, scale, n, rng, factors) if b else r
        return rotated[(a, b)]

    out = np.zeros((x.shape[0], t.n_out, t.slots))
    for o, gs, ix in t.groups():
        acc = np.zeros((x.shape[0], t.slots))
        for i in ix:
            _, _, a, b = t.terms[i]
            acc += vectors[i] * baby(int(a), int(b))
        if gs:
            acc = keyswitched(np.roll(acc, -int(gs), axis=1), ks, product, n, rng, factors)
        out[:, o] += acc
    for s in t.fold:
        out = out + keyswitched(np.roll(out, -s, axis=2), ks, product, n, rng, factors)
    out = rounded(out, 2, scale, n, rng, factors)
    return out if t.bias is None else out + t.bias


def noisy(x: np.ndarray, var: float, scale: float, n: int, rng: np.random.Generator | None, coefficients: bool = False) -> np.ndarray:
    """``x`` plus an error of variance ``var`` per ring coefficient at ``scale``, in each slot
    (the canonical embedding sums ``N`` coefficients: ``N·var/2`` per real value) or, with
    ``coefficients`` (coefficient packing), in each coefficient; ``x`` itself without ``rng``."""
    if rng is None or var <= 0.0:
        return x
    per_value = var if coefficients else var * n / 2.0
    return x + rng.normal(0.0, math.sqrt(per_value) / scale, x.shape)
