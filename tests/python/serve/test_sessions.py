"""Sessions and query slots: every cap refuses with RESOURCE_EXHAUSTED and frees up again,
idle sessions expire, closing is safe while a query runs."""

from __future__ import annotations

import dataclasses
import threading
import time

import grpc
import heinfer
import numpy as np
import pytest
from heinfer.errors import ServiceError
from heinfer.protocol import Client
from heinfer.serve import connect
from heinfer.serve.framing import Assembler, frames
from heinfer.serve.handlers import message_header

from .conftest import SMALL, assert_idle, mlp_input, wait_until


def _limits(**kw):
    return dataclasses.replace(SMALL, **kw)


class _HeldQuery:
    """A raw query stopped at its client-aided step (the server waits for the reply)."""

    def __init__(self, raw, program, session: str | None = None, client: Client | None = None):
        self.client = client or Client(program)
        self.session = session or raw.session(self.client)
        self._replies: list[bytes] = []
        self._go = __import__("threading").Event()
        query = self.client.query_message(self.session, mlp_input())

        def requests():
            yield from frames(query, 16 << 10)
            self._go.wait(30)
            for r in self._replies:
                yield from frames(r, 16 << 10)

        self.call = raw.infer(requests(), timeout=30)
        a = Assembler(SMALL)
        for f in self.call:
            step = a.feed(f)
            if step is not None:
                break
        assert message_header(step, "step")[0] == "step"
        self.step = step

    def finish(self) -> np.ndarray:
        self._replies.append(self.client.reply_message(self.step))
        self._go.set()
        a = Assembler(SMALL)
        for f in self.call:
            m = a.feed(f)
            if m is not None:
                return self.client.decode_result(m)
        raise AssertionError("no result")

    def abandon(self) -> None:
        self.call.cancel()
        self._go.set()


def test_max_sessions(mlp, start) -> None:
    h = start(mlp, limits=_limits(max_sessions=2))
    a, b = connect(h.address, mlp), connect(h.address, mlp)
    with pytest.raises(ServiceError, match=r"too many sessions: 2 are open \(max_sessions\)") as e:
        connect(h.address, mlp)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    a.close()
    with connect(h.address, mlp) as c:
        c.infer(mlp_input())
    b.close()
    assert h.stats()["sessions"] == 0


def test_idle_sessions_expire_and_free_their_keys(mlp, start) -> None:
    h = start(mlp, limits=_limits(idle_timeout_s=0.3))
    s = connect(h.address, mlp)
    s.infer(mlp_input())
    assert h.stats()["sessions"] == 1
    wait_until(lambda: h.stats()["sessions"] == 0, 5, "idle expiry")
    assert h.stats()["sessions_expired"] == 1
    assert not h._servicer.server._sessions  # the protocol server dropped the keys
    with pytest.raises(ServiceError, match="expired after 0.3 s idle") as e:
        s.infer(mlp_input())
    assert e.value.code == "NOT_FOUND"
    s.close()  # closing an expired session is not an error


def test_a_running_query_keeps_its_session_alive(mlp, start, raw) -> None:
    h = start(mlp, limits=_limits(idle_timeout_s=0.3))
    q = _HeldQuery(raw(h), mlp)
    time.sleep(0.8)
    assert h.stats()["sessions"] == 1
    np.testing.assert_allclose(
        q.finish(),
        heinfer.infer(mlp, mlp_input()).outputs,
        atol=2 * mlp.segments[-1].predicted_error,
    )
    wait_until(lambda: h.stats()["sessions"] == 0, 5, "expiry after the query")


