"""Key generation (client side), public-key encryption and decryption."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from heinfer import _native
from heinfer.ckks.objects import (
    Ciphertext,
    GaloisKeys,
    Plaintext,
    PublicKey,
    RelinKey,
    SecretKey,
    _check_params,
)
from heinfer.ckks.params import CkksParameters

__all__ = ["KeyGenerator", "Encryptor", "Decryptor"]


def _arg(x: object, cls: type, name: str) -> Any:
    if not isinstance(x, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(x).__name__}")
    return x._raw  # type: ignore[attr-defined]


class KeyGenerator:
    """Draws a secret key from the OS random source and derives the other keys from it.

    A client-side object: it holds the secret key. Every key's uniform half is expanded from
    a fresh 32-byte seed, so keys serialize at half size.

    * public key ``(−a·s + e, a)``
    * relinearization key: switches ``s²`` to ``s`` (hybrid key switching, ``β`` digits)
    * Galois keys: switch ``s(X^g)`` to ``s``; a left rotation by ``k`` uses
      ``g = 5^k mod 2N``, conjugation uses ``g = 2N − 1``.
    """

    __slots__ = ("_raw", "_params")

    def __init__(self, params: CkksParameters) -> None:
        self._params = _check_params(params)
        self._raw = _native.KeyGenerator(self._params._raw)

    @classmethod
    def from_secret_key(cls, params: CkksParameters, sk: SecretKey) -> KeyGenerator:
        """A key generator around an existing secret key (e.g. one loaded from bytes).

        Raises:
            ParameterError: ``sk`` belongs to other parameters.
        """
        obj = cls.__new__(cls)
        obj._params = _check_params(params)
        obj._raw = _native.KeyGenerator.from_secret_key(obj._params._raw, _arg(sk, SecretKey, "sk"))
        return obj

    @property
    def params(self) -> CkksParameters:
        """The parameter set."""
        return self._params

    @property
    def secret_key(self) -> SecretKey:
        """The secret key (keep it on the client)."""
        return SecretKey._wrap(self._raw.secret_key(), self._params)

    def public_key(self) -> PublicKey:
        """A fresh public key."""
        return PublicKey._wrap(self._raw.public_key(), self._params)

    def relin_key(self) -> RelinKey:
        """A fresh relinearization key."""
        return RelinKey._wrap(self._raw.relin_key(), self._params)

    def galois_keys(self, steps: Iterable[int] = (), conjugate: bool = False) -> GaloisKeys:
        """Galois keys for left rotations by each of ``steps`` (negative: right), plus
        conjugation when ``conjugate``. Steps are taken modulo the slot count; step 0 needs
        no key."""
        slots = self._params.slots
        ks = [operator.index(k) % slots for k in steps]
        return GaloisKeys._wrap(self._raw.galois_keys(ks, bool(conjugate)), self._params)

    def galois_keys_bytes(self, steps: Iterable[int] = (), conjugate: bool = False) -> bytes:
        """Fresh Galois keys as :meth:`galois_keys` would make them, already serialized
        (``GaloisKeys.to_bytes``'s format and length): each key is written into the result as it
        is made and dropped, so the set is never held — for a party that only sends its keys."""
        slots = self._params.slots
        ks = [operator.index(k) % slots for k in steps]
        return self._raw.galois_keys_bytes(ks, bool(conjugate))

    def encrypt_symmetric(self, pt: Plaintext) -> Ciphertext:
        """Secret-key encryption ``(−a·s + e + m, a)``; ``a`` is a seed, so the ciphertext
        serializes at half size until it is first operated on.

        Raises:
            ParameterError: ``pt`` belongs to other parameters.
        """
        return Ciphertext._wrap(
            self._raw.encrypt_symmetric(_arg(pt, Plaintext, "pt")), self._params
        )

    def __repr__(self) -> str:
        return f"KeyGenerator(params_id={self._params.id:#018x}, <secret>)"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[Any, ...]:
        raise TypeError("a KeyGenerator holds the secret key and is not picklable")


class Encryptor:
    """Public-key encryption ``Enc(m) = (b·u + e_0 + m, a·u + e_1)``, ``u`` ternary, ``e_i``
    Gaussian, at the plaintext's level and scale.

    Raises (constructor):
        ParameterError: ``pk`` belongs to other parameters.
    """

    __slots__ = ("_raw", "_params")

    def __init__(self, params: CkksParameters, pk: PublicKey) -> None:
        self._params = _check_params(params)
        self._raw = _native.Encryptor(self._params._raw, _arg(pk, PublicKey, "pk"))

    def encrypt(self, pt: Plaintext) -> Ciphertext:
        """Encrypts ``pt`` (fresh OS randomness each call).

        Raises:
            ParameterError: ``pt`` belongs to other parameters.
        """
        return Ciphertext._wrap(self._raw.encrypt(_arg(pt, Plaintext, "pt")), self._params)

    def __repr__(self) -> str:
        return f"Encryptor(params_id={self._params.id:#018x})"


class Decryptor:
    """Decryption ``Dec(c) = Σ_i c_i·s^i`` (sizes 2 and 3) with the secret key (client side).

    Raises (constructor):
        ParameterError: ``sk`` belongs to other parameters.
    """

    __slots__ = ("_raw", "_params")

    def __init__(self, params: CkksParameters, sk: SecretKey) -> None:
        self._params = _check_params(params)
        self._raw = _native.Decryptor(self._params._raw, _arg(sk, SecretKey, "sk"))

    def decrypt(self, ct: Ciphertext) -> Plaintext:
        """The plaintext at the ciphertext's level and scale.

        Raises:
            ParameterError: ``ct`` belongs to other parameters.
        """
        return Plaintext._wrap(self._raw.decrypt(_arg(ct, Ciphertext, "ct")), self._params)

    def __repr__(self) -> str:
        return f"Decryptor(params_id={self._params.id:#018x}, <secret>)"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[Any, ...]:
        raise TypeError("a Decryptor holds the secret key and is not picklable")
