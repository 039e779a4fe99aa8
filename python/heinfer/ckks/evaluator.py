"""The homomorphic evaluator: arithmetic, rescaling, key switching, rotations.

Conventions (the engine's, see CKKS.md): a ciphertext at level ``ℓ`` and scale ``Δ``
decrypts to ``Δ·m mod Q_ℓ``. Additions need equal levels and scales (relative difference
below 2^-20); multiplications multiply the scales and keep the level; :meth:`rescale`
divides by the last prime ``q_ℓ`` (scale ``Δ·Δ'/q_ℓ``, level ``ℓ−1``). Every ``op`` returns a
new ciphertext; ``op_assign`` forms mutate their first argument in place.

Every operation raises ``ParameterError`` for operands of other parameters, ``LevelError`` /
``ScaleError`` for mismatched levels / scales, ``OperandError`` for a ciphertext of the wrong
size, and ``MissingKeyError`` when a needed key is absent.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterable
from typing import Any, Sequence

from heinfer import _native
from heinfer.ckks.objects import (
    Ciphertext,
    ExtendedCiphertext,
    GaloisKeys,
    Plaintext,
    RelinKey,
    _check_params,
)
from heinfer.ckks.params import CkksParameters
from heinfer.errors import LevelError

__all__ = ["Evaluator"]


def _r(x: object, cls: type, name: str) -> Any:
    if not isinstance(x, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(x).__name__}")
    return x._raw  # type: ignore[attr-defined]


def _ct(x: object, name: str = "ct") -> Any:
    return _r(x, Ciphertext, name)


def _own(a: Ciphertext, b: object) -> Any:
    """``b``'s native object, copied when it is ``a`` itself (``a ← a op a``)."""
    return b._raw.clone() if b is a else b._raw  # type: ignore[attr-defined]


