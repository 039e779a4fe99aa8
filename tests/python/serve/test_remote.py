"""The client: progress, reports, several queries, closing, and refusing bad servers."""

from __future__ import annotations

import socket
import threading
import time
from concurrent import futures

import grpc
import heinfer
import numpy as np
import pytest
from heinfer.errors import ProtocolError, ServiceError
from heinfer.protocol.limits import message_limits
from heinfer.serve import connect, serve, wire
from heinfer.serve.parts import split
from heinfer.v1 import protocol_pb2
from heinfer.v1 import service_pb2 as pb
from heinfer.serve.rpc import add_servicer

from .conftest import SMALL, mlp_input


def test_progress_and_several_queries(mlp, start) -> None:
    h = start(mlp)
    seen: list[tuple] = []
    x = mlp_input(mlp.batch_capacity + 3, seed=4)
    with connect(h.address, mlp.public(), limits=SMALL, progress=lambda *a: seen.append(a)) as s:
        got = s.infer(x)
    assert seen[:2] == [("keygen", 0, 1), ("keygen", 1, 1)]
    assert [a for a in seen if a[0] == "query"] == [
        ("query", 0, len(x)), ("query", mlp.batch_capacity, len(x)), ("query", len(x), len(x))
    ]  # fmt: skip
    ups = [a for a in seen if a[0] == "upload"]
    assert ups[0] == ("upload", 0, ups[0][2]) and ups[-1][1] == ups[-1][2]
    # every query walks its segments: one more at each client-aided round, all at the result
    per_query = [("segment", k, 2) for k in range(3)]
    assert [a for a in seen if a[0] == "segment"] == per_query * 2
    r = got.report
    assert (r["queries"], r["rounds"], r["items"]) == (2, 2, len(x))
    local: list[tuple] = []
    want = heinfer.infer(mlp, x, progress=lambda *a: local.append(a)).outputs
    assert np.array_equal(got.outputs.argmax(1), want.argmax(1))
    # in process, the same stages in the same order (no upload: nothing travels)
    assert local == [a for a in seen if a[0] != "upload"]


def test_closing(mlp, start) -> None:
    h = start(mlp)
    s = connect(h.address, mlp.public())
    assert s.session_id[:8] in repr(s) and s.session_id not in repr(s)
    s.close()
    s.close()  # idempotent
    assert h.stats()["sessions"] == 0
    with pytest.raises(ServiceError, match="closed") as e:
        s.infer(mlp_input())
    assert e.value.code == "FAILED_PRECONDITION"


def test_input_shapes_are_checked_locally(mlp, start) -> None:
    with connect(start(mlp).address, mlp) as s:
        with pytest.raises(ProtocolError, match="takes"):
            s.infer(np.zeros((2, 3)))
        with pytest.raises(ProtocolError, match="no items"):
            s.infer(np.zeros((0, 8)))


def test_another_program_is_refused_before_key_generation(mlp, squares, start) -> None:
    h = start(mlp)
    seen: list[tuple] = []
    with pytest.raises(ServiceError, match="runs another program") as e:
        connect(h.address, squares.public(), progress=lambda *a: seen.append(a))
    assert e.value.code == "FAILED_PRECONDITION" and not seen
    assert h.stats()["sessions_opened"] == 0


def test_a_client_needs_only_the_public_program(mlp, start) -> None:
    h = start(mlp)
    with connect(h.address, mlp.public()) as s:
        assert not isinstance(s.program, heinfer.Program) and s.program.id == mlp.id
        assert not hasattr(s.program, "layers")
        s.infer(mlp_input())
    with connect(h.address, mlp) as s:  # a full program: only its public part is kept
        assert type(s.program) is heinfer.PublicProgram


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_server_and_a_late_server(mlp) -> None:
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=f"GetInfo on 127.0.0.1:{port}") as e:
        connect(f"127.0.0.1:{port}", mlp.public(), timeout_s=5)
    assert e.value.code == "UNAVAILABLE" and time.monotonic() - t0 < 5
    late: list = []
    timer = threading.Timer(0.3, lambda: late.append(serve(mlp, f"127.0.0.1:{port}")))
    timer.start()
    try:
        with connect(f"127.0.0.1:{port}", mlp.public(), timeout_s=10, wait_for_ready=True) as s:
            s.infer(mlp_input())
    finally:
        timer.join()
        for h in late:
            h.stop()


