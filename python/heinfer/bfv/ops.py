"""BFV encoding, evaluation, exact decryption and noise flooding.

Slot values are integers mod ``p``; the encoders also take signed integers (fixed-point
weights and shares) and reduce them mod ``p``. Ciphertexts are :class:`heinfer.ckks.Ciphertext`
objects of :attr:`BfvParameters.rlwe`; every operation checks they are BFV ciphertexts of
these parameters (top level, scale 1, two parts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from heinfer import _native
from heinfer.bfv.params import BfvParameters
from heinfer.ckks.objects import Ciphertext, GaloisKeys, Plaintext, PublicKey, SecretKey
from heinfer.errors import EncodingError

__all__ = ["BatchEncoder", "Multiplier", "Evaluator", "Decryptor", "Rerandomizer"]


def _params(params: object) -> BfvParameters:
    if not isinstance(params, BfvParameters):
        raise TypeError(f"expected BfvParameters, got {type(params).__name__}")
    return params


def _raw(x: object, cls: type, name: str) -> Any:
    if not isinstance(x, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(x).__name__}")
    return x._raw  # type: ignore[attr-defined]


def _slots(values: Any, p: int, n: int) -> np.ndarray:
    """``values`` as ``uint64`` residues mod ``p``: signed integers are reduced, unsigned ones
    must already be below ``p``; floats and more than ``n`` values are refused."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise EncodingError(f"expected a 1-D vector of slot values, got shape {a.shape}")
    if a.size > n:
        raise EncodingError(f"{a.size} values for {n} slots")
    if a.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if a.dtype.kind == "i":
        return np.mod(a.astype(np.int64), p).astype(np.uint64)
    if a.dtype.kind == "u":
        if int(a.max()) >= p:
            raise EncodingError(f"value {int(a.max())} is not below the plaintext modulus {p}")
        return a.astype(np.uint64)
    raise EncodingError(f"slot values must be integers, got dtype {a.dtype}")


class Multiplier:
    """A plaintext to multiply ciphertexts by: the centered lift of ``m`` (coefficients in
    ``(−p/2, p/2]``), not scaled by ``Δ`` — so it cannot be encrypted or added by mistake."""

    __slots__ = ("_raw",)

    def __init__(self, *args: object) -> None:
        raise TypeError("Multiplier objects come from BatchEncoder.encode_multiplier")


class BatchEncoder:
    """Slot vectors mod ``p`` ↔ plaintexts (slot ``j < N/2`` of row 0 is ``m(ψ^{5^j})``, of
    row 1 ``m(ψ^{−5^j})``)."""

    __slots__ = ("_raw", "_params")

    def __init__(self, params: BfvParameters) -> None:
        self._params = _params(params)
        self._raw = _native.BfvEncoder(self._params._raw)

    def encode(self, values: Any) -> Plaintext:
        """``Δ·m`` for slots ``values`` (missing slots are 0): to encrypt, or to add."""
        p = self._params
        return Plaintext._wrap(self._raw.encode(_slots(values, p.plain_modulus, p.n)), p.rlwe)

    def encode_multiplier(self, values: Any) -> Multiplier:
        """The centered ``m`` for slots ``values``: to multiply by."""
        p = self._params
        m = Multiplier.__new__(Multiplier)
        m._raw = self._raw.encode_multiplier(_slots(values, p.plain_modulus, p.n))
        return m

    def encode_multipliers(self, values: Any) -> list[Multiplier]:
        """:meth:`encode_multiplier` of every row of ``values`` (a 2-D array of signed integers,
        at most ``N`` columns), encoded in parallel in one call."""
        p = self._params
        a = np.asarray(values)
        if a.ndim != 2 or a.dtype.kind not in "iu" or a.shape[1] > p.n or a.shape[1] == 0:
            raise EncodingError(f"expected a 2-D integer array of at most {p.n} columns, got shape {a.shape} of {a.dtype}")
        if a.dtype.kind == "u" and a.size and int(a.max()) >= p.plain_modulus:
            raise EncodingError(f"value {int(a.max())} is not below the plaintext modulus {p.plain_modulus}")
        out = []
        for raw in self._raw.encode_multipliers(np.ascontiguousarray(a, dtype=np.int64)):
            m = Multiplier.__new__(Multiplier)
            m._raw = raw
            out.append(m)
        return out

    def slots_to_coefficients(self, values: Any) -> np.ndarray:
        """Coefficients in ``[0, p)`` of the polynomial with slots ``values``."""
        p = self._params
        return self._raw.slots_to_coefficients(_slots(values, p.plain_modulus, p.n))


