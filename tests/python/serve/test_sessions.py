"""Sessions and query slots: every cap (in all and per peer) refuses with RESOURCE_EXHAUSTED
and frees up again, idle sessions expire, closing is safe while a query runs, and only the
client that opened a session may use or close it."""

from __future__ import annotations

import dataclasses
import threading
import time

import grpc
import heinfer
import numpy as np
import pytest
from heinfer.errors import ServiceError
from heinfer.protocol import Client, Server
from heinfer.serve import Limits, connect
from heinfer.serve.parts import Assembler
from heinfer.serve.sessions import Registry, peer_address

from .conftest import PART, SMALL, answer_step, assert_idle, infer_requests, mlp_input, tolerance, wait_until


def _limits(**kw):
    return dataclasses.replace(SMALL, **kw)


class _HeldQuery:
    """A raw query stopped at its client-aided step (the server waits for the reply)."""

    def __init__(self, raw, program, client: Client | None = None):
        self.client = client or Client(program.public())
        self.session = raw.session_id if client is not None else raw.session(self.client)
        self._replies: list[bytes] = []
        self._go = threading.Event()
        query = self.client.query_message(self.session, mlp_input())

        def requests():
            yield from infer_requests(("query", query))
            self._go.wait(30)
            yield from infer_requests(*(("reply", r) for r in self._replies))

        self.call = raw.infer(requests(), timeout=30)
        self.reply = answer_step(self.call, self.client)

    def finish(self) -> np.ndarray:
        self._replies.append(self.reply)
        self._go.set()
        a = Assembler({"result": 1 << 30}, PART)
        for response in self.call:
            if (done := a.feed(response.part)) is not None:
                return self.client.decode_result(done[1])
        raise AssertionError("no result")

    def abandon(self) -> None:
        self.call.cancel()
        self._go.set()


def test_max_sessions(mlp, start) -> None:
    h = start(mlp, limits=_limits(max_sessions=2))
    a, b = connect(h.address, mlp.public()), connect(h.address, mlp.public())
    with pytest.raises(ServiceError, match=r"too many sessions: 2 are open \(max_sessions\)") as e:
        connect(h.address, mlp.public())
    assert e.value.code == "RESOURCE_EXHAUSTED"
    a.close()
    with connect(h.address, mlp.public()) as c:
        c.infer(mlp_input())
    b.close()
    assert h.stats()["sessions"] == 0


def test_idle_sessions_expire_and_free_their_keys(mlp, start) -> None:
    h = start(mlp, limits=_limits(idle_timeout_s=0.3))
    s = connect(h.address, mlp.public())
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
        atol=tolerance(mlp),
    )
    wait_until(lambda: h.stats()["sessions"] == 0, 5, "expiry after the query")


def test_closing_a_session_during_its_query(mlp, start, raw) -> None:
    h = start(mlp)
    r = raw(h)
    q = _HeldQuery(r, mlp)
    r.close_session(q.session, r.secret)
    assert h.stats()["sessions"] == 1  # freed when the query ends
    q.finish()
    wait_until(lambda: h.stats()["sessions"] == 0, 5, "close after the query")
    with pytest.raises(grpc.RpcError) as e:
        _HeldQuery(r, mlp, client=q.client)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    "session, secret, code, text",
    [
        ("0" * 32, "00", "NOT_FOUND", "no session"),
        ("", "00", "NOT_FOUND", "no session"),
        ("mine", "00" * 32, "PERMISSION_DENIED", "only the client that opened a session"),
        ("mine", None, "UNAUTHENTICATED", "needs exactly one session secret"),
        ("mine", "", "PERMISSION_DENIED", "wrong secret"),
    ],
)
def test_close_session_refuses_unknown_sessions_and_other_clients(
    mlp, start, raw, session, secret, code, text
) -> None:
    h = start(mlp)
    r = raw(h)
    mine = r.session(Client(mlp.public()))
    with pytest.raises(grpc.RpcError) as e:
        r.close_session(mine if session == "mine" else session, secret)
    assert e.value.code().name == code and text in e.value.details(), e.value.details()
    assert h.stats()["sessions"] == 1


