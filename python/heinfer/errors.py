"""The exceptions of heinfer: one base class, one subclass per kind of failure.

Every error raised by the native engine arrives as one of these (the mapping from the Rust
``CkksError`` variants lives in ``crates/heinfer-py/src/errors.rs``); heinfer never raises a
bare ``Exception``. Each class also derives from the builtin that fits it, so that
``except ValueError`` keeps working for callers who do not know heinfer.

=========================  ==============================================================
class                      raised when
=========================  ==============================================================
``ParameterError``         parameters are insecure or malformed, or two objects belong to
                           different parameter sets
``LevelError``             operands are at different levels, or one has too few levels left
``ScaleError``             operands have different scales, or a scale is not a finite
                           value in [1, 2^1000)
``MissingKeyError``        a rotation/conjugation needs a Galois key, or a relinearization
                           key, that was not supplied
``SerializationError``     bytes do not decode to a valid object (truncated, corrupted,
                           wrong kind, wrong parameter set, over the size limit)
``EncodingError``          values cannot be encoded (too many, not finite, too large)
``OperandError``           an operand has the wrong shape (e.g. a size-3 ciphertext where a
                           relinearized one is needed)
``UnsupportedOperatorError``  a model uses an operator heinfer cannot evaluate (compiler)
``CompileError``           a compiler pass failed (names the node and the pass)
``FloodBudgetError``       (a ``CompileError``) a two-party layer's noise flooding does not
                           fit the BFV ciphertext modulus (``bits`` needed, ``limit`` held)
``ProtocolError``          a client/server exchange is malformed or out of order
``RangeError``             decrypted values exceed the range a program was compiled for
                           (recompile with calibration inputs that cover them)
``ServiceError``           a call to (or inside) the network service failed; ``code`` names
                           the gRPC status and the message is the server's
``ClusterError``           the Ray backend failed: Ray missing, a worker lost beyond the
                           retries, a shard timed out (:mod:`heinfer.cluster`)
``InternalError``          the native engine hit a bug (a Rust panic, caught at the binding);
                           the message names the operation and the panic, never secret data
=========================  ==============================================================
"""

from __future__ import annotations

__all__ = [
    "NotSupportedYetError",
    "HeinferError",
    "ParameterError",
    "LevelError",
    "ScaleError",
    "MissingKeyError",
    "SerializationError",
    "EncodingError",
    "OperandError",
    "UnsupportedOperatorError",
    "CompileError",
    "FloodBudgetError",
    "ProtocolError",
    "RangeError",
    "OutOfRangeWarning",
    "PrecisionWarning",
    "ServiceError",
    "ClusterError",
    "InternalError",
]


class HeinferError(Exception):
    """Base class of every heinfer error."""


class ParameterError(HeinferError, ValueError):
    """Insecure or malformed parameters, or objects from different parameter sets."""


class LevelError(HeinferError, ValueError):
    """Operands at different levels, or an operand with too few levels left."""


class ScaleError(HeinferError, ValueError):
    """Operands with different scales, or an invalid scale."""


class MissingKeyError(HeinferError, LookupError):
    """A Galois key or the relinearization key needed by an operation is missing."""


class SerializationError(HeinferError, ValueError):
    """Bytes that do not decode to a valid object."""


class EncodingError(HeinferError, ValueError):
    """Values that cannot be encoded into a plaintext."""


class OperandError(HeinferError, ValueError):
    """An operand of the wrong shape for the operation."""


class UnsupportedOperatorError(HeinferError, NotImplementedError):
    """A model operator that heinfer cannot evaluate (raised by the compiler).

    ``op_type`` and ``node_name`` name the offending operator and node when the compiler knows
    them (both ``None`` otherwise); the message names them too.
    """

    def __init__(
        self, message: str = "", *, op_type: str | None = None, node_name: str | None = None
    ) -> None:
        super().__init__(message)
        self.op_type = op_type
        self.node_name = node_name


class CompileError(HeinferError):
    """A compiler pass failed; the message names the node and the pass."""


class FloodBudgetError(CompileError):
    """A two-party layer needs more noise flooding (``2^bits``) than the BFV parameters decrypt
    through (``2^limit``): a larger ciphertext modulus is needed. The compiler's automatic BFV
    parameters catch it and grow the modulus; with parameters passed by the caller it is
    raised."""

    def __init__(self, message: str, *, bits: int, limit: int) -> None:
        super().__init__(message)
        self.bits = bits
        self.limit = limit


class NotSupportedYetError(HeinferError, NotImplementedError):
    """A feature on the roadmap that has not landed yet (the message names it)."""


class ProtocolError(HeinferError):
    """A malformed or out-of-order message between client and server."""


class RangeError(HeinferError, ArithmeticError):
    """Client inputs exceed the range the program was compiled for.

    CKKS arithmetic wraps around modulo the ciphertext modulus: a value beyond the planned
    range would decrypt to garbage. The client refuses such inputs before encrypting them.
    (Decrypted values are never checked by raising — that would make the client an oracle
    for the server —: they are clamped and reported, see :class:`OutOfRangeWarning`.)
    """


class OutOfRangeWarning(UserWarning):
    """Some decrypted values were beyond their planned range and were clamped: the outputs
    of the affected items are not reliable (``report["out_of_range"]`` counts them)."""


class PrecisionWarning(UserWarning):
    """A compiled program's outputs, simulated exactly on the calibration inputs, are far from
    the model's own: its fixed point (the two-party protocol's plaintext modulus) is too coarse
    for the network; the message gives the error and the agreement."""


class ServiceError(HeinferError):
    """A call to the network service (:mod:`heinfer.serve`) failed.

    ``code`` is the name of the gRPC status (``"UNAUTHENTICATED"``, ``"RESOURCE_EXHAUSTED"``,
    ``"NOT_FOUND"``, ``"UNAVAILABLE"``, …) and the message is the one the server sent (or the
    transport's, when the server was not reached). Inside the service the same class carries
    the status a refusal is answered with.
    """

    def __init__(self, message: str = "", *, code: str = "UNKNOWN") -> None:
        super().__init__(message)
        self.code = code


class ClusterError(HeinferError, RuntimeError):
    """The Ray backend (:mod:`heinfer.cluster`) could not answer: Ray is not installed, the
    cluster cannot be reached, a shard timed out, or workers kept dying beyond the retries.
    The message names the segment, the shard and the cause; a query that fails this way
    gets no answer (never a partial or wrong one)."""


class InternalError(HeinferError, RuntimeError):
    """The native engine hit a bug: a Rust panic, caught where the binding calls the engine.

    Without the catch the panic would reach Python as ``pyo3_runtime.PanicException``, a
    ``BaseException`` that ``except Exception`` handlers miss. The message names the operation
    and the panic message (never secret data); the objects passed to an in-place operation
    that failed this way may be left half-updated and should be discarded.
    """