class _Liar:
    """A fake service that answers GetInfo truthfully and Infer with ``responses``."""

    def __init__(self, program, responses: list[pb.InferResponse]) -> None:
        self.info = wire.info_response(program.id, message_limits(program.public()), SMALL)
        self.responses = responses
        self.server = grpc.server(futures.ThreadPoolExecutor(2), options=wire.server_options(SMALL))
        add_servicer(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def GetInfo(self, request, context):
        return self.info

    def OpenSession(self, requests, context):
        for _ in requests:
            pass
        return pb.OpenSessionResponse(session="abc123", secret="00" * 32)

    def Infer(self, requests, context):
        return iter(self.responses)

    def CloseSession(self, request, context):
        return pb.CloseSessionResponse()


def _responses(message: bytes, kind: str) -> list[pb.InferResponse]:
    return [pb.InferResponse(part=p) for p in split(message, kind, 16 << 10)]


_RESULT = protocol_pb2.Message(
    result={"query": "ab", "ref": "cd", "ciphertexts": b""}
).SerializeToString()


@pytest.mark.parametrize(
    "reply, error, text",
    [
        ([pb.InferResponse()], ProtocolError, "unknown kind 0"),
        (_responses(b"garbage", "step"), ProtocolError, "not a heinfer message"),
        (
            _responses(b"x" * 40_000, "query"),
            ProtocolError,
            "expected a 'step' or 'result' message, got 'query'",
        ),
        ([], ProtocolError, "ended the query stream before the server message"),
        (
            _responses(b"x" * 40_000, "step")[:2],
            ProtocolError,
            "inside the server message after part 2 of 3",
        ),
        (_responses(bytes(50 << 20), "step")[:1], ServiceError, "exceeds the limit"),
        (_responses(_RESULT, "result"), ProtocolError, "did not start"),
    ],
)
def test_the_client_refuses_garbage_from_a_server(mlp, reply, error, text) -> None:
    liar = _Liar(mlp, reply)
    try:
        with (
            connect(f"127.0.0.1:{liar.port}", mlp.public(), limits=SMALL) as s,
            pytest.raises(error, match=text),
        ):
            s.infer(mlp_input())
    finally:
        liar.server.stop(None)


def test_whole_messages_are_received_in_place_on_both_sides(mlp, start, monkeypatch) -> None:
    """Through a real gRPC call, the server's requests and the client's responses that carry
    a whole protocol message arrive as views of the received bytes (no protobuf parse), and
    the answer is the in-process one."""
    from heinfer.serve import rpc

    from .conftest import assert_served_like_in_process

    seen: dict[str, list[str]] = {}
    real = rpc.deserializer

    def spy(cls):
        parse = real(cls)

        def counted(data):
            out = parse(data)
            seen.setdefault(cls.__name__, []).append(type(out).__name__ if isinstance(out, wire.Typed) else out.WhichOneof("payload"))
            return out

        return counted

    monkeypatch.setattr(rpc, "deserializer", spy)
    assert_served_like_in_process(start(mlp), mlp, mlp_input(6, seed=8))
    assert set(seen) == {"InferRequest", "InferResponse"}
    # every whole message in place (none parsed by protobuf); a result above a part in parts
    assert set(seen["InferRequest"]) == {"Typed"}, seen
    assert "Typed" in seen["InferResponse"] and set(seen["InferResponse"]) <= {"Typed", "part"}, seen
