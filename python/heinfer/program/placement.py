"""Placements: where each element of one item's tensor lives in ciphertext slots.

Layer: ``heinfer.program`` (pure numpy). Slot layouts (LoLa §2, GAZELLE §5) pack one item
across the ``S = N/2`` slots of a few ciphertexts; a :class:`Placement` says which ciphertext
and slot hold element ``e``. Other slots may hold anything (zeros, partial sums): kernels
never read them because their plaintext diagonals are zero there, and the client reads only
the placed slots.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from heinfer.errors import CompileError

__all__ = ["Placement"]


@dataclass(frozen=True, eq=False)
class Placement:
    """Element ``e`` lives at slot ``slot[e]`` of ciphertext ``ct[e]`` (``n_cts`` ciphertexts
    of ``slots`` slots)."""

    n_cts: int
    slots: int
    ct: np.ndarray
    slot: np.ndarray

    def __post_init__(self) -> None:
        ct, slot = np.asarray(self.ct, np.int64), np.asarray(self.slot, np.int64)
        if ct.shape != slot.shape or ct.ndim != 1:
            raise CompileError("placement: ct and slot must be vectors of one length")
        if len(ct) and (ct.min() < 0 or ct.max() >= self.n_cts or slot.min() < 0 or slot.max() >= self.slots):
            raise CompileError("placement: a position lies outside the ciphertexts")
        if len(np.unique(ct * self.slots + slot)) != len(ct):
            raise CompileError("placement: two elements share a slot")
        object.__setattr__(self, "ct", ct)
        object.__setattr__(self, "slot", slot)

    @property
    def size(self) -> int:
        """Number of elements placed."""
        return len(self.ct)

    @staticmethod
    def dense(n: int, slots: int) -> Placement:
        """Row-major: element ``e`` at ciphertext ``e // S``, slot ``e % S``."""
        e = np.arange(n, dtype=np.int64)
        return Placement(-(-n // slots), slots, e // slots, e % slots)

    def gather(self, cts: np.ndarray) -> np.ndarray:
        """The elements, read from slot values ``(n_cts, S)`` (or ``(batch, n_cts, S)``)."""
        return cts[..., self.ct, self.slot]

    def to_json(self) -> dict:
        """Shape data for a program manifest (the arrays travel separately)."""
        return {"n_cts": self.n_cts, "slots": self.slots}