def test_another_client_can_neither_use_nor_close_a_session(mlp, start, raw) -> None:
    """A second client that learned the session id (not the secret) is refused, and the
    owner's session keeps working; the owner closes it."""
    h = start(mlp)
    with connect(h.address, mlp.public(), limits=SMALL) as owner:
        other = raw(h)
        other.session(Client(mlp.public()))  # its own session: its own secret
        with pytest.raises(grpc.RpcError) as e:
            other.close_session(owner.session_id, other.secret)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        q = infer_requests(
            ("query", Client(mlp.public()).query_message(owner.session_id, mlp_input()))
        )
        with pytest.raises(grpc.RpcError) as e:
            list(
                other.infer(
                    q,
                    metadata=[
                        ("heinfer-session", owner.session_id),
                        ("heinfer-session-secret", other.secret),
                    ],
                )
            )
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert h.stats()["sessions"] == 2
        owner.infer(mlp_input())
    assert h.stats()["sessions"] == 1  # the owner's close worked; the other's session remains
    assert "secret" not in repr(owner) and owner._secret not in repr(owner)


def test_peer_addresses() -> None:
    assert peer_address("ipv4:127.0.0.1:51234") == "ipv4:127.0.0.1"
    assert peer_address("ipv6:[::1]:51234") == "ipv6:[::1]"
    assert peer_address("unix:/tmp/sock") == "unix:/tmp/sock"


def test_per_peer_caps_count_each_address_apart(mlp) -> None:
    reg = Registry(
        Server(mlp), _limits(max_sessions_per_peer=2, max_queries_per_peer=1, max_sessions=3)
    )
    a, b = "ipv4:10.0.0.1", "ipv4:10.0.0.2"
    secrets = {}
    for i, peer in enumerate([a, a, b]):
        reg.reserve_session(peer)
        secrets[f"s{i}"] = reg.add_session(f"s{i}", peer)
    with pytest.raises(ServiceError, match=r"too many sessions: 3 are open \(max_sessions\)"):
        reg.reserve_session(b)
    reg.close_session("s2", secrets["s2"])
    with pytest.raises(
        ServiceError,
        match=r"too many sessions from ipv4:10.0.0.1: 2 are open \(max_sessions_per_peer 2\)",
    ) as e:
        reg.reserve_session(a)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    reg.reserve_session(b)  # another address still may
    reg.release_reservation(b)
    reg.start_query(a, "s0", secrets["s0"])
    with pytest.raises(
        ServiceError,
        match=r"too many queries from ipv4:10.0.0.1: 1 are running \(max_queries_per_peer 1\)",
    ):
        reg.start_query(a, "s1", secrets["s1"])
    reg.end_query(a, "s0", True)
    reg.start_query(a, "s1", secrets["s1"])  # free again
    with pytest.raises(ServiceError, match="wrong secret") as e:
        reg.start_query(b, "s1", secrets["s0"])
    assert e.value.code == "PERMISSION_DENIED"
    assert reg.stats()["queries_running"] == 1


def test_max_sessions_per_peer_over_the_wire(mlp, start) -> None:
    h = start(mlp, limits=_limits(max_sessions_per_peer=1))
    with connect(h.address, mlp.public(), limits=SMALL):
        with pytest.raises(
            ServiceError, match=r"too many sessions from ipv4:127.0.0.1: 1 are open"
        ) as e:
            connect(h.address, mlp.public(), limits=SMALL)
        assert e.value.code == "RESOURCE_EXHAUSTED"
    with connect(h.address, mlp.public(), limits=SMALL) as s:  # freed by the close
        s.infer(mlp_input())


