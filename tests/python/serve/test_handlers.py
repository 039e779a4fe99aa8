"""Bad input and vanishing clients: every malformed, truncated, reordered or mismatched
stream gets a status naming the problem; a client that disconnects, stops replying or stops
reading frees its query; and after a stretch of random garbage the server still answers a
good query correctly."""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time

import grpc
import heinfer
import numpy as np
import pytest
from heinfer.protocol import Client
from heinfer.protocol.messages import encode
from heinfer.protocol.limits import message_limits
from heinfer.serve import connect
from heinfer.v1 import protocol_pb2
from heinfer.v1 import service_pb2 as pb

from .conftest import (
    PART,
    SMALL,
    answer_step,
    assert_idle,
    assert_served_like_in_process,
    infer_requests,
    mlp_input,
    parts,
    tolerance,
    wait_until,
)

#: Statuses a bad input may get; never INTERNAL or UNKNOWN (a crash).
REFUSALS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
}


def _status(call) -> tuple[grpc.StatusCode, str]:
    """Drains a call; its status and message (OK when it succeeded)."""
    try:
        for _ in call:
            pass
    except grpc.RpcError as e:
        return e.code(), e.details() or ""
    return grpc.StatusCode.OK, ""


def _edit(message: bytes, **fields) -> bytes:
    """A protocol message with some fields of its body replaced."""
    m = protocol_pb2.Message()
    m.ParseFromString(message)
    body = getattr(m, m.WhichOneof("kind"))
    for k, v in fields.items():
        setattr(body, k, v)
    return m.SerializeToString()


def _requests(ps: list[pb.Part]) -> list[pb.InferRequest]:
    return [pb.InferRequest(part=p) for p in ps]


def _swap_1_2(ps: list) -> list:
    return [ps[0], ps[2], ps[1], *ps[3:]]


@pytest.fixture
def service(mlp, start, raw):
    """A service for the tiny MLP, raw calls on it, a client and its open session."""
    h = start(mlp)
    r = raw(h)
    client = Client(mlp.public())
    return h, r, client, r.session(client)


def _step(r, client: Client, session: str):
    """Sends a query and returns (call, the client's whole reply to the step, gate, tail):
    requests in ``tail`` follow once ``gate`` is set. The step arrives in chunks (in parts,
    or whole when one fits a part); the client decrypts each and answers with one message."""
    gate = threading.Event()
    tail: list[pb.InferRequest] = []

    def requests():
        yield from infer_requests(("query", client.query_message(session, mlp_input())))
        gate.wait(30)
        yield from tail

    call = r.infer(requests(), timeout=30)
    return call, answer_step(call, client), gate, tail


@pytest.mark.parametrize(
    "make, code, text",
    [
        (
            lambda q: _requests(parts(b"not a message at all", "query")),
            "INVALID_ARGUMENT",
            "not a heinfer message",
        ),
        (
            lambda q: _requests(parts(q, "query"))[::-1],
            "INVALID_ARGUMENT",
            "the first part is part",
        ),
        (
            lambda q: _swap_1_2(_requests(parts(q, "query"))),
            "INVALID_ARGUMENT",
            "part 2 arrived where part 1",
        ),
        (
            lambda q: _requests(parts(q, "query"))[:-1],
            "INVALID_ARGUMENT",
            "ended its stream inside the query message after part",
        ),
        (lambda q: [], "INVALID_ARGUMENT", "ended its stream before the query message"),
        (
            lambda q: _requests(parts(q, "reply")),
            "INVALID_ARGUMENT",
            "expected a 'query' message, got 'reply'",
        ),
        (lambda q: [pb.InferRequest()], "INVALID_ARGUMENT", "unknown kind 0"),
        (
            lambda q: infer_requests(("query", _edit(q, session="0" * 32))),
            "INVALID_ARGUMENT",
            "on a call of session",
        ),
        (
            lambda q: infer_requests(("query", _edit(q, ciphertexts=b"\x01" * 100))),
            "INVALID_ARGUMENT",
            "SerializationError",
        ),
        (
            lambda q: infer_requests(
                ("query", protocol_pb2.Message(reply={"query": "ab"}).SerializeToString())
            ),
            "INVALID_ARGUMENT",
            "expected a 'query' message, got 'reply'",
        ),
        (
            lambda q: infer_requests(("query", _edit(q, items=10**6))),
            "INVALID_ARGUMENT",
            "items per query",
        ),
        (
            lambda q: infer_requests(("query", q + bytes(1 << 20))),
            "RESOURCE_EXHAUSTED",
            "exceeds the limit",
        ),
    ],
)
def test_bad_queries_get_a_status_naming_the_problem(service, make, code, text) -> None:
    h, r, client, session = service
    query = client.query_message(session, mlp_input())
    got, details = _status(r.infer(make(query)))
    assert got.name == code and text in details, (got, details)
    assert_idle(h)


