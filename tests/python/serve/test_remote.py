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
from heinfer.serve import connect, serve, wire
from heinfer.serve.framing import frames

from .conftest import SMALL, mlp_input


def test_progress_and_several_queries(mlp, start) -> None:
    h = start(mlp)
    seen: list[tuple] = []
    x = mlp_input(mlp.batch_capacity + 3, seed=4)
    with connect(h.address, mlp, limits=SMALL, progress=lambda *a: seen.append(a)) as s:
        got = s.infer(x)
    assert seen[:2] == [("keygen", 0, 1), ("keygen", 1, 1)]
    assert [a for a in seen if a[0] == "query"] == [
        ("query", 0, len(x)), ("query", mlp.batch_capacity, len(x)), ("query", len(x), len(x))
    ]  # fmt: skip
    ups = [a for a in seen if a[0] == "upload"]
    assert ups[0] == ("upload", 0, ups[0][2]) and ups[-1][1] == ups[-1][2]
    r = got.report
    assert (r["queries"], r["rounds"], r["items"]) == (2, 2, len(x))
    want = heinfer.infer(mlp, x).outputs
    assert np.array_equal(got.outputs.argmax(1), want.argmax(1))


def test_closing(mlp, start) -> None:
    h = start(mlp)
    s = connect(h.address, mlp)
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


def test_another_program_is_refused_before_key_generation(mlp, mlp_other, squares, start) -> None:
    h = start(mlp)
    for other, text in [
        (mlp_other, "another program"),
        (squares, "runs a program with parameters"),
    ]:
        seen: list[tuple] = []
        with pytest.raises(ServiceError, match=text) as e:
            connect(h.address, other, progress=lambda *a, seen=seen: seen.append(a))
        assert e.value.code == "FAILED_PRECONDITION" and not seen
    assert h.stats()["sessions_opened"] == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_server_and_a_late_server(mlp) -> None:
    port = _free_port()
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=f"GetInfo on 127.0.0.1:{port}") as e:
        connect(f"127.0.0.1:{port}", mlp, timeout_s=5)
    assert e.value.code == "UNAVAILABLE" and time.monotonic() - t0 < 5
    late: list = []
    timer = threading.Timer(0.3, lambda: late.append(serve(mlp, f"127.0.0.1:{port}")))
    timer.start()
    try:
        with connect(f"127.0.0.1:{port}", mlp, timeout_s=10, wait_for_ready=True) as s:
            s.infer(mlp_input())
    finally:
        timer.join()
        for h in late:
            h.stop()


class _Liar:
    """A fake service that answers GetInfo truthfully and everything else with garbage."""

    def __init__(self, program, infer_frames) -> None:
        ident = lambda b: b
        info = wire.info_reply(
            heinfer.protocol.server.program_id(program), wire.program_digest(program), SMALL
        )
        methods = {
            "GetInfo": grpc.unary_unary_rpc_method_handler(lambda r, c: info, ident, ident),
            "OpenSession": grpc.stream_unary_rpc_method_handler(
                lambda it, c: wire.session_reply("abc123"), ident, ident
            ),
            "Infer": grpc.stream_stream_rpc_method_handler(
                lambda it, c: iter(infer_frames), ident, ident
            ),
            "CloseSession": grpc.unary_unary_rpc_method_handler(lambda r, c: b"", ident, ident),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(2), options=wire.server_options(SMALL))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(wire.SERVICE, methods),)
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()


@pytest.mark.parametrize(
    "reply, error, text",
    [
        ([b"junk"], ProtocolError, "shorter than its 24-byte header"),
        (list(frames(b"HEMS\x01garbage", 1024)), ProtocolError, "truncated or too large"),
        ([], ProtocolError, "ended the query stream before the server message"),
        (
            list(frames(b"x" * 5000, 1024))[:2],
            ProtocolError,
            "inside the server message after chunk 2",
        ),
        (
            list(
                frames(
                    heinfer.protocol.messages.encode(
                        heinfer.protocol.messages.Message(
                            "result", {"query": "q", "ref": "forged", "items": 5}
                        )
                    ),
                    1024,
                )
            ),
            ProtocolError,
            "did not send",
        ),
    ],
)
def test_the_client_refuses_garbage_from_a_server(mlp, reply, error, text) -> None:
    liar = _Liar(mlp, reply)
    try:
        with (
            connect(f"127.0.0.1:{liar.port}", mlp, limits=SMALL) as s,
            pytest.raises(error, match=text),
        ):
            s.infer(mlp_input())
    finally:
        liar.server.stop(None)
