"""``heinfer.v1.Inference`` bound to gRPC, from the proto's own descriptor (layer:
``heinfer.serve``).

grpcio-tools would also generate a client stub and a servicer base class whose methods raise
``NotImplementedError``; neither is generated here. :class:`InferenceStub` and
:func:`add_servicer` read the service's methods — names, streaming kinds, message types —
from ``heinfer.v1.service_pb2.DESCRIPTOR``, so they follow ``service.proto`` without a copy
of it. Every message is serialized by :func:`heinfer.serve.wire.serialize`: protobuf for
ordinary messages, and for a :class:`~heinfer.serve.wire.Typed` protocol message the
``message`` field written around its bytes (no parse, one copy). ``Infer``'s requests and
responses are read by :func:`heinfer.serve.wire.deserializer`: a whole protocol message
arrives as a :class:`~heinfer.serve.wire.Typed` view of the received bytes (no parse, no
copy); everything else is parsed by protobuf.
"""

from __future__ import annotations

import grpc

from heinfer.serve.wire import deserializer, serialize
from heinfer.v1 import service_pb2 as pb

__all__ = ["SERVICE", "InferenceStub", "add_servicer"]

#: The service's descriptor: its methods are the RPCs bound here.
SERVICE = pb.DESCRIPTOR.services_by_name["Inference"]
#: (client streaming, server streaming) → gRPC's name of the call kind.
_KIND = {
    (False, False): "unary_unary",
    (True, False): "stream_unary",
    (False, True): "unary_stream",
    (True, True): "stream_stream",
}


def _kind(method) -> str:
    return _KIND[(method.client_streaming, method.server_streaming)]


def _message(descriptor) -> type:
    """The generated class of a message of ``service.proto``."""
    return getattr(pb, descriptor.name)


def _deserializer(descriptor):
    """How a received message of ``descriptor`` is read: a request or response that may
    carry a whole protocol message (``InferRequest``, ``InferResponse``) through
    :func:`~heinfer.serve.wire.deserializer` (in place), any other by protobuf."""
    cls = _message(descriptor)
    return deserializer(cls) if "message" in descriptor.fields_by_name else cls.FromString


class InferenceStub:
    """A client of ``heinfer.v1.Inference`` on ``channel``: one attribute per RPC
    (``GetInfo``, ``OpenSession``, ``Infer``, ``CloseSession``), each a gRPC multi-callable."""

    def __init__(self, channel: grpc.Channel) -> None:
        for m in SERVICE.methods:
            make = getattr(channel, _kind(m))
            path = f"/{SERVICE.full_name}/{m.name}"
            setattr(self, m.name, make(path, request_serializer=serialize, response_deserializer=_deserializer(m.output_type)))


def add_servicer(servicer: object, server: grpc.Server) -> None:
    """Registers ``servicer``'s methods, one per RPC of the proto, on ``server``.
    :class:`TypeError` when the servicer lacks one (nothing answers "not implemented")."""
    missing = [m.name for m in SERVICE.methods if not callable(getattr(servicer, m.name, None))]
    if missing:
        raise TypeError(f"{type(servicer).__name__} does not implement {', '.join(missing)} of {SERVICE.full_name}")
    handlers = {
        m.name: getattr(grpc, f"{_kind(m)}_rpc_method_handler")(
            getattr(servicer, m.name),
            request_deserializer=_deserializer(m.input_type),
            response_serializer=serialize,
        )
        for m in SERVICE.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),))