def test_message_limits_are_the_programs(service, mlp) -> None:
    h, r, client, session = service
    lim = message_limits(mlp.public())
    info = r.info()
    assert (info.limits.query, info.limits.keys, info.limits.step) == (
        lim["query"],
        lim["keys"],
        lim["step"],
    )
    query = client.query_message(session, mlp_input())
    assert len(query) <= lim["query"] < len(query) + 64 << 10  # tight, not a 1 GiB default
    too_big = [
        pb.InferRequest(part=pb.Part(kind=pb.KIND_QUERY, total=1, size=lim["query"] + 1, data=b"x"))
    ]
    got, details = _status(r.infer(too_big))
    assert got == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (
        f"a query message of {lim['query'] + 1} bytes exceeds the limit of {lim['query']} bytes"
        in details
    )
    assert_idle(h)


@pytest.mark.parametrize(
    "metadata, code, text",
    [
        ("wrong", "PERMISSION_DENIED", "wrong secret for session"),
        ("none", "UNAUTHENTICATED", "needs exactly one session secret"),
        ("twice", "UNAUTHENTICATED", "needs exactly one session secret"),
        ("no session", "UNAUTHENTICATED", "needs exactly one session id"),
        ("unknown session", "NOT_FOUND", "no session"),
    ],
)
def test_a_query_needs_the_session_secret(service, metadata, code, text) -> None:
    h, r, client, session = service
    md = {
        "wrong": [("heinfer-session", session), ("heinfer-session-secret", "00" * 32)],
        "none": [("heinfer-session", session)],
        "twice": [
            ("heinfer-session", session),
            ("heinfer-session-secret", r.secret),
            ("heinfer-session-secret", r.secret),
        ],
        "no session": [("heinfer-session-secret", r.secret)],
        "unknown session": [("heinfer-session", "ab" * 16), ("heinfer-session-secret", r.secret)],
    }[metadata]
    query = infer_requests(("query", client.query_message(session, mlp_input())))
    got, details = _status(r.infer(query, metadata=md))
    assert got.name == code and text in details, (got, details)
    assert h.stats()["queries_running"] == 0 and h.stats()["sessions"] == 1
    got, details = _status(r.infer(query))  # the owner's query runs: to its step, then no reply
    assert got == grpc.StatusCode.INVALID_ARGUMENT and "before the reply to step 0" in details
    assert_idle(h)


def test_bad_keys_get_a_status(service, squares) -> None:
    h, r, client, _ = service
    keys = Client(squares.public()).keys_message()  # another program
    with pytest.raises(grpc.RpcError) as e:
        r.open_session(parts(keys, "keys"))
    assert (
        e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    )  # its keys exceed this program's bound
    assert "a keys message of" in e.value.details()
    for bad, text in [
        (parts(b"\x00" * 50, "keys"), "not a heinfer message"),
        (
            parts(_edit(client.keys_message(), relin_key=b"\x07" * 64), "keys"),
            "not hold exactly the keys",
        ),
        (parts(_edit(client.keys_message(), program_id="ab" * 32), "keys"), "wrong program"),
        (
            parts(protocol_pb2.Message(reply={"query": "ab"}).SerializeToString(), "keys"),
            "expected a 'keys' message",
        ),
        (parts(client.keys_message(), "query"), "expected a 'keys' message, got 'query'"),
        ([], "ended its stream before the keys message"),
    ]:
        with pytest.raises(grpc.RpcError) as e:
            r.open_session(bad)
        assert e.value.code() in (
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.FAILED_PRECONDITION,
        )
        assert text in e.value.details(), e.value.details()
    assert h.stats()["sessions"] == 1 and not h._servicer.registry._reserved


def test_a_reply_must_belong_to_the_stream_and_the_step(service) -> None:
    h, r, client, session = service
    for fields, text in [
        ({"query": "f" * 32}, "on the stream of query"),
        ({"step": 3}, "reply to step 3"),
    ]:
        call, reply, gate, tail = _step(r, client, session)
        tail.extend(infer_requests(("reply", _edit(reply, **fields))))
        gate.set()
        got, details = _status(call)
        assert got == grpc.StatusCode.INVALID_ARGUMENT and text in details, details
        assert_idle(h)


def test_a_bad_part_size_request_is_refused(service) -> None:
    r = service[1]
    got, details = _status(r.infer([], metadata=[*r.owner(), ("heinfer-max-part-bytes", "lots")]))
    assert got == grpc.StatusCode.INVALID_ARGUMENT and "must be an integer" in details


