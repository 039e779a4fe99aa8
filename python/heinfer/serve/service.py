"""Running the service: :func:`serve` and the handle it returns (layer: ``heinfer.serve``).

>>> handle = serve(program, "127.0.0.1:0")             # doctest: +SKIP
>>> with connect(handle.address, program) as s:          # doctest: +SKIP
...     s.infer(x).outputs
>>> handle.stop()                                        # doctest: +SKIP

The server is gRPC's synchronous server on a thread pool of ``max_workers`` threads: each
running call holds one (a query holds it for its whole exchange, client-aided rounds
included), further calls wait in gRPC's queue, and calls beyond
``max_workers + Limits.max_concurrent_queries + Limits.max_sessions`` running or waiting
are refused by gRPC with ``RESOURCE_EXHAUSTED``.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from concurrent import futures

import grpc

from heinfer.errors import ServiceError
from heinfer.program.model import Program
from heinfer.runtime.executor import bad_budget
from heinfer.serve import rpc, wire
from heinfer.serve.handlers import Servicer
from heinfer.serve.limits import Limits
from heinfer.serve.tls import TlsConfig
from heinfer.serve.watchdog import Reaper, SendWatch

__all__ = ["ServiceHandle", "is_loopback", "serve"]

_LOG = logging.getLogger("heinfer.serve")


class ServiceHandle:
    """A running service: its address, counters, and how to stop it.

    Also a context manager that stops the service on exit.
    """

    def __init__(
        self,
        server: grpc.Server,
        pool: futures.ThreadPoolExecutor,
        servicer: Servicer,
        reaper: Reaper,
        host: str,
        port: int,
        executor: object = None,
    ) -> None:
        self._server = server
        self._executor = executor
        self._pool = pool
        self._servicer = servicer
        self._reaper = reaper
        self._stopped = threading.Event()
        #: The port the service listens on (the one chosen when asked for port 0).
        self.port = port
        #: ``"host:port"`` to give to :func:`heinfer.serve.connect`.
        self.address = f"{host}:{port}"

    def __repr__(self) -> str:
        return f"ServiceHandle(address={self.address!r})"

    def __enter__(self) -> ServiceHandle:  # noqa: PYI034 - Python 3.10: no typing.Self
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def limits(self) -> Limits:
        """The limits the service enforces."""
        return self._servicer.limits

    def stats(self) -> dict:
        """Counters: ``sessions`` (open), ``queries_running``, ``queries_done``, ``errors``
        (calls that failed, cancelled queries included), ``bytes_in``/``bytes_out`` (parts),
        ``sessions_opened`` and ``sessions_expired``."""
        return self._servicer.registry.stats()

    def stop(self, grace: float | None = None) -> None:
        """Stops accepting calls, lets running ones finish for ``grace`` seconds (cancels
        them at once when ``None``), and waits until the server has stopped. Idempotent."""
        if self._stopped.is_set():
            return
        self._server.stop(grace).wait()
        self._reaper.stop()
        self._pool.shutdown(wait=True)
        if self._executor is not None:
            self._executor.close()
        self._stopped.set()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Blocks until the service stops (or ``timeout`` seconds pass); whether it stopped
        (note: gRPC's own method answers the opposite, whether it timed out)."""
        return not self._server.wait_for_termination(timeout)


