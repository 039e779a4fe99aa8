"""Folds on additive shares: a layer's last rotate-and-add steps, done by each party in the clear.

Layer: ``heinfer.program`` (pure numpy). Latency mode's transforms end with *folds*
(GAZELLE's hybrid method, LoLa's stacked sums): ``v ← v + rot(v, s)`` for each step ``s``, so
output ``j``, read at slot ``q_j``, is the sum of the slots of its *orbit*
``O_j = {q_j + Σ_{s∈T} s mod S : T ⊆ steps}``. A fold is linear, so in the two-party protocol
it need not run on ciphertexts (one key switch per step): the server sends the unfolded
result masked slot by slot, and each party folds its own additive share mod ``p``.

The masks keep what the client sees uniform: the server draws every slot's mask uniformly,
then sets the mask at ``q_j`` so that the masks of ``O_j`` sum to the value the protocol wants
at output ``j`` (the garbled circuit's mask ``r_j``, or 0 for the network's output). The client
decrypts ``z_t + m_t`` for every slot: uniform where a sum is masked by ``r_j``; for the
network's output it learns ``Σ_{t∈O_j} z_t = y_j`` and nothing more about the ``z_t`` (their
masks are uniform subject to summing to 0).

This needs every orbit to hold its own output position once and no other output's position
(:func:`fold_problem`); the compiler moves a layer's folds to the shares only then.

A result whose outputs come in two parts, one in each row of BFV's slots (a square's ``a²``
and cross term, or inputs in row pairs), is summed the same way: each party adds row 1 of its
share into row 0 (:func:`row_sum`) before folding, and every orbit extends to the same slots
of row 1 (``masks_for_folds(..., rows=2)``). Outputs sit in row 0, so the row-1 halves of
disjoint orbits are disjoint too.
"""

from __future__ import annotations

import numpy as np

from heinfer.program.placement import Placement

__all__ = ["fold_at", "fold_offsets", "fold_problem", "fold_slots", "masks_for_folds", "replicated_gather", "row_sum"]


def fold_offsets(steps: tuple[int, ...], slots: int) -> np.ndarray:
    """The ``2^len(steps)`` subset sums of ``steps`` mod ``slots`` (with repetitions): output
    ``j`` of a fold is the sum of the slots ``q_j + offset``."""
    offs = np.zeros(1, dtype=np.int64)
    for s in steps:
        offs = np.concatenate([offs, (offs + int(s)) % slots])
    return offs


def fold_slots(v: np.ndarray, steps: tuple[int, ...], p: int) -> np.ndarray:
    """``v ← v + rot(v, s) mod p`` for each ``s`` of ``steps`` along the last axis (one row of
    ``S`` slots; ``rot(v, s)[i] = v[i + s]``, as BFV's ``rotate_rows``): what the server's
    ``fold_rows`` computes on a ciphertext, on one party's residues."""
    v = np.asarray(v, dtype=np.int64) % p
    for s in steps:
        v = (v + np.roll(v, -int(s), axis=-1)) % p
    return v


def fold_at(v: np.ndarray, ct: np.ndarray, slot: np.ndarray, steps: tuple[int, ...], p: int) -> np.ndarray:
    """``fold_slots(v, steps, p)[ct, slot]`` without folding whole rows: for ``v`` of shape
    ``n_cts × S`` (one row of slots per ciphertext), the sum mod ``p`` of each orbit
    ``slot + offsets mod S`` (:func:`fold_offsets`) in ciphertext ``ct``."""
    s = v.shape[-1]
    offs = fold_offsets(steps, s)
    return (np.asarray(v, dtype=np.int64)[ct[:, None], (slot[:, None] + offs[None, :]) % s] % p).sum(axis=1) % p


def fold_problem(output: Placement, steps: tuple[int, ...]) -> str | None:
    """Why the folds ``steps`` cannot run on shares for outputs placed at ``output`` (None when
    they can): a step out of range, an orbit holding its own output position more than once
    (its mask would count twice), or another output's position (one mask would serve two sums)."""
    slots = output.slots
    if any(not 0 < int(s) < slots for s in steps):
        return f"fold steps {list(steps)} are not all in (0, {slots})"
    if len(steps) > slots.bit_length():
        return f"{len(steps)} fold steps for {slots} slots"
    offs = fold_offsets(steps, slots)
    if output.size * len(offs) > output.n_cts * slots:  # disjoint orbits fit in the slots
        return f"{output.size} orbits of {len(offs)} slots overlap in {output.n_cts} × {slots} slots"
    owner = np.full((output.n_cts, slots), -1, dtype=np.int64)
    owner[output.ct, output.slot] = np.arange(output.size)
    hits = owner[output.ct[:, None], (output.slot[:, None] + offs[None, :]) % slots]
    mine = hits == np.arange(output.size)[:, None]
    if (mine.sum(axis=1) != 1).any():
        return "an orbit holds its own output position more than once"
    if ((hits >= 0) & ~mine).any():
        return "an orbit holds another output's position"
    return None


def row_sum(v: np.ndarray, slots: int, p: int) -> np.ndarray:
    """``v`` (``n_cts × N`` residues) with row 1 of the slots (``slots`` to ``2·slots``) added
    into row 0 mod ``p``; row 1 unchanged: what a row swap and an addition compute on a
    ciphertext, on one party's residues (row 0 only, where outputs are read)."""
    out = np.array(v, dtype=np.int64) % p
    out[:, :slots] = (out[:, :slots] + out[:, slots : 2 * slots]) % p
    return out


def masks_for_folds(masks: np.ndarray, output: Placement, steps: tuple[int, ...], p: int, rows: int = 1) -> np.ndarray:
    """Masks ``m`` (``n_cts × N`` residues, slot rows of ``output.slots`` first) whose folds
    (after :func:`row_sum` with ``rows=2``) equal ``masks`` at the output positions, and equal
    to ``masks`` at every other slot (the caller draws those uniformly):
    ``m[q_j] = masks[q_j] − Σ_{t∈O_j, t≠q_j} masks[t]``, ``O_j`` over both rows with ``rows=2``.
    Requires :func:`fold_problem` to be None (each orbit holds ``q_j`` once, no other
    output position)."""
    s = output.slots
    m = np.array(masks, dtype=np.int64) % p
    ct, slot = output.ct, output.slot
    summed = row_sum(m, s, p) if rows == 2 else m
    others = (fold_at(summed[:, :s], ct, slot, steps, p) - m[ct, slot]) % p
    m[ct, slot] = (m[ct, slot] - others) % p
    return m


def replicated_gather(gather: np.ndarray, steps: tuple[int, ...], slots: int) -> np.ndarray:
    """The input layout after the replication steps ``x ← x + rot(x, r)`` (LoLa's stacking) of
    clean inputs placed by ``gather`` (``n_in × width``, ``-1`` empty): ``n_in × slots``. The
    client can encrypt this layout directly instead of the server rotating. Raises
    ``ValueError`` when a step lands on an occupied slot (the result would hold sums)."""
    n_in, width = gather.shape
    elems = np.full((n_in, slots), -1, dtype=np.int64)
    elems[:, :width] = gather
    for r in steps:
        moved = np.roll(elems, -int(r), axis=1)
        if ((elems >= 0) & (moved >= 0)).any():
            raise ValueError("a replication step overlaps its input: its slots hold sums")
        elems = np.where(elems >= 0, elems, moved)
    return elems
