"""Data objects: plaintexts, ciphertexts and keys.

Each object wraps its native counterpart, remembers the :class:`CkksParameters` it belongs
to, and serializes to heinfer's versioned binary format: a 16-byte header (magic, version,
kind, parameter id) then bit-packed residues. ``X.from_bytes(params, data)`` validates
everything (size limit, header, kind, parameter id, counts, every residue below its modulus,
no trailing bytes) and raises :class:`~heinfer.errors.SerializationError` on any failure.

Objects are made by the key generator, encoder, encryptor and evaluator, never directly.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, TypeVar

from heinfer import _native
from heinfer.ckks.params import CkksParameters

if TYPE_CHECKING:
    from heinfer.ckks.evaluator import Evaluator

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Plaintext",
    "Ciphertext",
    "ExtendedCiphertext",
    "SecretKey",
    "PublicKey",
    "RelinKey",
    "GaloisKeys",
]

#: Default decoding size limit (1 GiB); pass a smaller ``max_bytes`` for untrusted input.
DEFAULT_MAX_BYTES: int = _native.DEFAULT_MAX_BYTES

_T = TypeVar("_T", bound="_Object")


def _as_bytes(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, bytearray or memoryview, got {type(data).__name__}")


def _max_bytes(max_bytes: int) -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int):
        raise TypeError("max_bytes must be an int")
    from heinfer.errors import SerializationError

    if not 1 <= max_bytes <= DEFAULT_MAX_BYTES:
        raise SerializationError(f"max_bytes = {max_bytes} is outside 1..={DEFAULT_MAX_BYTES}")
    return max_bytes


def _check_params(params: object) -> CkksParameters:
    if not isinstance(params, CkksParameters):
        raise TypeError(f"expected CkksParameters, got {type(params).__name__}")
    return params


class _Object:
    """Common plumbing: the native object and the parameters it belongs to."""

    __slots__ = ("_raw", "_params")
    _raw: Any
    _params: CkksParameters
    #: numpy defers to the operators: ``ct + ndarray`` would otherwise be an object array of
    #: ciphertexts, one homomorphic addition of a scalar per element, silently.
    __array_ufunc__ = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            f"{type(self).__name__} objects are made by the key generator, encoder, encryptor "
            "or evaluator, or decoded with from_bytes"
        )

    @classmethod
    def _wrap(cls: type[_T], raw: Any, params: CkksParameters) -> _T:
        obj = cls.__new__(cls)
        obj._raw = raw
        obj._params = params
        return obj

    @property
    def params(self) -> CkksParameters:
        """The parameter set this object belongs to."""
        return self._params

    @property
    def params_id(self) -> int:
        """Id of the parameter set."""
        return int(self._raw.params_id)

    def to_bytes(self) -> bytes:
        """The object in heinfer's binary format."""
        return bytes(self._raw.to_bytes())

    @classmethod
    def from_bytes(
        cls: type[_T], params: CkksParameters, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> _T:
        """Decodes and validates an object of this kind for ``params``.

        Raises:
            SerializationError: truncated, corrupted or oversized input (more than
                ``max_bytes``), another kind of object, or another parameter set.
        """
        p = _check_params(params)
        native_cls = getattr(_native, cls.__name__)
        return cls._wrap(native_cls.from_bytes(p._raw, _as_bytes(data), _max_bytes(max_bytes)), p)

    def __copy__(self: _T) -> _T:
        return self

    def __deepcopy__(self: _T, memo: dict[int, object]) -> _T:
        return self


class Plaintext(_Object):
    """An encoded message: one polynomial (NTT form) at a level ``ℓ`` and scale ``Δ``.

    Decoding recovers ``z ≈ σ(m)/Δ`` where ``σ`` is the canonical embedding.
    """

    __slots__ = ()
    _raw: _native.Plaintext

    @property
    def level(self) -> int:
        """Level ``ℓ``: the polynomial lives modulo ``Q_ℓ = q_0·…·q_ℓ``."""
        return self._raw.level

    @property
    def scale(self) -> float:
        """Scale ``Δ`` of the encoding."""
        return self._raw.scale

    @property
    def is_extended(self) -> bool:
        """Whether it also carries the special primes (``Encoder.encode_extended``)."""
        return self._raw.is_extended

    def __repr__(self) -> str:
        ext = ", extended" if self.is_extended else ""
        return f"Plaintext(level={self.level}, scale=2^{_log2(self.scale)}{ext})"


class Ciphertext(_Object):
    """A CKKS ciphertext ``(c_0, c_1[, c_2])`` with ``Σ c_i·s^i ≈ Δ·m (mod Q_ℓ)``.

    ``size`` is 2, or 3 after a multiplication and before relinearization. ``+``, ``-`` and
    unary ``-`` work with ciphertexts, plaintexts and real/complex constants (they call the
    :class:`~heinfer.ckks.Evaluator`); multiplication needs keys and a rescale policy, so it
    is only available through the evaluator.
    """

    __slots__ = ()
    _raw: _native.Ciphertext

    @property
    def level(self) -> int:
        """Level ``ℓ``: rescales still possible."""
        return self._raw.level

    @property
    def scale(self) -> float:
        """Scale ``Δ`` of the encrypted message."""
        return self._raw.scale

    @property
    def size(self) -> int:
        """Number of polynomials (2, or 3 before relinearization)."""
        return self._raw.size

    @property
    def is_seed_compressed(self) -> bool:
        """Fresh symmetric encryption: ``c_1`` travels as a 32-byte seed."""
        return self._raw.is_seed_compressed

    def set_scale(self, scale: float) -> None:
        """Overrides the scale in place: the caller asserts ``Σ c_i·s^i ≈ scale·m``.

        Raises:
            ScaleError: ``scale`` is not finite in ``[1, 2^1000)``.
        """
        self._raw.set_scale(float(scale))

    def copy(self) -> Ciphertext:
        """An independent copy (``_assign`` operations mutate in place)."""
        return Ciphertext._wrap(self._raw.clone(), self._params)

    def __copy__(self) -> Ciphertext:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, object]) -> Ciphertext:
        return self.copy()

    def _ev(self) -> Evaluator:
        from heinfer.ckks.evaluator import Evaluator

        return Evaluator(self._params)

    def __add__(self, other: object) -> Ciphertext:
        if isinstance(other, (Ciphertext, Plaintext, numbers.Complex)):
            return self._ev().add_any(self, other)
        return NotImplemented

    def __radd__(self, other: object) -> Ciphertext:
        if isinstance(other, numbers.Complex):
            return self._ev().add_any(self, other)
        return NotImplemented

    def __sub__(self, other: object) -> Ciphertext:
        ev = self._ev()
        if isinstance(other, Ciphertext):
            return ev.sub(self, other)
        if isinstance(other, Plaintext):
            return ev.sub_plain(self, other)
        if isinstance(other, numbers.Real):
            return ev.add_const(self, -float(other))
        if isinstance(other, numbers.Complex):
            return ev.add_const_complex(self, -complex(other))
        return NotImplemented

    def __rsub__(self, other: object) -> Ciphertext:
        if isinstance(other, numbers.Complex):
            ev = self._ev()
            return ev.add_any(ev.neg(self), other)
        return NotImplemented

    def __neg__(self) -> Ciphertext:
        return self._ev().neg(self)

    def __repr__(self) -> str:
        return f"Ciphertext(level={self.level}, scale=2^{_log2(self.scale)}, size={self.size})"