class Evaluator:
    """Homomorphic operations for one parameter set. Holds no key (keys are arguments), so
    one evaluator serves many clients; cheap to create. Thread-safe: the GIL is released
    while an operation runs."""

    __slots__ = ("_raw", "_params")

    def __init__(self, params: CkksParameters) -> None:
        self._params = _check_params(params)
        self._raw = _native.Evaluator(self._params._raw)

    @property
    def params(self) -> CkksParameters:
        """The parameter set."""
        return self._params

    def _wrap(self, raw: object) -> Ciphertext:
        return Ciphertext._wrap(raw, self._params)

    def _wrap_ext(self, raw: object) -> ExtendedCiphertext:
        return ExtendedCiphertext._wrap(raw, self._params)

    def _scale(self, scale: float | None) -> float:
        return self._params.default_scale if scale is None else float(scale)

    # ------------------------------------------------------------------ addition
    def add(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a + b`` (same level and scale; sizes may differ)."""
        return self._wrap(self._raw.add(_ct(a, "a"), _ct(b, "b")))

    def add_assign(self, a: Ciphertext, b: Ciphertext) -> None:
        """``a ← a + b``."""
        _ct(a, "a"), _ct(b, "b")
        self._raw.add_assign(a._raw, _own(a, b))

    def sub(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a − b``."""
        return self._wrap(self._raw.sub(_ct(a, "a"), _ct(b, "b")))

    def sub_assign(self, a: Ciphertext, b: Ciphertext) -> None:
        """``a ← a − b``."""
        _ct(a, "a"), _ct(b, "b")
        self._raw.sub_assign(a._raw, _own(a, b))

    def neg(self, a: Ciphertext) -> Ciphertext:
        """``−a``."""
        return self._wrap(self._raw.neg(_ct(a, "a")))

    def neg_assign(self, a: Ciphertext) -> None:
        """``a ← −a``."""
        self._raw.neg_assign(_ct(a, "a"))

    def add_plain(self, ct: Ciphertext, pt: Plaintext) -> Ciphertext:
        """``ct + pt`` (plaintext at the ciphertext's level or above, same scale)."""
        return self._wrap(self._raw.add_plain(_ct(ct), _r(pt, Plaintext, "pt")))

    def add_plain_assign(self, ct: Ciphertext, pt: Plaintext) -> None:
        """``ct ← ct + pt``."""
        self._raw.add_plain_assign(_ct(ct), _r(pt, Plaintext, "pt"))

    def sub_plain(self, ct: Ciphertext, pt: Plaintext) -> Ciphertext:
        """``ct − pt``."""
        return self._wrap(self._raw.sub_plain(_ct(ct), _r(pt, Plaintext, "pt")))

    def add_const(self, ct: Ciphertext, c: float) -> Ciphertext:
        """``ct + c`` in every slot (``c`` encoded at the ciphertext's scale)."""
        return self._wrap(self._raw.add_const(_ct(ct), float(c)))

    def add_const_complex(self, ct: Ciphertext, c: complex) -> Ciphertext:
        """``ct + c`` in every slot for a complex constant."""
        c = complex(c)
        return self._wrap(self._raw.add_const_complex(_ct(ct), c.real, c.imag))

    def add_any(self, ct: Ciphertext, other: object) -> Ciphertext:
        """``ct + other`` for a ciphertext, a plaintext, or a real/complex constant."""
        if isinstance(other, Ciphertext):
            return self.add(ct, other)
        if isinstance(other, Plaintext):
            return self.add_plain(ct, other)
        if isinstance(other, numbers.Real):
            return self.add_const(ct, float(other))
        if isinstance(other, numbers.Complex):
            return self.add_const_complex(ct, complex(other))
        raise TypeError(f"cannot add a {type(other).__name__} to a Ciphertext")

    # ------------------------------------------------------------------ multiplication
    def mul_plain(self, ct: Ciphertext, pt: Plaintext) -> Ciphertext:
        """``ct · pt`` slot-wise, no rescale: scale ``Δ_ct·Δ_pt``."""
        return self._wrap(self._raw.mul_plain(_ct(ct), _r(pt, Plaintext, "pt")))

    def mul_plain_assign(self, ct: Ciphertext, pt: Plaintext) -> None:
        """``ct ← ct · pt``."""
        self._raw.mul_plain_assign(_ct(ct), _r(pt, Plaintext, "pt"))

    def mul_const(self, ct: Ciphertext, c: float, scale: float | None = None) -> Ciphertext:
        """``ct · c`` for a real constant encoded as ``round(c·scale)``, no rescale.

        The result's scale is ``ct.scale · scale`` (default ``scale``: ``params.default_scale``).
        Passing ``scale = params.q[ct.level]`` makes the next :meth:`rescale` restore
        ``ct.scale`` exactly.
        """
        return self._wrap(self._raw.mul_const(_ct(ct), float(c), self._scale(scale)))

    def mul_const_assign(self, ct: Ciphertext, c: float, scale: float | None = None) -> None:
        """``ct ← ct · c`` (see :meth:`mul_const`)."""
        self._raw.mul_const_assign(_ct(ct), float(c), self._scale(scale))

    def mul_const_complex(
        self, ct: Ciphertext, c: complex, scale: float | None = None
    ) -> Ciphertext:
        """``ct · c`` for a complex constant ``c = u + iv``: ``u·ct + v·X^{N/2}·ct``
        (``X^{N/2}`` multiplies every slot by ``i``). Scale as in :meth:`mul_const`."""
        c = complex(c)
        return self._wrap(self._raw.mul_const_complex(_ct(ct), c.real, c.imag, self._scale(scale)))

    def mul(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a · b`` without relinearization: the tensor product
        ``(a_0 b_0, a_0 b_1 + a_1 b_0, a_1 b_1)``, size 3, scale ``Δ_a·Δ_b``."""
        return self._wrap(self._raw.mul(_ct(a, "a"), _ct(b, "b")))

    def square(self, a: Ciphertext) -> Ciphertext:
        """``a²`` without relinearization (one product fewer than ``mul(a, a)`` per pair of
        parts): size 2 → 3, or size 3 (a square not relinearized) → 5, which is decrypted
        with ``s³`` and ``s⁴`` but cannot be relinearized or squared again."""
        return self._wrap(self._raw.square(_ct(a, "a")))

    def relinearize(self, ct: Ciphertext, rlk: RelinKey) -> Ciphertext:
        """Size 3 → 2 by key-switching ``c_2·s²`` to ``s`` (size 2 is returned unchanged)."""
        return self._wrap(self._raw.relinearize(_ct(ct), _r(rlk, RelinKey, "rlk")))

    def relinearize_assign(self, ct: Ciphertext, rlk: RelinKey) -> None:
        """In-place :meth:`relinearize`."""
        self._raw.relinearize_assign(_ct(ct), _r(rlk, RelinKey, "rlk"))

    def mul_relin(self, a: Ciphertext, b: Ciphertext, rlk: RelinKey) -> Ciphertext:
        """``relinearize(a · b)``."""
        return self._wrap(self._raw.mul_relin(_ct(a, "a"), _ct(b, "b"), _r(rlk, RelinKey, "rlk")))

    # ------------------------------------------------------------------ levels
    def rescale(self, ct: Ciphertext) -> Ciphertext:
        """Divides by the last prime with rounding: ``⌊c/q_ℓ⌉`` modulo ``Q_{ℓ−1}``; scale
        ``Δ/q_ℓ``, level ``ℓ−1``. Raises ``LevelError`` at level 0."""
        return self._wrap(self._raw.rescale(_ct(ct)))

    def rescale_assign(self, ct: Ciphertext) -> None:
        """In-place :meth:`rescale`."""
        self._raw.rescale_assign(_ct(ct))

    def rescale_many_assign(self, cts: Iterable[Ciphertext]) -> None:
        """In-place :meth:`rescale` of each of ``cts`` (distinct ciphertexts), spread over the
        engine's threads: bit-identical to rescaling one by one, faster on several cores when
        each is small (few limbs). Every one is checked first: on an error none is rescaled."""
        cts = list(cts)
        if len({id(c) for c in cts}) != len(cts):
            from heinfer.errors import OperandError

            raise OperandError("rescale_many_assign: a ciphertext appears twice in the list")
        self._raw.rescale_many_assign([_ct(c) for c in cts])

    def drop_level(self, ct: Ciphertext, levels: int = 1) -> Ciphertext:
        """Drops the last ``levels`` primes without scaling (message and scale unchanged)."""
        _ct(ct)
        levels = operator.index(levels)
        if not 0 <= levels <= ct.level:
            raise LevelError(f"cannot drop {levels} levels: operand is at level {ct.level}")
        return self._wrap(self._raw.drop_level(ct._raw, levels))

    def drop_to_level(self, ct: Ciphertext, level: int) -> Ciphertext:
        """Drops primes until ``ct`` is at ``level`` (≤ its level)."""
        _ct(ct)
        level = operator.index(level)
        if not 0 <= level <= ct.level:
            raise LevelError(f"cannot drop to level {level}: operand is at level {ct.level}")
        return self._wrap(self._raw.drop_to_level(ct._raw, level))

    # ------------------------------------------------------------------ rotations
    def _steps(self, steps: Iterable[int]) -> list[int]:
        slots = self._params.slots
        return [operator.index(k) % slots for k in steps]

    def rotate(self, ct: Ciphertext, k: int, keys: GaloisKeys) -> Ciphertext:
        """Rotates the slots left by ``k`` (right for negative ``k``):
        ``out[i] = in[(i + k) mod N/2]`` (``np.roll(x, -k)``). Applies ``σ_g: X ↦ X^g``,
        ``g = 5^k mod 2N``, then key-switches ``s(X^g)`` back to ``s``."""
        return self._wrap(
            self._raw.rotate(_ct(ct), self._steps([k])[0], _r(keys, GaloisKeys, "keys"))
        )

    def rotate_many(
        self, cts: Iterable[Ciphertext], steps: Iterable[int], keys: GaloisKeys
    ) -> list[Ciphertext]:
        """``[rotate(c, k) for c, k in zip(cts, steps)]`` (as many steps as ciphertexts), the
        independent rotations spread over the engine's threads: bit-identical to rotating one
        by one, faster on several cores when each rotation is small (few limbs)."""
        cts, steps = list(cts), list(steps)
        if len(cts) != len(steps):
            from heinfer.errors import OperandError

            raise OperandError(f"rotate_many: {len(cts)} ciphertexts but {len(steps)} steps")
        raws = self._raw.rotate_many([_ct(c) for c in cts], self._steps(steps), _r(keys, GaloisKeys, "keys"))
        return [self._wrap(r) for r in raws]

    def fold(self, cts: Iterable[Ciphertext], steps: Iterable[int], keys: GaloisKeys) -> list[Ciphertext]:
        """Rotate-and-add folds: for each ciphertext, ``c ← c + rotate(c, s)`` for each ``s`` of
        ``steps`` in order; returns new ciphertexts. With steps ``m, 2m, …, 2^(t−1)·m`` slot
        ``i`` of the result is ``Σ_{j<2^t} c[i + j·m]``. One engine call for the whole chain
        (the ciphertexts in parallel): bit-identical to :meth:`rotate` and :meth:`add` in a
        loop, without a call per step."""
        raws = self._raw.fold([_ct(c) for c in cts], self._steps(list(steps)), _r(keys, GaloisKeys, "keys"))
        return [self._wrap(r) for r in raws]

    def conjugate(self, ct: Ciphertext, keys: GaloisKeys) -> Ciphertext:
        """Complex conjugation of every slot (``g = 2N − 1``)."""
        return self._wrap(self._raw.conjugate(_ct(ct), _r(keys, GaloisKeys, "keys")))

    def apply_galois(self, ct: Ciphertext, g: int, keys: GaloisKeys) -> Ciphertext:
        """Applies ``σ_g`` for a raw Galois element ``g`` (odd, below ``2N``)."""
        g = operator.index(g)
        if not 0 < g < 2 * self._params.n or g % 2 == 0:
            from heinfer.errors import OperandError

            raise OperandError(f"invalid Galois element {g}: it must be odd and below 2N")
        return self._wrap(self._raw.apply_galois(_ct(ct), g, _r(keys, GaloisKeys, "keys")))

    def rotate_hoisted(
        self, ct: Ciphertext, steps: Iterable[int], keys: GaloisKeys
    ) -> list[Ciphertext]:
        """Rotations of one ciphertext by each of ``steps``, sharing one digit decomposition
        of ``c_1`` (hoisting, Halevi–Shoup): the result equals ``[rotate(ct, k) for k in
        steps]`` at a fraction of the cost."""
        raws = self._raw.rotate_hoisted(_ct(ct), self._steps(steps), _r(keys, GaloisKeys, "keys"))
        return [self._wrap(r) for r in raws]

    def rotate_hoisted_extended(
        self, ct: Ciphertext, steps: Iterable[int], keys: GaloisKeys
    ) -> list[ExtendedCiphertext]:
        """Like :meth:`rotate_hoisted` but returns ``P·rot_k(ct)`` over ``Q_ℓ ∪ P`` without
        the ModDown: combine with :meth:`mul_plain_extended` / :meth:`mul_const_extended` /
        :meth:`add_extended_assign` and finish with one :meth:`mod_down_extended`."""
        raws = self._raw.rotate_hoisted_extended(
            _ct(ct), self._steps(steps), _r(keys, GaloisKeys, "keys")
        )
        return [self._wrap_ext(r) for r in raws]

    def rotate_hoisted_many(
        self, cts: Iterable[Ciphertext], steps: Iterable[Iterable[int]], keys: GaloisKeys
    ) -> list[list[Ciphertext]]:
        """``[rotate_hoisted(c, s) for c, s in zip(cts, steps)]`` (a list of steps per
        ciphertext) in one engine call, in parallel across the ciphertexts as well as their
        steps: bit-identical to one call per ciphertext."""
        cts, steps = self._each(cts, steps, "rotate_hoisted_many")
        raws = self._raw.rotate_hoisted_many([_ct(c) for c in cts], steps, _r(keys, GaloisKeys, "keys"))
        return [[self._wrap(r) for r in rs] for rs in raws]

    def rotate_hoisted_extended_many(
        self, cts: Iterable[Ciphertext], steps: Iterable[Iterable[int]], keys: GaloisKeys
    ) -> list[list[ExtendedCiphertext]]:
        """:meth:`rotate_hoisted_many` for :meth:`rotate_hoisted_extended`."""
        cts, steps = self._each(cts, steps, "rotate_hoisted_extended_many")
        raws = self._raw.rotate_hoisted_extended_many([_ct(c) for c in cts], steps, _r(keys, GaloisKeys, "keys"))
        return [[self._wrap_ext(r) for r in rs] for rs in raws]

    def _each(self, cts: Iterable[Ciphertext], steps: Iterable[Iterable[int]], op: str) -> tuple[list, list[list[int]]]:
        """``cts`` and a list of steps for each, refusing counts that differ."""
        cts, steps = list(cts), [self._steps(s) for s in steps]
        if len(cts) != len(steps):
            from heinfer.errors import OperandError

            raise OperandError(f"{op}: {len(cts)} ciphertexts but {len(steps)} lists of steps")
        return cts, steps

    def add_extended_assign(self, a: ExtendedCiphertext, b: ExtendedCiphertext) -> None:
        """``a ← a + b`` in the extended basis."""
        _r(a, ExtendedCiphertext, "a"), _r(b, ExtendedCiphertext, "b")
        self._raw.add_extended_assign(a._raw, b._raw.clone() if a is b else b._raw)

    def mul_const_extended(
        self, e: ExtendedCiphertext, c: float, scale: float | None = None
    ) -> ExtendedCiphertext:
        """``e · c`` for a real constant at ``scale`` (default ``params.default_scale``)."""
        return self._wrap_ext(
            self._raw.mul_const_extended(
                _r(e, ExtendedCiphertext, "e"), float(c), self._scale(scale)
            )
        )

    def mul_plain_extended(self, e: ExtendedCiphertext, pt: Plaintext) -> ExtendedCiphertext:
        """``e · pt`` for a plaintext from :meth:`Encoder.encode_extended` at ``e``'s level."""
        return self._wrap_ext(
            self._raw.mul_plain_extended(_r(e, ExtendedCiphertext, "e"), _r(pt, Plaintext, "pt"))
        )

    def mod_down_extended(self, e: ExtendedCiphertext) -> Ciphertext:
        """Divides by ``P`` (with rounding) and returns to ``Q_ℓ``: one ModDown per part."""
        return self._wrap(self._raw.mod_down_extended(_r(e, ExtendedCiphertext, "e")))

    def dot_plain(self, cts: Sequence[Ciphertext], pts: Sequence[Plaintext]) -> Ciphertext:
        """``Σ_t cts[t] · pts[t]`` in one pass (no intermediate ciphertexts, no rescale): the
        inner sum of a linear transform. Same level, size and scale for all ciphertexts, one
        scale for all plaintexts."""
        return self._wrap(
            self._raw.dot_plain([_r(c, Ciphertext, "cts") for c in cts], [_r(p, Plaintext, "pts") for p in pts])
        )

    def dot_plain_extended(self, exts: Sequence[ExtendedCiphertext], pts: Sequence[Plaintext]) -> Ciphertext:
        """``ModDown(Σ_t exts[t] · pts[t])``: a giant step of a double-hoisted baby-step
        giant-step transform (plaintexts from :meth:`Encoder.encode_extended`)."""
        return self._wrap(
            self._raw.dot_plain_extended(
                [_r(e, ExtendedCiphertext, "exts") for e in exts], [_r(p, Plaintext, "pts") for p in pts]
            )
        )

    def dot_plain_groups(
        self, xs: Sequence[Ciphertext], terms: Sequence[Sequence[int]], pts: Sequence[Sequence[Plaintext]]
    ) -> list[Ciphertext]:
        """One :meth:`dot_plain` per group over shared ciphertexts: output ``g`` is
        ``Σ_t xs[terms[g][t]] · pts[g][t]``. Every group is summed in one pass over the
        ciphertexts' columns, so ciphertexts that several groups use (a transform's baby steps)
        are read from memory once; bit-identical to one :meth:`dot_plain` per group."""
        return [
            self._wrap(c)
            for c in self._raw.dot_plain_groups(
                [_r(c, Ciphertext, "xs") for c in xs],
                [[int(t) for t in g] for g in terms],
                [[_r(p, Plaintext, "pts") for p in g] for g in pts],
            )
        ]

    def dot_plain_extended_groups(
        self, xs: Sequence[ExtendedCiphertext], terms: Sequence[Sequence[int]], pts: Sequence[Sequence[Plaintext]]
    ) -> list[Ciphertext]:
        """:meth:`dot_plain_groups` over extended ciphertexts and extended plaintexts: each
        group's sum is brought down to ``Q_ℓ`` (one :meth:`dot_plain_extended` per group)."""
        return [
            self._wrap(c)
            for c in self._raw.dot_plain_extended_groups(
                [_r(e, ExtendedCiphertext, "xs") for e in xs],
                [[int(t) for t in g] for g in terms],
                [[_r(p, Plaintext, "pts") for p in g] for g in pts],
            )
        ]

    def __repr__(self) -> str:
        return f"Evaluator(params_id={self._params.id:#018x})"
