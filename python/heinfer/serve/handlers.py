"""The four calls of the service, on top of the protocol server (layer: ``heinfer.serve``).

:class:`Servicer` implements the generated ``heinfer.v1.Inference`` servicer. It owns one
protocol :class:`~heinfer.protocol.Server` (evaluation keys only; no type here can hold a
secret key) shared by every session, and checks everything the protocol server does not:
the bearer token, the session's owner (its secret), the parts of each message
(:mod:`heinfer.serve.parts`) against the limits the program determines, the caps of
:class:`~heinfer.serve.limits.Limits` (per service and per peer), the program id of uploaded
keys, the session of a query, and that each reply on a stream belongs to that stream's
query. Every failure ends the call with the status :mod:`heinfer.serve.status` assigns to
it; every resource a call took (its query slot, the query state in the protocol server, the
helper thread) is given back when the call ends, however it ends.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterator

import grpc

from heinfer.errors import ProtocolError, ServiceError
from heinfer.program.model import Program
from heinfer.protocol import Server
from heinfer.protocol.messages import decode, decode_bulk
from heinfer.serve import wire
from heinfer.serve.inbox import Inbox
from heinfer.serve.limits import Limits, effective_limits
from heinfer.serve.parts import MIN_PART_BYTES, split
from heinfer.serve.sessions import Registry, peer_address
from heinfer.serve.status import abort
from heinfer.serve.watchdog import SendWatch
from heinfer.v1 import service_pb2 as pb

__all__ = ["Servicer", "metadata_value"]


def metadata_value(context: grpc.ServicerContext, key: str, what: str) -> str:
    """The one value of metadata ``key`` (``what`` names it in errors): ``UNAUTHENTICATED``
    when it is missing or given twice."""
    given = [v for k, v in context.invocation_metadata() if k == key]
    if len(given) != 1:
        raise ServiceError(
            f"this call needs exactly one {what} (metadata {key!r})", code="UNAUTHENTICATED"
        )
    v = given[0]
    return v if isinstance(v, str) else bytes(v).decode("ascii", errors="replace")


class Servicer:
    """``GetInfo``, ``OpenSession``, ``Infer`` and ``CloseSession`` for one program."""

    def __init__(
        self, program: Program, limits: Limits, token: str | None, watch: SendWatch, executor=None,
        max_memory: int | None = None,
    ) -> None:
        # ``executor``: None (in-process, keeping ``max_memory`` bytes of plaintexts) or a
        # heinfer.cluster.RayExecutor.
        self.server = Server(program, max_sessions=limits.max_sessions, executor=executor, max_memory=max_memory)
        self.limits = limits
        self.program_id = program.id
        #: Kind → largest message of that kind, from the public program (and the operator).
        self.message_limits = effective_limits(limits, program)
        self.registry = Registry(self.server, limits)
        self.watch = watch
        self._bearer = None if token is None else f"Bearer {token}".encode()

    # ------------------------------------------------------------------ calls
    def GetInfo(
        self, request: pb.GetInfoRequest, context: grpc.ServicerContext
    ) -> pb.GetInfoResponse:
        """The program id and the limits, for a client about to make keys."""
        try:
            self._authorize(context)
            return wire.info_response(self.program_id, self.message_limits, self.limits)
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self._fail(context, e)

    def OpenSession(
        self, requests: Iterator[pb.OpenSessionRequest], context: grpc.ServicerContext
    ) -> pb.OpenSessionResponse:
        """Reads one keys message, opens a session with it, answers the id and the secret."""
        try:
            self._authorize(context)
            peer = peer_address(context.peer())
            self.registry.reserve_session(peer)
            try:
                expected = [(self._allow("keys"), "keys message")]
                inbox = Inbox(requests, expected, self.limits.max_part_bytes, self._count_in)
                try:
                    _, keys = inbox.message(self.limits.query_timeout_s)
                finally:
                    inbox.close()
                _, msg = decode(keys, "keys")
                if msg.program_id != self.program_id:
                    raise ServiceError(
                        f"keys are for program {msg.program_id[:16]}…, this service runs "
                        f"{self.program_id[:16]}… (wrong program?)",
                        code="FAILED_PRECONDITION",
                    )
                session = self.server.open_session(keys)
            except BaseException:
                self.registry.release_reservation(peer)
                raise
            secret = self.registry.add_session(session, peer)
            return pb.OpenSessionResponse(session=session, secret=secret)
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self._fail(context, e)

    def CloseSession(
        self, request: pb.CloseSessionRequest, context: grpc.ServicerContext
    ) -> pb.CloseSessionResponse:
        """Closes the session of ``request`` (its keys are freed); only its owner may."""
        try:
            self._authorize(context)
            secret = metadata_value(context, wire.SECRET_METADATA, "session secret")
            self.registry.close_session(request.session, secret)
            return pb.CloseSessionResponse()
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self._fail(context, e)

    def Infer(
        self, requests: Iterator[pb.InferRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.InferResponse]:
        """One query: the query message in, steps out and replies in, the result out."""
        peer = peer_address(context.peer())
        try:
            self._authorize(context)
            session = metadata_value(context, wire.SESSION_METADATA, "session id")
            secret = metadata_value(context, wire.SECRET_METADATA, "session secret")
            part_bytes = self._part_bytes(context)
            self.registry.start_query(peer, session, secret)
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            self._fail(context, e)
        ref = inbox = None
        ok = False
        try:
            program = self.server.program
            allowed = {k: self.message_limits[k] for k in ("query", "reply")}
            # one chunk per ciphertext at most: the most messages a query's stream can carry
            most = sum(seg.n_input_cts for seg in program.segments)
            expected = [(allowed, "query message")] * most
            inbox = Inbox(requests, expected, self.limits.max_part_bytes, self._count_in)
            out, query, busy, step = None, None, 0.0, 0  # busy: seconds in the protocol server
            while True:
                while out is None:  # the chunks of the query (or of a reply)
                    kind, message = inbox.message(self.limits.query_timeout_s)
                    want = "query" if query is None else "reply"
                    if kind != want:
                        name = "query message" if query is None else f"reply to step {step - 1}"
                        raise ProtocolError(f"{name}: expected a {want!r} message, got {kind!r}")
                    if ref is None:
                        ref = decode_bulk(message, "query")[1].ref  # in place
                    t0 = time.perf_counter()
                    out = self.server.receive(message, part_bytes, session=session, query=query)
                    busy += time.perf_counter() - t0
                query, messages = out.query, iter(out)
                if out.kind == "step":
                    inbox.rename(f"reply to step {step}")
                    step += 1
                while True:
                    t0 = time.perf_counter()
                    message = next(messages, None)  # serialized here
                    busy += time.perf_counter() - t0
                    if message is None:
                        break
                    if out.kind == "result":
                        context.set_trailing_metadata(((wire.SERVER_SECONDS_METADATA, f"{busy:.6f}"),))
                    yield from self._send(message, out.kind, part_bytes, context)
                if out.kind == "result":
                    ok = True
                    return
                out = None
        except Exception as e:  # noqa: BLE001 - every failure becomes a status
            abort(context, e)
        finally:
            if inbox is not None:
                inbox.close()
            self.watch.sent(id(context))
            if ref is not None and not ok:
                self.server.cancel_ref(session, ref)
            self.registry.end_query(peer, session, ok)

    # ------------------------------------------------------------------ helpers
    def _allow(self, kind: str) -> dict[str, int]:
        return {kind: self.message_limits[kind]}

    def _send(
        self, message: bytes, kind: str, part_bytes: int, context: grpc.ServicerContext
    ) -> Iterator[pb.InferResponse]:
        """``message`` typed when it fits one part, else its parts; each response watched
        until gRPC has sent it."""
        key = id(context)
        whole = len(message) <= part_bytes
        responses = [wire.Typed(message)] if whole else split(message, kind, part_bytes, pb.InferResponse)
        for response in responses:
            n = response.wire_bytes() if whole else response.ByteSize()
            self.watch.sending(key, context)
            yield response
            self.watch.sent(key)
            self.registry.count("bytes_out", n)

    def _count_in(self, n: int) -> None:
        self.registry.count("bytes_in", n)

    def _fail(self, context: grpc.ServicerContext, e: BaseException) -> None:
        self.registry.count("errors")
        abort(context, e)

    def _authorize(self, context: grpc.ServicerContext) -> None:
        """Checks the bearer token (``UNAUTHENTICATED``) when the service has one."""
        if self._bearer is None:
            return
        given = [v for k, v in context.invocation_metadata() if k == "authorization"]
        if not given:
            raise ServiceError(
                "this service requires a token (metadata 'authorization: Bearer <token>')",
                code="UNAUTHENTICATED",
            )
        value = given[0].encode() if isinstance(given[0], str) else bytes(given[0])
        if len(given) > 1 or not hmac.compare_digest(value, self._bearer):
            raise ServiceError("invalid token", code="UNAUTHENTICATED")

    def _part_bytes(self, context: grpc.ServicerContext) -> int:
        """The part size to send with: the client's ``heinfer-max-part-bytes`` within ours."""
        given = [v for k, v in context.invocation_metadata() if k == wire.MAX_PART_METADATA]
        if not given:
            return self.limits.max_part_bytes
        try:
            n = int(given[0])
        except (TypeError, ValueError):
            raise ProtocolError(f"{wire.MAX_PART_METADATA} must be an integer") from None
        return max(MIN_PART_BYTES, min(n, self.limits.max_part_bytes))
