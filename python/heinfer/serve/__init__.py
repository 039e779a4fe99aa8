"""The network service: encrypted inference over gRPC, and the command line
(layer: ``heinfer.serve``).

A server (:func:`serve`) runs a compiled program for many clients at once, each in its own
session with its own evaluation keys; it never holds a secret key. A client
(:func:`connect`) generates its keys locally, uploads the evaluation keys once and runs
queries (:meth:`RemoteSession.infer`), the client-aided rounds travelling on the same
bidirectional stream as the query. Messages are the versioned protocol messages of
:mod:`heinfer.protocol.messages`, cut into validated frames (:mod:`heinfer.serve.framing`);
TLS, mutual TLS and a bearer token are optional (:class:`TlsConfig`); every cap is in
:class:`Limits`; failures are gRPC statuses on the wire (:mod:`heinfer.serve.status`) and
:class:`~heinfer.errors.ServiceError` on the client.

>>> import heinfer, heinfer.serve as hs                       # doctest: +SKIP
>>> handle = hs.serve(program, "127.0.0.1:0", token="s3cret")   # doctest: +SKIP
>>> with hs.connect(handle.address, program, token="s3cret") as s:  # doctest: +SKIP
...     s.infer(x).outputs.argmax(1)
>>> handle.stop()                                             # doctest: +SKIP

Modules: ``limits``, ``tls``, ``framing`` (chunks), ``wire`` (methods, metadata, options),
``status`` (errors ⇄ statuses), ``sessions`` (sessions, query slots, counters), ``inbox``
(reading with a time limit), ``watchdog`` (expiry, stalled sends), ``handlers`` (the calls),
``service`` (:func:`serve`), ``remote`` (:func:`connect`), ``cli*`` (the command line).
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
