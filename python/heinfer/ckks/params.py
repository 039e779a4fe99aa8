"""CKKS parameters: a literal checked on construction, and the presets.

* Ring ``R = Z[X]/(X^N + 1)`` with ``N = 2^log_n``; a ciphertext holds ``N/2`` complex slots.
* Ciphertext modulus ``Q_L = q_0·q_1·…·q_L``: ``q_0`` (``log_q[0]`` bits) bounds the final
  precision, each scale prime ``q_1..q_L`` (≈ Δ = 2^log_scale) is consumed by one rescale, so
  ``L = len(log_q) − 1`` multiplications fit.
* Special primes ``P = p_0·…`` (``log_p``) serve only hybrid key switching, which splits
  ``Q`` into ``β`` digits of ``α`` primes; noise grows with ``Q_digit / P``.
* ``log2(Q_L·P)`` is checked against the HomomorphicEncryption.org table (uniform ternary
  secret): at most 218 bits for ``N = 2^13``, 438 for ``2^14``, 881 for ``2^15`` at 128 bits.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

from heinfer import _native
from heinfer.errors import ParameterError

__all__ = [
    "CkksParameters",
    "PN13_QP218",
    "PN14_QP438",
    "PN15_QP881",
    "INSECURE_LOGN10",
    "INSECURE_LOGN12",
]


def _uint(name: str, value: object, limit: int = 1 << 32) -> int:
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ParameterError(f"{name} must be an integer, got {type(value).__name__}") from None
    if not 0 <= v < limit:
        raise ParameterError(f"{name} = {v} is out of range")
    return v


def _uints(name: str, values: Sequence[int]) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ParameterError(f"{name} must be a sequence of bit sizes")
    return [_uint(f"{name}[{i}]", v, 256) for i, v in enumerate(values)]


class CkksParameters:
    """Checked, immutable CKKS parameters.

    ``CkksParameters(log_n, log_q, log_p, log_scale, digits=None, security=128)`` takes the
    unchecked literal and checks it at once: the primes are generated (``log_q[i]`` and
    ``log_p[j]`` bits, all ``≡ 1 mod 2N``), ``log2(Q·P)`` is checked against the security
    table, and the NTT / key-switching tables are precomputed.

    Args:
        log_n: ``log2`` of the ring degree ``N`` (11..16).
        log_q: bit sizes of ``q_0`` (base prime) then of one scale prime per level.
        log_p: bit sizes of the special primes (at least one).
        log_scale: default scale ``Δ = 2^log_scale`` (10..60).
        digits: number of key-switching digits ``β``; ``None`` picks the fewest digits
            that ``P`` can absorb.
        security: 128, 192 or 256 classical bits.

    Raises:
        ParameterError: the literal is malformed, or ``log2(Q·P)`` exceeds the bound for
            ``N`` at the requested security (the insecure test sets are only reachable
            through :func:`INSECURE_LOGN10` / :func:`INSECURE_LOGN12`).

    Two parameter objects are equal when their ``id`` (a hash of ``N``, the primes, ``α``
    and the security level) is equal; every key, plaintext and ciphertext carries that id.
    """

    __slots__ = ("_raw",)
    _raw: _native.Params

    def __init__(
        self,
        log_n: int,
        log_q: Sequence[int],
        log_p: Sequence[int],
        log_scale: int,
        digits: int | None = None,
        security: int = 128,
    ) -> None:
        d = None if digits is None else _uint("digits", digits, 1 << 16)
        self._raw = _native.Params(
            _uint("log_n", log_n, 64),
            _uints("log_q", log_q),
            _uints("log_p", log_p),
            _uint("log_scale", log_scale, 256),
            d,
            _uint("security", security, 1024),
        )

    @classmethod
    def _wrap(cls, raw: _native.Params) -> CkksParameters:
        obj = cls.__new__(cls)
        obj._raw = raw
        return obj

    # ------------------------------------------------------------------ properties
    @property
    def log_n(self) -> int:
        """``log2 N``."""
        return self._raw.log_n

    @property
    def n(self) -> int:
        """Ring degree ``N``."""
        return self._raw.n

    @property
    def slots(self) -> int:
        """Number of complex slots ``N/2``."""
        return self._raw.slots

    @property
    def max_level(self) -> int:
        """Top level ``L`` = number of scale primes = rescales available to a fresh ciphertext."""
        return self._raw.max_level

    @property
    def q(self) -> tuple[int, ...]:
        """The ciphertext primes ``q_0..q_L``."""
        return tuple(self._raw.q)

    @property
    def p(self) -> tuple[int, ...]:
        """The special (key-switching) primes."""
        return tuple(self._raw.p)

    @property
    def log_q(self) -> tuple[int, ...]:
        """Requested bit sizes of ``q_0..q_L`` (the literal)."""
        return tuple(self._raw.log_q)

    @property
    def log_p(self) -> tuple[int, ...]:
        """Requested bit sizes of the special primes (the literal)."""
        return tuple(self._raw.log_p)

    @property
    def log_scale(self) -> int:
        """``log2`` of the default scale."""
        return self._raw.log_scale

    @property
    def digits(self) -> int | None:
        """The requested number of key-switching digits (``None``: automatic)."""
        return self._raw.digits

    @property
    def alpha(self) -> int:
        """Primes per key-switching digit ``α``."""
        return self._raw.alpha

    @property
    def beta(self) -> int:
        """Key-switching digits at the top level ``β = ⌈(L+1)/α⌉``."""
        return self._raw.beta

    @property
    def log_qp(self) -> float:
        """Exact ``log2(Q_L·P)``."""
        return self._raw.log_qp

    @property
    def id(self) -> int:
        """64-bit id of this parameter set (carried by every object built for it)."""
        return self._raw.id

    @property
    def default_scale(self) -> float:
        """``Δ = 2^log_scale``."""
        return self._raw.default_scale

    @property
    def security(self) -> int:
        """Classical security in bits; 0 for the insecure test presets."""
        return self._raw.security

    def rotation_galois_element(self, k: int) -> int:
        """Galois element ``5^k mod 2N`` of a left rotation by ``k`` slots."""
        return self._raw.rotation_galois_element(operator.index(k) % self.slots)

    def conjugation_galois_element(self) -> int:
        """Galois element ``2N − 1`` of complex conjugation."""
        return self._raw.conjugation_galois_element()

    # ------------------------------------------------------------------ bytes
    def to_bytes(self) -> bytes:
        """The literal in heinfer's versioned binary format (header carries the id)."""
        return self._raw.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes, allow_insecure: bool = False) -> CkksParameters:
        """Decodes and re-checks parameters.

        Raises:
            SerializationError: the bytes are not valid parameters, their id does not match
                the parameters they describe, or they are insecure test parameters and
                ``allow_insecure`` is false.
            ParameterError: the decoded literal fails the checks of the constructor.
        """
        from heinfer.ckks.objects import _as_bytes

        return cls._wrap(_native.Params.from_bytes(_as_bytes(data), bool(allow_insecure)))

    # ------------------------------------------------------------------ dunder
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CkksParameters):
            return NotImplemented
        return self.id == other.id

    def __hash__(self) -> int:
        return hash(("CkksParameters", self.id))

    def __repr__(self) -> str:
        sec = f"{self.security}-bit" if self.security else "INSECURE"
        return (
            f"CkksParameters(log_n={self.log_n}, L={self.max_level}, "
            f"log_qp={self.log_qp:.1f}, alpha={self.alpha}, beta={self.beta}, "
            f"security={sec}, id={self.id:#018x})"
        )