def test_closing_a_session_during_its_query(mlp, start, raw) -> None:
    h = start(mlp)
    r = raw(h)
    q = _HeldQuery(r, mlp)
    r.close_session(q.session.encode())
    assert h.stats()["sessions"] == 1  # freed when the query ends
    q.finish()
    wait_until(lambda: h.stats()["sessions"] == 0, 5, "close after the query")
    with pytest.raises(grpc.RpcError) as e:
        _HeldQuery(r, mlp, session=q.session, client=q.client)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    "request_, code, text",
    [
        (b"0" * 32, "NOT_FOUND", "no session"),
        (b"", "INVALID_ARGUMENT", "1 to 64 ASCII"),
        (b"x" * 65, "INVALID_ARGUMENT", "1 to 64 ASCII"),
    ],
)
def test_close_session_refuses_unknown_and_malformed_ids(
    mlp, start, raw, request_, code, text
) -> None:
    r = raw(start(mlp))
    with pytest.raises(grpc.RpcError) as e:
        r.close_session(request_)
    assert e.value.code().name == code and text in e.value.details()


def test_max_concurrent_queries(mlp, start, raw) -> None:
    h = start(mlp, limits=_limits(max_concurrent_queries=1))
    r = raw(h)
    held = _HeldQuery(r, mlp)
    assert h.stats()["queries_running"] == 1
    with connect(h.address, mlp, limits=SMALL) as s:
        with pytest.raises(ServiceError, match=r"too many queries: 1 are running") as e:
            s.infer(mlp_input())
        assert e.value.code == "RESOURCE_EXHAUSTED"
        held.abandon()
        assert_idle(h)
        s.infer(mlp_input())  # the slot is free again


def test_max_key_bytes(squares, mlp, start) -> None:
    h = start(squares, limits=_limits(max_key_bytes=1 << 20))
    with pytest.raises(
        ServiceError, match=r"keys message of \d+ bytes exceeds the limit of 1048576"
    ) as e:
        connect(h.address, squares, limits=SMALL)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    assert h.stats()["sessions"] == 0 and h._servicer.registry._reserved == 0


def test_max_message_bytes_and_max_chunks(mlp, start) -> None:
    for lim, text in [
        (
            _limits(max_message_bytes=50_000),
            r"query message of \d+ bytes exceeds the limit of 50000",
        ),
        (_limits(max_chunks=4), r"query message in \d+ chunks exceeds max_chunks \(4\)"),
    ]:
        h = start(mlp, limits=lim)
        with connect(h.address, mlp, limits=SMALL) as s:
            with pytest.raises(ServiceError, match=text) as e:
                s.infer(mlp_input())
            assert e.value.code == "RESOURCE_EXHAUSTED"
        assert_idle(h)


def test_the_client_applies_its_limits_to_what_the_server_sends(mlp, start) -> None:
    h = start(mlp)
    with (
        connect(h.address, mlp, limits=_limits(max_message_bytes=200_000)) as s,
        pytest.raises(ServiceError, match=r"server message of \d+ bytes exceeds the limit"),
    ):
        s.infer(mlp_input())
    assert_idle(h)


def test_a_chunk_above_the_cap_is_refused_by_grpc(mlp, start, raw) -> None:
    r = raw(start(mlp), limits=_limits(max_chunk_bytes=64 << 10))
    with pytest.raises(grpc.RpcError) as e:
        list(r.infer(frames(b"x" * (40 << 10), 40 << 10)))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_many_clients_while_sessions_open_and_close(mlp, start) -> None:
    """Four clients querying while a fifth opens and closes sessions: the shared protocol
    server stays consistent (no lost query state, no error, every answer right)."""
    h = start(mlp, max_workers=6)
    x = mlp_input(6, seed=8)
    want = heinfer.infer(mlp, x).outputs
    errors: list[BaseException] = []
    stop = threading.Event()

    def querying() -> None:
        try:
            with connect(h.address, mlp, limits=SMALL) as s:
                for _ in range(5):
                    got = s.infer(x).outputs
                    assert np.array_equal(got.argmax(1), want.argmax(1))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def churning() -> None:
        while not stop.is_set():
            connect(h.address, mlp, limits=SMALL).close()

    churn = threading.Thread(target=churning)
    churn.start()
    threads = [threading.Thread(target=querying) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    churn.join(10)
    assert not errors, errors
    stats = h.stats()
    assert stats["queries_done"] == 20 and stats["errors"] == 0 and stats["sessions"] == 0
    assert_idle(h)
