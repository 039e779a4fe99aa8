"""heinfer exceptions ⇄ gRPC statuses: one table, and bugs never leak their message."""

from __future__ import annotations

import grpc
import heinfer
import pytest
from heinfer.errors import ServiceError
from heinfer.serve.status import MAX_DETAILS, from_rpc_error, status_of

S = grpc.StatusCode


@pytest.mark.parametrize(
    "exc, code",
    [
        (ServiceError("full", code="RESOURCE_EXHAUSTED"), S.RESOURCE_EXHAUSTED),
        (ServiceError("who?", code="UNAUTHENTICATED"), S.UNAUTHENTICATED),
        (ServiceError("not yours", code="PERMISSION_DENIED"), S.PERMISSION_DENIED),
        (ServiceError("odd", code="NOT_A_STATUS"), S.UNKNOWN),
        (heinfer.ProtocolError("bad"), S.INVALID_ARGUMENT),
        (heinfer.SerializationError("bad"), S.INVALID_ARGUMENT),
        (heinfer.LevelError("bad"), S.INVALID_ARGUMENT),
        (heinfer.ParameterError("bad"), S.FAILED_PRECONDITION),
        (heinfer.MissingKeyError("bad"), S.FAILED_PRECONDITION),
        (heinfer.RangeError("bad"), S.OUT_OF_RANGE),
        (heinfer.NotSupportedYetError("bad"), S.UNIMPLEMENTED),
        (MemoryError(), S.RESOURCE_EXHAUSTED),
    ],
)
def test_each_error_has_its_status(exc: BaseException, code: grpc.StatusCode) -> None:
    got, details = status_of(exc)
    assert got == code
    assert details


def test_messages_name_the_error_and_are_cut() -> None:
    _, details = status_of(heinfer.ProtocolError("x" * 5000))
    assert details.startswith("ProtocolError: xxx") and len(details) == MAX_DETAILS


def test_a_bug_is_internal_and_hides_its_message(caplog: pytest.LogCaptureFixture) -> None:
    code, details = status_of(KeyError("secret internals"))
    assert code == S.INTERNAL
    assert "KeyError" in details and "secret internals" not in details
    assert "internal error" in caplog.text


class _Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._c, self._d = code, details

    def code(self) -> grpc.StatusCode:
        return self._c

    def details(self) -> str:
        return self._d


def test_client_side_errors_carry_the_status_and_the_server_message() -> None:
    e = from_rpc_error(_Failed(S.RESOURCE_EXHAUSTED, "too many sessions"), "OpenSession")
    assert isinstance(e, heinfer.HeinferError) and e.code == "RESOURCE_EXHAUSTED"
    assert str(e) == "too many sessions"
    e = from_rpc_error(_Failed(S.UNAVAILABLE, "connection refused"), "GetInfo on h:1")
    assert str(e) == "GetInfo on h:1: connection refused"