@functools.cache
def _preset(name: str) -> CkksParameters:
    return CkksParameters._wrap(_native.Params.preset(name))


def PN13_QP218() -> CkksParameters:  # noqa: N802 - preset names are constants by convention
    """128-bit, ``N = 2^13`` (4096 slots), ``log2(QP) ≤ 218``.

    ``q_0`` 49 bits, three 40-bit scale primes (L = 3 at Δ = 2^40), one 49-bit special prime
    (α = 1, β = 4). SEAL's shape for this budget. Built once, then cached.
    """
    return _preset("PN13_QP218")


def PN14_QP438() -> CkksParameters:  # noqa: N802
    """128-bit, ``N = 2^14`` (8192 slots), ``log2(QP) ≤ 438``.

    ``q_0`` 50 bits, seven 40-bit scale primes (L = 7 at Δ = 2^40), two 50-bit special
    primes (α = 2, β = 4); 430 of the 438 bits used. Built once, then cached.
    """
    return _preset("PN14_QP438")


def PN15_QP881() -> CkksParameters:  # noqa: N802
    """128-bit, ``N = 2^15`` (16384 slots), ``log2(QP) ≤ 881``.

    ``q_0`` 50 bits, sixteen 40-bit scale primes (L = 16 at Δ = 2^40), four 47-bit special
    primes (α = 4, β = 5); 878 of the 881 bits used. Built once, then cached.
    """
    return _preset("PN15_QP881")


def INSECURE_LOGN10() -> CkksParameters:  # noqa: N802
    """**NO SECURITY — tests only.** ``N = 2^10``; ``q_0`` 50 bits, three 35-bit scale primes,
    two 50-bit special primes (α = 2), Δ = 2^35. ``security`` reports 0."""
    return _preset("INSECURE_LOGN10")


def INSECURE_LOGN12() -> CkksParameters:  # noqa: N802
    """**NO SECURITY — tests only.** ``N = 2^12``; ``q_0`` 55 bits, five 40-bit scale primes,
    one 60-bit special prime (α = 1, β = 6 digits), Δ = 2^40. ``security`` reports 0."""
    return _preset("INSECURE_LOGN12")
