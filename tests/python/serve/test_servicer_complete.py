"""The service binds every RPC of ``service.proto`` to a method of its servicer
(:func:`heinfer.serve.rpc.add_servicer` reads them from the proto's descriptor); nothing
answers "not implemented"."""

from __future__ import annotations

import grpc
import pytest

from heinfer.serve.handlers import Servicer
from heinfer.serve.rpc import SERVICE, InferenceStub, add_servicer


def test_every_rpc_of_the_proto_is_implemented_by_the_service() -> None:
    methods = sorted(m.name for m in SERVICE.methods)
    assert methods == ["CloseSession", "GetInfo", "Infer", "OpenSession"]
    for name in methods:
        assert name in vars(Servicer), f"Servicer does not define {name}"


def test_a_servicer_missing_an_rpc_is_refused_at_registration() -> None:
    class Partial:
        def GetInfo(self, request, context):  # noqa: N802 - the RPC's name
            return None

    server = grpc.server(None)
    with pytest.raises(TypeError, match="does not implement OpenSession, Infer, CloseSession"):
        add_servicer(Partial(), server)


def test_the_stub_has_one_call_per_rpc() -> None:
    channel = grpc.insecure_channel("127.0.0.1:9")  # never connected: no call is made
    try:
        stub = InferenceStub(channel)
        assert all(callable(getattr(stub, m.name)) for m in SERVICE.methods)
    finally:
        channel.close()
