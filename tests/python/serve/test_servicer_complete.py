"""The generated servicer base class (``heinfer.v1.service_pb2_grpc.InferenceServicer``) raises
``NotImplementedError`` in every method: grpcio-tools writes it so. The service's
:class:`~heinfer.serve.handlers.Servicer` must override every RPC the proto declares, so none
of those generated stubs can ever answer a call."""

from __future__ import annotations

from heinfer.serve.handlers import Servicer
from heinfer.v1 import service_pb2, service_pb2_grpc


def test_every_rpc_of_the_proto_is_implemented_by_the_service() -> None:
    methods = [m.name for m in service_pb2.DESCRIPTOR.services_by_name["Inference"].methods]
    assert sorted(methods) == ["CloseSession", "GetInfo", "Infer", "OpenSession"]
    base = service_pb2_grpc.InferenceServicer
    for name in methods:
        assert getattr(Servicer, name) is not getattr(base, name), f"{name} falls through to the generated stub"