def test_max_concurrent_queries(mlp, start, raw) -> None:
    h = start(mlp, limits=_limits(max_concurrent_queries=1))
    r = raw(h)
    held = _HeldQuery(r, mlp)
    assert h.stats()["queries_running"] == 1
    with connect(h.address, mlp.public(), limits=SMALL) as s:
        with pytest.raises(ServiceError, match=r"too many queries: 1 are running") as e:
            s.infer(mlp_input())
        assert e.value.code == "RESOURCE_EXHAUSTED"
        held.abandon()
        assert_idle(h)
        s.infer(mlp_input())  # the slot is free again


def test_max_queries_per_session(mlp, start) -> None:
    """A session answers its ``max_queries_per_session`` queries, then refuses the next with
    RESOURCE_EXHAUSTED; a new session (new keys) answers again."""
    h = start(mlp, limits=_limits(max_queries_per_session=2))
    with connect(h.address, mlp.public(), limits=SMALL) as s:
        s.infer(mlp_input())
        s.infer(mlp_input())
        with pytest.raises(ServiceError, match=r"has started its 2 queries \(max_queries_per_session\)") as e:
            s.infer(mlp_input())
        assert e.value.code == "RESOURCE_EXHAUSTED"
    assert_idle(h)
    with connect(h.address, mlp.public(), limits=SMALL) as s:
        s.infer(mlp_input())


def test_max_key_bytes(squares, mlp, start) -> None:
    h = start(squares, limits=_limits(max_key_bytes=1 << 20))
    with pytest.raises(
        ServiceError, match=r"keys message of \d+ bytes exceeds the limit of 1048576"
    ) as e:
        connect(h.address, squares.public(), limits=SMALL)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    assert h.stats()["sessions"] == 0 and not h._servicer.registry._reserved


def test_max_message_bytes_lowers_the_programs_bound(mlp, start, raw) -> None:
    h = start(mlp, limits=_limits(max_message_bytes=50_000))
    r = raw(h)
    client = Client(mlp.public())
    whole = client.query_message(r.session(client), mlp_input())
    assert len(whole) > 50_000
    with pytest.raises(grpc.RpcError) as e:
        list(r.infer(infer_requests(("query", whole))))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert f"a query message of {len(whole)} bytes exceeds the limit of 50000" in e.value.details()
    assert_idle(h)
    with connect(h.address, mlp.public(), limits=SMALL) as s:  # chunks of one 16 KiB part each
        np.testing.assert_allclose(s.infer(mlp_input()).outputs, heinfer.infer(mlp, mlp_input()).outputs, atol=tolerance(mlp))
    assert_idle(h)


def test_the_client_applies_its_limits_to_what_the_server_sends(mlp, start) -> None:
    # the server cuts steps into chunks of the part size the client advertises (1 MiB here):
    # its one-chunk step is above the client's own message limit
    big = Limits(max_part_bytes=1 << 20, max_message_bytes=200_000)
    h = start(mlp, limits=Limits())
    with (
        connect(h.address, mlp.public(), limits=big) as s,
        pytest.raises(
            ServiceError, match=r"a step message of \d+ bytes exceeds the limit of 200000"
        ),
    ):
        s.infer(mlp_input())
    assert_idle(h)


def test_a_part_above_the_cap_is_refused_by_grpc(mlp, start, raw) -> None:
    r = raw(start(mlp), limits=_limits(max_part_bytes=64 << 10))
    r.session(Client(mlp.public()))
    with pytest.raises(grpc.RpcError) as e:
        list(r.infer(infer_requests(("query", b"x" * (40 << 10)))[:0] + [
            __import__("heinfer.v1.service_pb2", fromlist=["x"]).InferRequest(
                part={"kind": 2, "total": 1, "size": 40 << 10, "data": b"x" * (40 << 10)})
        ]))  # fmt: skip
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
            with connect(h.address, mlp.public(), limits=SMALL) as s:
                for _ in range(5):
                    got = s.infer(x).outputs
                    assert np.array_equal(got.argmax(1), want.argmax(1))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def churning() -> None:
        while not stop.is_set():
            connect(h.address, mlp.public(), limits=SMALL).close()

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