class ExtendedCiphertext(_Object):
    """A ciphertext over ``Q_ℓ ∪ P`` encrypting ``P·Δ·m``: the output of
    :meth:`Evaluator.rotate_hoisted_extended`, to be combined with the ``*_extended``
    operations and brought back with :meth:`Evaluator.mod_down_extended` (one ModDown for a
    whole baby-step giant-step sum). Not serializable."""

    __slots__ = ()
    _raw: _native.ExtendedCiphertext

    @property
    def level(self) -> int:
        """Level ``ℓ``."""
        return self._raw.level

    @property
    def scale(self) -> float:
        """Scale of the message (the ``P`` factor not included)."""
        return self._raw.scale

    @property
    def params_id(self) -> int:
        """Id of the parameter set."""
        return self._params.id

    def copy(self) -> ExtendedCiphertext:
        """An independent copy."""
        return ExtendedCiphertext._wrap(self._raw.clone(), self._params)

    def to_bytes(self) -> bytes:
        raise TypeError("extended ciphertexts are transient and cannot be serialized")

    @classmethod
    def from_bytes(
        cls, params: CkksParameters, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> ExtendedCiphertext:
        raise TypeError("extended ciphertexts are transient and cannot be serialized")

    def __repr__(self) -> str:
        return f"ExtendedCiphertext(level={self.level}, scale=2^{_log2(self.scale)})"


class SecretKey(_Object):
    """The secret key ``s`` (uniform ternary). Client side only; never printed.

    ``to_bytes`` writes the key in clear (2 bits per coefficient): protect those bytes.
    """

    __slots__ = ()
    _raw: _native.SecretKey

    @classmethod
    def from_bytes(
        cls, params: CkksParameters, data: bytes, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> SecretKey:
        """Decodes a secret key (the engine's own limit of 1 MiB always applies)."""
        p = _check_params(params)
        _max_bytes(max_bytes)
        return cls._wrap(_native.SecretKey.from_bytes(p._raw, _as_bytes(data)), p)

    def __repr__(self) -> str:
        return f"SecretKey(params_id={self.params_id:#018x}, <secret>)"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[Any, ...]:
        raise TypeError("secret keys are not picklable; use to_bytes() and protect the bytes")


class PublicKey(_Object):
    """The public key ``(−a·s + e, a)`` over ``Q_L``; ``a`` travels as a seed."""

    __slots__ = ()
    _raw: _native.PublicKey

    def __repr__(self) -> str:
        return f"PublicKey(params_id={self.params_id:#018x})"


class RelinKey(_Object):
    """The relinearization key (switches ``s²`` to ``s``), ``β`` digits."""

    __slots__ = ()
    _raw: _native.RelinKey

    def __repr__(self) -> str:
        return f"RelinKey(params_id={self.params_id:#018x})"


class GaloisKeys(_Object):
    """Galois keys, one per element ``g`` (rotation by ``k``: ``g = 5^k mod 2N``;
    conjugation: ``g = 2N − 1``)."""

    __slots__ = ()
    _raw: _native.GaloisKeys

    @property
    def elements(self) -> tuple[int, ...]:
        """The Galois elements present, ascending."""
        return tuple(self._raw.elements())

    def has_rotation(self, k: int) -> bool:
        """Whether a left rotation by ``k`` slots is possible (``k ≡ 0`` always is)."""
        g = self._params.rotation_galois_element(k)
        return g == 1 or g in self._raw

    def has_conjugation(self) -> bool:
        """Whether complex conjugation is possible."""
        return self._params.conjugation_galois_element() in self._raw

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"GaloisKeys(params_id={self.params_id:#018x}, elements={list(self.elements)})"


def _log2(x: float) -> str:
    import math

    return f"{math.log2(x):.2f}" if x > 0 else "?"
