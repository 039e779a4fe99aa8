"""heinfer exceptions ⇄ gRPC statuses, in one place (layer: ``heinfer.serve``).

Server side, :func:`status_of` answers every failure of a call with a status whose message
names the problem:

===============================================  ===========================================
exception                                        status
===============================================  ===========================================
:class:`~heinfer.errors.ServiceError`            its own ``code`` (limits, sessions, tokens,
                                                 session owners: ``PERMISSION_DENIED``,
                                                 timeouts, keys for another program)
``NotSupportedYetError``                         ``UNIMPLEMENTED``
``ParameterError``, ``MissingKeyError``          ``FAILED_PRECONDITION``
``RangeError``                                   ``OUT_OF_RANGE``
any other :class:`~heinfer.errors.HeinferError`  ``INVALID_ARGUMENT`` (malformed, truncated or
(``ProtocolError``, ``SerializationError``, …)   mismatched messages)
``MemoryError``                                  ``RESOURCE_EXHAUSTED``
anything else (a bug)                            ``INTERNAL``, logged with its traceback; the
                                                 client sees only the exception's type
===============================================  ===========================================

Client side, :func:`from_rpc_error` turns a failed call into a
:class:`~heinfer.errors.ServiceError` carrying the status name and the server's message.
"""

from __future__ import annotations

import logging
from typing import NoReturn

import grpc

from heinfer.errors import (
    HeinferError,
    MissingKeyError,
    NotSupportedYetError,
    ParameterError,
    RangeError,
    ServiceError,
)

__all__ = ["MAX_DETAILS", "abort", "from_rpc_error", "status_of"]

#: Longest status message sent (longer ones are cut).
MAX_DETAILS = 1000

_LOG = logging.getLogger("heinfer.serve")

_STATUS: tuple[tuple[type[BaseException], grpc.StatusCode], ...] = (
    (NotSupportedYetError, grpc.StatusCode.UNIMPLEMENTED),
    (ParameterError, grpc.StatusCode.FAILED_PRECONDITION),
    (MissingKeyError, grpc.StatusCode.FAILED_PRECONDITION),
    (RangeError, grpc.StatusCode.OUT_OF_RANGE),
    (HeinferError, grpc.StatusCode.INVALID_ARGUMENT),
    (MemoryError, grpc.StatusCode.RESOURCE_EXHAUSTED),
)


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status and message that answer ``exc``."""
    if isinstance(exc, ServiceError):
        code = getattr(grpc.StatusCode, exc.code, grpc.StatusCode.UNKNOWN)
        return code, _cut(str(exc))
    for cls, code in _STATUS:
        if isinstance(exc, cls):
            text = str(exc) or type(exc).__name__
            return code, _cut(f"{type(exc).__name__}: {text}")
    _LOG.error("internal error in a heinfer service call", exc_info=exc)
    return (
        grpc.StatusCode.INTERNAL,
        f"internal server error ({type(exc).__name__}); see the server log",
    )


def abort(context: grpc.ServicerContext, exc: BaseException) -> NoReturn:
    """Ends the call with the status of ``exc`` (raises, as ``context.abort`` does)."""
    code, details = status_of(exc)
    context.abort(code, details)
    raise AssertionError("unreachable: context.abort returned")  # pragma: no cover


def from_rpc_error(e: grpc.RpcError, what: str = "") -> ServiceError:
    """The :class:`ServiceError` of a failed call (``what`` names the call, for messages
    that come from the transport rather than the server)."""
    code = e.code() if callable(getattr(e, "code", None)) else None
    details = e.details() if callable(getattr(e, "details", None)) else None
    name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
    text = details or str(e)
    if what and name in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN"):
        text = f"{what}: {text}"
    return ServiceError(text, code=name)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_DETAILS else text[: MAX_DETAILS - 1] + "…"
