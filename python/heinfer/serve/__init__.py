"""The network service: encrypted inference over gRPC
(layer: ``heinfer.serve``).

A server (:func:`serve`) runs a compiled program for many clients at once, each in its own
session with its own evaluation keys; it never holds a secret key. A client
(:func:`connect`) generates its keys locally, uploads the evaluation keys once and runs
queries (:meth:`RemoteSession.infer`), the client-aided rounds travelling on the same
bidirectional stream as the query. The service is ``heinfer.v1.Inference``
(``proto/heinfer/v1/service.proto``, generated code in :mod:`heinfer.v1`); its messages carry
the protobuf protocol messages of :mod:`heinfer.protocol.messages` in typed, validated parts
(:mod:`heinfer.serve.parts`). A session is bound to its creator by a secret. Without TLS the
service listens on loopback only (unless ``insecure=True``); TLS, mutual TLS and a bearer
token are optional (:class:`TlsConfig`); message sizes are bounded by the public program and
every other cap is in :class:`Limits`; failures are gRPC statuses on the wire
(:mod:`heinfer.serve.status`) and :class:`~heinfer.errors.ServiceError` on the client. The
command line is :mod:`heinfer.cli`.

>>> import heinfer, heinfer.serve as hs                       # doctest: +SKIP
>>> handle = hs.serve(program, "127.0.0.1:0", token="s3cret")   # doctest: +SKIP
>>> with hs.connect(handle.address, program.public(), token="s3cret") as s:  # doctest: +SKIP
...     s.infer(x).outputs.argmax(1)
>>> handle.stop()                                             # doctest: +SKIP

Modules: ``limits``, ``tls``, ``parts`` (messages in parts), ``wire`` (metadata, options,
info), ``status`` (errors ⇄ statuses), ``sessions`` (sessions, owners, query slots, counters),
``inbox`` (reading with a time limit), ``watchdog`` (expiry, stalled sends), ``handlers``
(the calls), ``service`` (:func:`serve`), ``remote`` (:func:`connect`).
"""

from heinfer.errors import ServiceError
from heinfer.serve.limits import Limits
from heinfer.serve.remote import RemoteSession, connect
from heinfer.serve.service import ServiceHandle, serve
from heinfer.serve.tls import TlsConfig

__all__ = [
    "Limits",
    "RemoteSession",
    "ServiceError",
    "ServiceHandle",
    "TlsConfig",
    "connect",
    "serve",
]
