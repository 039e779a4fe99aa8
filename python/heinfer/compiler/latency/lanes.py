"""Several items per ciphertext in the slot layout: a program compiled for ``S/m`` slots,
widened to ``m`` interleaved lanes of ``S = N/2`` slots.

Layer: ``heinfer.compiler`` (pure Python + numpy). **The math.** Put item ``j`` of ``m`` at the
slots ``≡ j (mod m)``: ``x'[i·m + j] = x_j[i]`` for vectors ``x_j`` of ``S' = S/m`` slots. A
rotation by a multiple of ``m`` moves every lane within itself,

    rot(x', k·m)[i·m + j] = x'[((i + k) mod S')·m + j] = x_j[(i + k) mod S'] = rot(x_j, k)[i],

and a plaintext that repeats each value ``m`` times, ``v' = repeat(v, m)``, multiplies every
lane by the same ``v``: ``(v' ⊙ x')[i·m + j] = v[i]·x_j[i]``. So a
:class:`~heinfer.program.transform.Transform` ``Σ_{a,d} v_{a,o,d} ⊙ rot(x_a, d)`` compiled for
``S'`` slots, with every step (giant, baby, fold, replication) times ``m`` and every plaintext
and bias repeated, computes the same map on each of ``m`` items at once; squares,
relinearizations and rescales act slot by slot. The server's work per ciphertext is that of
one item on ``S'`` slots; a query carries ``m`` items. The ring and the security stay those of
``N``; what the layouts lose is the ``S − S'`` spare slots LoLa's stacked copies could have used.

The client (:mod:`heinfer.protocol.layouts`) fills lane ``j`` with item ``j`` through the gather
map, which names lane 0 only, and reads lane ``j`` of the output placement.
"""

from __future__ import annotations

import numpy as np

from heinfer.program.placement import Placement
from heinfer.program.transform import Transform

__all__ = ["widen_gather", "widen_placement", "widen_transform"]


def widen_transform(t: Transform, m: int) -> Transform:
    """``t`` (on ``S'`` slots) acting on ``m`` interleaved lanes of ``m·S'`` slots."""
    terms = t.terms.copy()
    terms[:, 1] *= m  # giant steps
    terms[:, 3] *= m  # baby steps
    bias = None if t.bias is None else np.repeat(t.bias, m, axis=1)
    return Transform(
        t.n_in, t.n_out, t.slots * m, terms, np.repeat(t.vectors, m, axis=1), bias,
        tuple(s * m for s in t.fold), tuple(s * m for s in t.replicate), t.hoisting,
    )


def widen_gather(gather: np.ndarray, m: int) -> np.ndarray:
    """A gather map of ``S'`` slots per ciphertext → lane 0 of ``m`` lanes (−1 elsewhere)."""
    out = np.full((len(gather), gather.shape[1] * m), -1, dtype=np.int64)
    out[:, ::m] = gather
    return out


def widen_placement(p: Placement, m: int) -> Placement:
    """An output placement of ``S'`` slots → lane 0 of ``m`` lanes."""
    return Placement(p.n_cts, p.slots * m, p.ct, p.slot * m)
