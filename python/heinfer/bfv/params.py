"""BFV parameters: an RLWE ring checked against the security table plus a plaintext prime."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from heinfer import _native
from heinfer.ckks.params import CkksParameters

__all__ = ["BfvParameters", "MAX_FLOOD_BITS", "PN13_PLAIN20", "INSECURE_LOGN10", "flood_bits", "plain_primes", "uniform_mod"]

#: The widest flooding the engine draws: ``U[−2^b, 2^b)`` for ``b`` up to 189 bits.
MAX_FLOOD_BITS: int = _native.BFV_MAX_FLOOD_BITS


class BfvParameters:
    """Checked, immutable BFV parameters.

    ``BfvParameters(log_n, log_q, log_p, plain_modulus, security=128)`` checks the literal at
    once: the ciphertext primes (``log_q``, all used at every step: BFV does not rescale) and
    special primes (``log_p``, at least one: public key and rotations) are generated and
    ``log2(Q·P)`` is checked against the security table; ``plain_modulus`` must be a prime of
    12..40 bits with ``p ≡ 1 (mod 2N)`` (SIMD batching).

    Raises:
        ParameterError: the literal is malformed or insecure.
    """

    __slots__ = ("_raw",)
    _raw: _native.BfvParams

    def __init__(self, log_n: int, log_q: Sequence[int], log_p: Sequence[int], plain_modulus: int, security: int = 128) -> None:
        self._raw = _native.BfvParams(int(log_n), [int(b) for b in log_q], [int(b) for b in log_p], int(plain_modulus), int(security))

    @classmethod
    def _wrap(cls, raw: _native.BfvParams) -> BfvParameters:
        obj = cls.__new__(cls)
        obj._raw = raw
        return obj

    @property
    def rlwe(self) -> CkksParameters:
        """The RLWE parameters underneath: pass them to :class:`heinfer.ckks.KeyGenerator` and
        :class:`heinfer.ckks.Encryptor`."""
        return CkksParameters._wrap(self._raw.rlwe)

    @property
    def log_n(self) -> int:
        """``log2 N``."""
        return self._raw.log_n

    @property
    def n(self) -> int:
        """Ring degree ``N``, also the number of slots."""
        return self._raw.n

    @property
    def slots(self) -> int:
        """``N`` slots: two rows of ``N/2``."""
        return self._raw.n

    @property
    def plain_modulus(self) -> int:
        """The plaintext prime ``p``."""
        return self._raw.plain_modulus

    @property
    def log_q(self) -> float:
        """Exact ``log2 Q``."""
        return self._raw.log_q

    @property
    def security(self) -> int:
        """Classical security bits (0 for the insecure test set)."""
        return self._raw.security

    @property
    def id(self) -> int:
        """Hash of the RLWE parameters' id and ``p``."""
        return self._raw.id

    def result_drop_bits(self, bits: int) -> tuple[int, int]:
        """Low bits ``(j0, j1)`` a result flooded with ``2^bits`` (and switched down to its
        compact level) drops from ``c_0`` and ``c_1`` on the wire: the error they add,
        ``2^(j0−1) + N·2^(j1−1)``, keeps the flooded error below ``Δ_ℓ/8`` (worst case; see
        ``heinfer_bfv::rounding``)."""
        j0, j1 = self._raw.result_drop_bits(int(bits))
        return int(j0), int(j1)

    def result_wire_bytes(self, bits: int) -> int:
        """Bytes of one result flooded with ``2^bits`` on the wire (compacted and rounded)."""
        return self._raw.result_wire_bytes(int(bits))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BfvParameters) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return repr(self._raw)


def PN13_PLAIN20() -> BfvParameters:  # noqa: N802
    """``N = 8192``, three 50-bit ``Q`` primes and one special prime (128-bit secure),
    ``p = 1,032,193`` (the share modulus of :mod:`heinfer.twoparty`): ``Δ ≈ 2^130``, room to
    flood a linear layer's worst-case noise with 40 statistical bits."""
    return BfvParameters._wrap(_native.BfvParams.preset("PN13_PLAIN20"))


def INSECURE_LOGN10() -> BfvParameters:  # noqa: N802
    """**NO SECURITY — tests only.** ``N = 1024``, two 50-bit ``Q`` primes, one special prime,
    ``p = 1,032,193``."""
    return BfvParameters._wrap(_native.BfvParams.preset("INSECURE_LOGN10"))


def flood_bits(noise_bits: int, log_n: int, stat_bits: int = 40) -> int:
    """Flooding exponent ``b`` hiding an error of at most ``2^noise_bits`` per coefficient in a
    ring of degree ``2^log_n``: statistical distance ``N·2^noise_bits / 2^(b+1) ≤ 2^(−stat_bits−1)``."""
    return _native.bfv_flood_bits(int(noise_bits), int(log_n), int(stat_bits))


def plain_primes(log_n: int, bits: int, count: int = 1) -> list[int]:
    """The primes ``p ≡ 1 (mod 2^(log_n+1))`` of ``bits`` bits, largest first, at most ``count``:
    plaintext moduli with SIMD batching for every ring up to ``N = 2^log_n``. ``bits`` must be
    in 12..40 and above ``log_n + 1``, else :class:`~heinfer.errors.ParameterError`."""
    return [int(p) for p in _native.bfv_plain_primes(int(log_n), int(bits), int(count))]


def uniform_mod(shape: tuple[int, ...], p: int) -> np.ndarray:
    """Residues uniform mod ``p`` (``uint64``, ``shape``) from the engine's stream, AES-256-CTR
    keyed from the OS, by rejection sampling (exactly uniform). ``p`` must be in ``[2, 2^40)``,
    the range of the plaintext moduli; others raise
    :class:`~heinfer.errors.ParameterError`."""
    count = int(np.prod(shape)) if len(shape) else 1
    return _native.bfv_uniform_mod(count, int(p)).reshape(shape)