class Evaluator:
    """Additions, plaintext and scalar products, fused dot products and rotations (server
    side; holds no key)."""

    __slots__ = ("_raw", "_params")

    def __init__(self, params: BfvParameters) -> None:
        self._params = _params(params)
        self._raw = _native.BfvEvaluator(self._params._raw)

    def _ct(self, raw: Any) -> Ciphertext:
        return Ciphertext._wrap(raw, self._params.rlwe)

    def add(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a + b`` slot-wise mod ``p``."""
        return self._ct(self._raw.add(_raw(a, Ciphertext, "a"), _raw(b, Ciphertext, "b")))

    def add_assign(self, a: Ciphertext, b: Ciphertext) -> None:
        """``a ← a + b`` (``b`` may be ``a`` itself)."""
        rb = _raw(b, Ciphertext, "b")
        self._raw.add_assign(_raw(a, Ciphertext, "a"), rb.clone() if b is a else rb)

    def sub(self, a: Ciphertext, b: Ciphertext) -> Ciphertext:
        """``a − b``."""
        return self._ct(self._raw.sub(_raw(a, Ciphertext, "a"), _raw(b, Ciphertext, "b")))

    def add_plain(self, ct: Ciphertext, pt: Plaintext) -> Ciphertext:
        """``ct + m`` for ``pt`` from :meth:`BatchEncoder.encode`."""
        return self._ct(self._raw.add_plain(_raw(ct, Ciphertext, "ct"), _raw(pt, Plaintext, "pt")))

    def sub_plain(self, ct: Ciphertext, pt: Plaintext) -> Ciphertext:
        """``ct − m`` for ``pt`` from :meth:`BatchEncoder.encode`."""
        return self._ct(self._raw.sub_plain(_raw(ct, Ciphertext, "ct"), _raw(pt, Plaintext, "pt")))

    def mul_plain(self, ct: Ciphertext, m: Multiplier) -> Ciphertext:
        """``ct · m`` slot-wise mod ``p``."""
        return self._ct(self._raw.mul_plain(_raw(ct, Ciphertext, "ct"), _raw(m, Multiplier, "m")))

    def dot_plain(self, cts: Sequence[Ciphertext], ms: Sequence[Multiplier]) -> Ciphertext:
        """``Σ cts[i] · ms[i]`` in one pass (no intermediate ciphertexts)."""
        return self._ct(
            self._raw.dot_plain([_raw(c, Ciphertext, "cts[i]") for c in cts], [_raw(m, Multiplier, "ms[i]") for m in ms])
        )

    def mul_scalar(self, ct: Ciphertext, c: int) -> Ciphertext:
        """Every slot times the integer ``c`` (reduced mod ``p``)."""
        return self._ct(self._raw.mul_scalar(_raw(ct, Ciphertext, "ct"), int(c) % self._params.plain_modulus))

    def rotate_rows(self, ct: Ciphertext, k: int, keys: GaloisKeys) -> Ciphertext:
        """Both rows rotated left by ``k`` (right for ``k < 0``), modulo ``N/2``; the Galois
        keys are the CKKS rotation keys of ``params.rlwe`` for step ``k``."""
        return self._ct(self._raw.rotate_rows(_raw(ct, Ciphertext, "ct"), int(k), _raw(keys, GaloisKeys, "keys")))

    def rotate_rows_hoisted(self, ct: Ciphertext, steps: Sequence[int], keys: GaloisKeys) -> list[Ciphertext]:
        """Rotations by each of ``steps`` sharing one key-switching decomposition."""
        raws = self._raw.rotate_rows_hoisted(_raw(ct, Ciphertext, "ct"), [int(k) for k in steps], _raw(keys, GaloisKeys, "keys"))
        return [self._ct(r) for r in raws]

    def rotate_rows_many(self, cts: Sequence[Ciphertext], steps: Sequence[int], keys: GaloisKeys) -> list[Ciphertext]:
        """``[rotate_rows(cts[i], steps[i]) for i]``, the rotations in parallel (one per engine
        thread; a BFV ciphertext has too few limbs to keep every core busy on one rotation).
        The same ciphertexts as :meth:`rotate_rows` on each."""
        raws = self._raw.rotate_rows_many([_raw(c, Ciphertext, "cts[i]") for c in cts], [int(k) for k in steps], _raw(keys, GaloisKeys, "keys"))
        return [self._ct(r) for r in raws]

    def fold_rows(self, cts: Sequence[Ciphertext], steps: Sequence[int], keys: GaloisKeys) -> list[Ciphertext]:
        """Rotate-and-add folds: each ciphertext ``c ← c + rotate_rows(c, s)`` for each ``s`` of
        ``steps`` in order, the ciphertexts in parallel, in one engine call. The same
        ciphertexts as :meth:`rotate_rows` and :meth:`add` in a loop."""
        raws = self._raw.fold_rows([_raw(c, Ciphertext, "cts[i]") for c in cts], [int(k) for k in steps], _raw(keys, GaloisKeys, "keys"))
        return [self._ct(r) for r in raws]

    def swap_rows(self, ct: Ciphertext, keys: GaloisKeys) -> Ciphertext:
        """The two rows exchanged (the conjugation key of ``params.rlwe``)."""
        return self._ct(self._raw.swap_rows(_raw(ct, Ciphertext, "ct"), _raw(keys, GaloisKeys, "keys")))


class Decryptor:
    """Exact decryption with the secret key (client side)."""

    __slots__ = ("_raw", "_params")

    def __init__(self, params: BfvParameters, sk: SecretKey) -> None:
        self._params = _params(params)
        self._raw = _native.BfvDecryptor(self._params._raw, _raw(sk, SecretKey, "sk"))

    def decrypt(self, ct: Ciphertext) -> np.ndarray:
        """The ``N`` slots of ``ct`` as ``uint64`` in ``[0, p)``."""
        return self._raw.decrypt(_raw(ct, Ciphertext, "ct"))

    def noise_budget(self, ct: Ciphertext) -> float:
        """Bits of noise budget left: decryption is correct while it is positive."""
        return self._raw.noise_budget(_raw(ct, Ciphertext, "ct"))


class Rerandomizer:
    """Re-randomization and noise flooding with the client's public key (server side): adds a
    fresh encryption of zero and a uniform error in ``[−2^b, 2^b)`` per coefficient, so what the
    client decrypts does not depend on the server's weights beyond the message itself."""

    __slots__ = ("_raw", "_params")

    def __init__(self, params: BfvParameters, pk: PublicKey) -> None:
        self._params = _params(params)
        self._raw = _native.BfvRerandomizer(self._params._raw, _raw(pk, PublicKey, "pk"))

    @property
    def max_flood_bits(self) -> int:
        """Largest ``b`` these parameters decrypt through."""
        return self._raw.max_flood_bits

    def rerandomize(self, ct: Ciphertext, bits: int) -> Ciphertext:
        """``ct`` re-randomized and flooded with ``2^bits``.

        Raises:
            ParameterError: ``bits`` exceeds :attr:`max_flood_bits`.
        """
        return Ciphertext._wrap(self._raw.rerandomize(_raw(ct, Ciphertext, "ct"), int(bits)), self._params.rlwe)

    def rerandomize_compact(self, ct: Ciphertext, bits: int) -> Ciphertext:
        """:meth:`rerandomize`, then switched down to the fewest ciphertext primes that still
        decrypt it (``c ↦ ⌊c·Q_ℓ/Q⌉``, level :meth:`compact_level`): the same result to send
        in fewer bytes. A switched ciphertext is only decrypted; evaluators refuse it.

        Raises:
            ParameterError: ``bits`` exceeds :attr:`max_flood_bits`.
        """
        return Ciphertext._wrap(self._raw.rerandomize_compact(_raw(ct, Ciphertext, "ct"), int(bits)), self._params.rlwe)

    def compact_level(self, bits: int) -> int:
        """The level (primes kept − 1) a result flooded with ``2^bits`` is switched down to."""
        return self._raw.compact_level(int(bits))
