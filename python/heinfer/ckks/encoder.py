"""The CKKS encoder: numpy vectors ↔ plaintexts through the canonical embedding."""

from __future__ import annotations

import operator

import numpy as np
import numpy.typing as npt

from heinfer import _native
from heinfer.ckks.objects import Plaintext, _check_params
from heinfer.ckks.params import CkksParameters
from heinfer.errors import EncodingError, LevelError

__all__ = ["Encoder"]


class Encoder:
    """Encodes up to ``N/2`` values into a plaintext and decodes them back.

    Slot ``j`` holds the message polynomial evaluated at ``ζ^(5^j mod 2N)``, ``ζ = e^(iπ/N)``;
    encoding computes ``m = ⌊Δ·σ^{-1}(z)⌉`` (special FFT, then NTT per prime), decoding
    ``z = σ(m)/Δ``. Real vectors fill the real parts; a complex vector uses both parts
    ("complex packing", nGraph-HE2 §3.1.2: two real vectors per ciphertext).
    """

    __slots__ = ("_raw", "_params")

    def __init__(self, params: CkksParameters) -> None:
        self._params = _check_params(params)
        self._raw = _native.Encoder(self._params._raw)

    @property
    def params(self) -> CkksParameters:
        """The parameter set."""
        return self._params

    @property
    def slots(self) -> int:
        """Number of slots ``N/2``."""
        return self._params.slots

    def encode(
        self,
        values: npt.ArrayLike,
        scale: float | None = None,
        level: int | None = None,
    ) -> Plaintext:
        """Encodes a 1-D vector (zero-padded to ``N/2`` slots).

        Args:
            values: real values (any real dtype → float64) or complex values (complex dtype
                → complex packing).
            scale: ``Δ``; default ``params.default_scale``.
            level: default the top level ``L``.

        Raises:
            EncodingError: not a 1-D numeric vector, more than ``N/2`` values, a value that
                is not finite, or ``Δ·value`` too large for ``Q_ℓ/2``.
            ScaleError: ``scale`` is not finite in ``[1, 2^1000)``.
            LevelError: ``level`` is outside ``0..L``.
        """
        return self._encode(values, scale, level, extended=False)

    def encode_extended(
        self,
        values: npt.ArrayLike,
        scale: float | None = None,
        level: int | None = None,
    ) -> Plaintext:
        """Like :meth:`encode`, with the special primes ``P`` as extra limbs: the plaintext
        operand of :meth:`Evaluator.mul_plain_extended` (baby-step giant-step sums)."""
        return self._encode(values, scale, level, extended=True)

    def decode(
        self, pt: Plaintext, real: bool = True
    ) -> npt.NDArray[np.float64] | npt.NDArray[np.complex128]:
        """All ``N/2`` slots: float64 real parts when ``real``, else complex128.

        Raises:
            ParameterError: ``pt`` belongs to other parameters.
        """
        if not isinstance(pt, Plaintext):
            raise TypeError(f"pt must be a Plaintext, got {type(pt).__name__}")
        return self._raw.decode_real(pt._raw) if real else self._raw.decode(pt._raw)

    def _encode(
        self, values: npt.ArrayLike, scale: float | None, level: int | None, extended: bool
    ) -> Plaintext:
        p = self._params
        scale = p.default_scale if scale is None else float(scale)
        level = p.max_level if level is None else operator.index(level)
        if not 0 <= level <= p.max_level:
            raise LevelError(f"cannot encode at level {level}: levels are 0..{p.max_level}")
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError) as e:
            raise EncodingError(f"cannot encode: {e}") from None
        if arr.ndim != 1:
            raise EncodingError(f"cannot encode: expected a 1-D vector, got shape {arr.shape}")
        if arr.dtype.kind == "c":
            raw = self._raw.encode_complex(
                np.ascontiguousarray(arr, np.complex128), scale, level, extended
            )
        elif arr.dtype.kind in "biuf":
            raw = self._raw.encode_real(
                np.ascontiguousarray(arr, np.float64), scale, level, extended
            )
        else:
            raise EncodingError(f"cannot encode values of dtype {arr.dtype}")
        return Plaintext._wrap(raw, p)

    def __repr__(self) -> str:
        return f"Encoder(params_id={self._params.id:#018x})"