def test_a_client_that_disconnects_mid_protocol_frees_its_query(service, mlp) -> None:
    h, r, client, session = service
    call, _, gate, _ = _step(r, client, session)
    assert h.stats()["queries_running"] == 1 and h.stats()["query_states"] == 1
    call.cancel()
    gate.set()
    assert_idle(h)
    assert h.stats()["errors"] >= 1 and h.stats()["sessions"] == 1
    with connect(h.address, mlp.public(), limits=SMALL) as s:  # still serving
        np.testing.assert_allclose(
            s.infer(mlp_input()).outputs, heinfer.infer(mlp, mlp_input()).outputs,
            atol=tolerance(mlp),
        )  # fmt: skip


def test_a_client_that_stops_replying_gets_deadline_exceeded(mlp, start, raw) -> None:
    h = start(mlp, limits=dataclasses.replace(SMALL, query_timeout_s=0.5))
    r = raw(h)
    client = Client(mlp.public())
    call, _, gate, _ = _step(r, client, r.session(client))
    t0 = time.monotonic()
    got, details = _status(call)
    gate.set()
    assert got == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no complete reply to step 0 from the client within 0.5 s" in details
    assert time.monotonic() - t0 < 5
    assert_idle(h)
    # a query that stops half-way through its own upload is refused the same way
    first = infer_requests(("query", client.query_message(r.session_id, mlp_input())))[:2]
    hold = threading.Event()

    def stalled():
        yield from first
        hold.wait(10)

    got, details = _status(r.infer(stalled()))
    hold.set()
    assert got == grpc.StatusCode.DEADLINE_EXCEEDED and "after part 2 of" in details
    assert_idle(h)


def test_a_client_that_stops_reading_is_cancelled(cryptonets, digits, start, raw) -> None:
    """The server's send blocks on flow control; the watchdog cancels it after the timeout."""
    lim = dataclasses.replace(SMALL, max_part_bytes=1 << 20, query_timeout_s=0.5)
    h = start(cryptonets, limits=lim)
    r = raw(h, limits=lim)
    client = Client(cryptonets.public())
    session = r.session(client)
    query = client.query_message(session, digits[0][:4])
    hold = threading.Event()

    def requests():
        yield from infer_requests(("query", query))
        hold.wait(20)

    # never read: the ~18 MB step does not fit in the transport's windows and buffers
    call = r.infer(requests(), timeout=20)
    try:
        wait_until(lambda: h.stats()["queries_running"] == 1, 10, "the query started")
        assert_idle(h, timeout=20)
        assert h.stats()["errors"] == 1
    finally:
        hold.set()
        call.cancel()