def serve(
    program: Program,
    address: str = "127.0.0.1:0",
    *,
    limits: Limits = Limits(),  # noqa: B008 - immutable
    tls: TlsConfig | None = None,
    token: str | None = None,
    max_workers: int = 8,
    insecure: bool = False,
    backend: str = "local",
    ray_address: str | None = None,
    ray_workers: int = 2,
    ray_split: str = "auto",
    max_memory: int | None = None,
) -> ServiceHandle:
    """Starts serving ``program`` on ``address`` (``"host:port"``, port 0 picks a free one).

    ``tls``: serve over TLS with ``tls.cert_chain``/``tls.private_key`` (and require client
    certificates signed by ``tls.root_cert`` when ``tls.require_client_cert``). ``token``:
    every call must carry ``authorization: Bearer <token>`` (use it with TLS: without TLS the
    token travels in clear). ``insecure``: allow listening without TLS on an address that is
    not loopback (anyone on the path then sees ciphertexts, session secrets and the token; the
    inputs stay encrypted). ``backend="ray"``: the server's work runs on Ray actors
    (:class:`heinfer.cluster.RayExecutor`: ``ray_workers`` actors of one CPU each, on the
    cluster at ``ray_address`` or, with ``None``, on a local Ray started on 127.0.0.1;
    ``ray_split`` as in :func:`heinfer.cluster.shard_plan`); the actors stop with the service.
    ``max_memory`` (local backend): bytes of encoded plaintexts the server keeps (default:
    half of physical memory at most, :func:`heinfer.runtime.executor.plaintext_budget`);
    beyond it the largest segments are encoded during each query.
    Returns at once; the service runs on background threads.

    Raises :class:`TypeError` for a :class:`~heinfer.PublicProgram` (no weights) or bad
    ``limits``, :class:`ValueError` for bad arguments — a non-loopback address without
    ``tls`` and without ``insecure=True`` among them — and
    :class:`~heinfer.errors.ServiceError` (``UNAVAILABLE``) when the address cannot be bound.
    """
    if getattr(program, "protocol", None) == "two-party":
        raise TypeError("serve() serves client-aided programs; a two-party program is served by heinfer.serve.two_party.serve_two_party")
    if not isinstance(program, Program):
        raise TypeError(
            f"serve() needs the server's program with its weights (heinfer.Program), got "
            f"{type(program).__name__}: a PublicProgram is what clients get"
        )
    if not isinstance(limits, Limits):
        raise TypeError(f"limits must be a heinfer.serve.Limits, got {type(limits).__name__}")
    if token is not None and (not isinstance(token, str) or not token or not token.isprintable()):
        raise ValueError("token must be a non-empty printable string")
    if not isinstance(max_workers, int) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}")
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    host, _, port_text = address.rpartition(":")
    if not host or not port_text.isdigit():
        raise ValueError(f"address must be 'host:port', got {address!r}")
    if tls is None and not is_loopback(host):
        if not insecure:
            raise ValueError(
                f"refusing to listen on {host} without TLS: session secrets and tokens would "
                "travel in clear; give tls=TlsConfig(...) (heinfer serve --tls-cert/--tls-key), "
                "listen on 127.0.0.1, or pass insecure=True (--insecure) to accept that"
            )
        _LOG.warning("serving on %s without TLS (insecure=True): everything travels in clear", host)
    if (why := bad_budget(max_memory)) is not None:
        raise ValueError(why)
    if max_memory is not None and backend == "ray":
        raise ValueError("max_memory applies to the local backend (Ray workers each hold the whole program)")
    executor = None
    if backend == "ray":
        from heinfer.cluster import RayExecutor

        executor = RayExecutor(program, workers=ray_workers, address=ray_address, split=ray_split)
    watch = SendWatch()
    servicer = Servicer(program, limits, token, watch, executor, max_memory)
    pool = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="heinfer-serve")
    server = grpc.server(
        pool,
        options=wire.server_options(limits),
        maximum_concurrent_rpcs=max_workers + limits.max_concurrent_queries + limits.max_sessions,
    )
    rpc.add_servicer(servicer, server)
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.server_credentials())
    except RuntimeError as e:
        port, why = 0, str(e)
    else:
        why = "the port is in use or the address is not local"
    if not port:
        server.stop(None)
        pool.shutdown(wait=False)
        if executor is not None:
            executor.close()
        raise ServiceError(f"cannot listen on {address}: {why}", code="UNAVAILABLE")
    server.start()
    period = min(1.0, limits.idle_timeout_s / 4, limits.query_timeout_s / 4)
    reaper = Reaper(servicer.registry, watch, max(period, 0.01))
    return ServiceHandle(server, pool, servicer, reaper, host, port, executor)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP literal, IPv6 in brackets or not) is loopback only."""
    h = host.strip("[]")
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False