def test_random_garbage_for_a_while_then_a_good_query(mlp, start, raw) -> None:
    """Corrupted, truncated, reordered, oversized and mismatched input for ~3 s (seeded from
    the OS; the seed is printed to replay a failure): every call is refused with a status
    from REFUSALS (or answered), the server frees everything, and a good query is exact.
    Bytes that are not a protobuf ``InferRequest`` at all are refused by gRPC itself
    (``INTERNAL``, "Exception deserializing request!") before any handler runs."""
    seed = int.from_bytes(os.urandom(8), "little")
    print(f"fuzz seed {seed}")
    rng = random.Random(seed)
    h = start(mlp)
    r = raw(h)
    client = Client(mlp.public())
    session = r.session(client)
    query = client.query_message(session, mlp_input())
    good = infer_requests(("query", query))
    keys = client.keys_message()
    channel = grpc.insecure_channel(h.address)
    raw_infer = channel.stream_stream("/heinfer.v1.Inference/Infer")  # bytes in, bytes out

    def flip(data: bytes, n: int) -> bytes:
        b = bytearray(data)
        for _ in range(n):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b)

    def mutated() -> tuple[list, bool]:
        """Requests (raw bytes when the flag is set) of one bad call."""
        choice = rng.randrange(9)
        if choice == 0:  # random bytes as gRPC messages
            return [os.urandom(rng.randrange(0, 200)) for _ in range(rng.randrange(1, 4))], True
        if choice == 1:  # bit flips in the serialized requests (protobuf framing or data)
            return [
                flip(q.SerializeToString(), 1) if rng.random() < 0.3 else q.SerializeToString()
                for q in good
            ], True
        if choice == 2:  # bit flips anywhere in the protocol message (fields or ciphertexts)
            return infer_requests(("query", flip(query, rng.randrange(1, 8)))), False
        if choice == 3:  # truncated message
            return infer_requests(("query", query[: rng.randrange(1, len(query))])), False
        if choice == 4:  # dropped, duplicated or swapped parts
            qs = good[:]
            i, j = rng.randrange(len(qs)), rng.randrange(len(qs))
            qs[i], qs[j] = qs[j], qs[i]
            if rng.random() < 0.5:
                del qs[rng.randrange(len(qs))]
            else:
                qs.insert(rng.randrange(len(qs)), qs[rng.randrange(len(qs))])
            return qs, False
        if choice == 5:  # a declared size far beyond the limit
            part = pb.Part(
                kind=pb.KIND_QUERY, total=1, size=rng.randrange(1 << 31, 1 << 40), data=b"x"
            )
            return [pb.InferRequest(part=part)], False
        if choice == 6:  # protocol fields rewritten
            field, value = rng.choice(
                [("items", rng.choice([0, 2**31, 5])), ("ref", rng.choice(["", "x" * 100, "ZZ", "ab"])),
                 ("session", rng.choice(["", "0" * 32, "g" * 10])), ("ciphertexts", os.urandom(rng.randrange(300)))]
            )  # fmt: skip
            return infer_requests(("query", _edit(query, **{field: value}))), False
        if choice == 7:  # part fields rewritten
            qs = [pb.InferRequest() for _ in good]
            for a, b in zip(qs, good):
                a.CopyFrom(b)
            q = rng.choice(qs).part
            field = rng.choice(["kind", "index", "total", "size"])
            values = {"kind": [0, 1, 3, 7, 2**31 - 1], "size": [0, 1, rng.randrange(2**63)]}
            setattr(q, field, rng.choice(values.get(field, [0, 1, 2, 7, 2**32 - 1])))
            return qs, False
        # keys sent to Infer, or a query's parts after a truncated one
        return infer_requests(("keys", keys)) + good[: rng.randrange(len(good))], False

    deadline = time.monotonic() + 3.0
    n, codes = 0, {}
    try:
        while time.monotonic() < deadline:
            n += 1
            details = ""
            if rng.random() < 0.15:  # garbage keys on OpenSession
                try:
                    r.open_session(parts(flip(keys, 2), "keys"), timeout=10)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as e:
                    code = e.code()
            else:
                requests, is_raw = mutated()
                if is_raw:
                    call = raw_infer(iter(requests), timeout=10, metadata=r.owner())
                else:
                    call = r.infer(requests, timeout=10)
                code, details = _status(call)
            codes[code.name] = codes.get(code.name, 0) + 1
            ok = code in REFUSALS | {grpc.StatusCode.OK}
            ok = ok or (code == grpc.StatusCode.INTERNAL and "deserializing request" in details)
            assert ok, (seed, code, details)
    finally:
        channel.close()
    print(f"{n} bad calls: {codes}")
    assert n > 20 and len(codes) > 2
    assert_idle(h)
    assert_served_like_in_process(h, mlp, mlp_input(7, seed=5))
    assert h.stats()["queries_running"] == 0


def _typed(message: bytes) -> pb.InferRequest:
    """A request carrying a whole protocol message typed (``InferRequest.message``)."""
    m = protocol_pb2.Message()
    m.ParseFromString(message)
    return pb.InferRequest(message=m)


def test_typed_query_chunks_are_answered_like_parts_and_a_typed_whole_must_fit_a_part(service) -> None:
    """A query in chunks of one part, each sent typed, gets its step as a query in parts does
    (the stream then ends: the query is freed); a typed message larger than a part is refused
    by gRPC's message cap before it is parsed."""
    h, r, client, session = service
    chunks = [_typed(m) for m in client.query_messages(session, mlp_input(), PART)]
    assert len(chunks) > 1
    got, details = _status(r.infer(chunks))
    assert got == grpc.StatusCode.INVALID_ARGUMENT and "before the reply to step 0" in details
    assert_idle(h)
    got, _ = _status(r.infer([_typed(client.query_message(session, mlp_input()))]))
    assert got == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert_idle(h)


@pytest.mark.parametrize(
    "make, text",
    [
        # a typed message of a kind the stream does not expect
        (lambda q, reply: [_typed(reply)], "expected a 'query' message, got 'reply'"),
        # a typed message while the parts of another are arriving
        (lambda q, reply: [*_requests(parts(q, "query"))[:1], _typed(reply)], "a whole message inside a message in parts"),
    ],
)
def test_typed_messages_are_checked_like_parts(service, make, text) -> None:
    h, r, client, session = service
    query = client.query_message(session, mlp_input())
    reply = encode("reply", query="ab" * 16, step=0, ciphertexts=b"x", chunk=0, chunks=1)
    got, details = _status(r.infer(make(query, reply)))
    assert got == grpc.StatusCode.INVALID_ARGUMENT and text in details, details
    assert_idle(h)
