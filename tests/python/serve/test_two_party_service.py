"""The two-party protocol over gRPC on 127.0.0.1: the same exact results as in process, the
frames checked, and misuse refused with a status that names it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

import heinfer
from heinfer.errors import ProtocolError, ServiceError
from heinfer.protocol.two_party import run_in_process
from heinfer.serve.two_party import PART_BYTES, Kind, Reassembler, connect_two_party, frames, serve_two_party
from heinfer.v1 import service_pb2 as pb

MODELS = Path(__file__).resolve().parents[3] / "models"
DIGITS = np.load(MODELS / "digits_test.npz")["x"]


@pytest.fixture(scope="module")
def prog():
    return heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=DIGITS[100:164])


def test_served_results_equal_the_in_process_ones(prog) -> None:
    want, _ = run_in_process(prog, DIGITS[:3])
    with serve_two_party(prog) as handle, connect_two_party(handle.address, prog.public()) as conn:
        got, rep = conn.infer(DIGITS[:3])
        again, _ = conn.infer(DIGITS[3:4])  # a second query in the same session
    np.testing.assert_array_equal(got, want)
    assert again.shape == (1, 10)
    assert rep["online_bytes"] > 0 and rep["offline_bytes"] > 0 and rep["setup_bytes"] > 0
    assert handle.service.sessions == 1 and handle.service.errors == 0


def test_square_networks_are_served_with_the_in_process_results() -> None:
    """Network A (squares: truncation circuit, then the AHE square with two input lists)."""
    prog = heinfer.compile(MODELS / "mnist_a.onnx", mode="latency", protocol="two-party", calibration=DIGITS[100:164])
    want, _ = run_in_process(prog, DIGITS[:2])
    with serve_two_party(prog) as handle, connect_two_party(handle.address, prog.public()) as conn:
        got, _ = conn.infer(DIGITS[:2])
    np.testing.assert_array_equal(got, want)
    assert handle.service.errors == 0


def test_steps_with_kept_values_are_served_with_the_in_process_results() -> None:
    """A residual network with clips (ReLU6-style) whose skip passes through its first step:
    two circuits per step, their messages joined, within the service's limits."""
    from protocol.residual_models import residual_model

    x = np.random.default_rng(1).normal(0, 1, (64, 16))
    prog = heinfer.compile(residual_model("clip"), mode="latency", protocol="two-party", calibration=x)
    assert sum(prog.steps[0].keep) > 0
    want, _ = run_in_process(prog, x[:2])
    with serve_two_party(prog) as handle, connect_two_party(handle.address, prog.public()) as conn:
        got, _ = conn.infer(x[:2])
    np.testing.assert_array_equal(got, want)
    assert handle.service.errors == 0


def test_throughput_queries_are_cut_to_fit_a_message(monkeypatch) -> None:
    """Network A in throughput mode (squares on the batch axis) over gRPC: with the largest
    message lowered so one query's garbled circuits fit only two items, five items travel as
    three queries and give the in-process results."""
    import heinfer.serve.two_party as service
    from heinfer.serve.two_party_limits import SLACK, _garbled_bytes, items_per_query

    prog = heinfer.compile(MODELS / "mnist_a.onnx", mode="throughput", protocol="two-party", calibration=DIGITS[100:164], batch_size=8)
    per_two = sum(_garbled_bytes(prog, 2)) + SLACK  # the most bytes of two items' circuits
    monkeypatch.setattr(service, "MAX_MESSAGE_BYTES", per_two)
    assert items_per_query(prog, per_two) == 2
    want, _ = run_in_process(prog, DIGITS[:5])
    with serve_two_party(prog) as handle, connect_two_party(handle.address, prog.public()) as conn:
        got, rep = conn.infer(DIGITS[:5])
    np.testing.assert_array_equal(got, want)
    assert handle.service.errors == 0 and rep["offline_bytes"] > 0 and rep["queries"] == 3


def test_a_memory_budget_streams_the_layers_with_the_same_results(prog) -> None:
    want, _ = run_in_process(prog, DIGITS[:1])
    with serve_two_party(prog, max_memory=0) as handle, connect_two_party(handle.address, prog.public()) as conn:
        assert all(layer.lazy for layer in handle.service.layers)
        got, _ = conn.infer(DIGITS[:1])
    np.testing.assert_array_equal(got, want)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="max_memory"):
            serve_two_party(prog, max_memory=bad)


def test_frames_round_trip_and_bad_frames_are_refused() -> None:
    blobs = [b"", b"x" * (PART_BYTES + 5), b"abc"]
    assert Reassembler(frames(Kind.LAYER, 2, blobs)).next() == (Kind.LAYER, 2, blobs)
    fs = list(frames(Kind.LAYER, 2, blobs))
    with pytest.raises(ProtocolError, match="out of order"):
        Reassembler([fs[0], fs[2]]).next()
    with pytest.raises(ProtocolError, match="ended in the middle"):
        Reassembler(fs[:2]).next()
    with pytest.raises(ProtocolError, match="limit"):
        Reassembler(frames(Kind.LAYER, 0, [b"y" * 100]), max_bytes=10).next()
    grown = [fs[1], pb.TwoPartyFrame(kind=Kind.LAYER, step=2, count=3, blob=1, size=10**6 * 9, offset=PART_BYTES, data=b"z")]
    with pytest.raises(ProtocolError, match="changed its declared size"):
        Reassembler([fs[0], *grown]).next()
    with pytest.raises(ProtocolError, match="unknown"):
        Reassembler([pb.TwoPartyFrame(kind=99, count=1, size=0)]).next()


def test_misuse_is_refused_with_a_status(prog) -> None:
    with serve_two_party(prog) as handle:
        channel = grpc.insecure_channel(handle.address)
        call = channel.stream_stream("/heinfer.v1.TwoParty/Run", request_serializer=pb.TwoPartyFrame.SerializeToString,
                                     response_deserializer=pb.TwoPartyFrame.FromString)
        with pytest.raises(grpc.RpcError) as e:
            list(call(iter(list(frames(Kind.LAYER, 0, [b"junk"])))))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "keys first" in e.value.details()
        # more ciphertexts than the layer takes: refused at the first frame (the program's limits)
        n = prog.segments[0].n_input_cts
        with pytest.raises(grpc.RpcError) as e:
            list(call(iter(list(frames(Kind.LAYER, 0, [b"junk"] * (n + 1))))))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and f"at most {n} blobs" in e.value.details()
        channel.close()
        assert handle.service.errors == 2
    with pytest.raises(ServiceError):
        connect_two_party("127.0.0.1:1", prog.public(), timeout_s=5)
    # the client-aided service's entry points name the two-party ones
    from heinfer.serve import connect, serve

    with pytest.raises(TypeError, match="a two-party program is served by heinfer.serve.two_party.serve_two_party"):
        serve(prog)
    with pytest.raises(TypeError, match="client is heinfer.serve.two_party.connect_two_party"):
        connect("127.0.0.1:1", prog.public())


def test_token_and_tls(prog, pki) -> None:
    from heinfer.serve.tls import TlsConfig

    server_tls = TlsConfig(cert_chain=pki.server_cert, private_key=pki.server_key)
    with serve_two_party(prog, tls=server_tls, token="s3cret") as handle:
        with pytest.raises(ServiceError) as e:
            connect_two_party(handle.address, prog.public(), tls=TlsConfig(root_cert=pki.ca), token="wrong")
        assert e.value.code == "UNAUTHENTICATED"
        with connect_two_party(handle.address, prog.public(), tls=TlsConfig(root_cert=pki.ca), token="s3cret") as conn:
            out, _ = conn.infer(DIGITS[:1])
        assert out.shape == (1, 10)
        with pytest.raises(ServiceError):  # plaintext against a TLS port
            connect_two_party(handle.address, prog.public(), token="s3cret", timeout_s=5)
    with pytest.raises(ValueError, match="without TLS"):
        serve_two_party(prog, "0.0.0.0:0")


def test_sessions_are_capped_and_idle_ones_closed(prog) -> None:
    """``max_sessions`` open calls at most (one more is refused with RESOURCE_EXHAUSTED and its
    place comes back when a session ends); a call that sends nothing for ``idle_timeout_s``
    is closed with DEADLINE_EXCEEDED, so idle clients cannot hold the server's threads."""
    from heinfer.serve.limits import Limits

    limits = Limits(max_sessions=1, idle_timeout_s=1.0)
    with serve_two_party(prog, limits=limits) as handle:
        with connect_two_party(handle.address, prog.public()) as conn:
            with pytest.raises(ServiceError) as e:
                connect_two_party(handle.address, prog.public(), timeout_s=30)
            assert e.value.code == "RESOURCE_EXHAUSTED" and "max_sessions" in str(e.value)
            got, _ = conn.infer(DIGITS[:1])
            assert got.shape == (1, 10)
        deadline = time.monotonic() + 10
        while handle.service.open_sessions and time.monotonic() < deadline:
            time.sleep(0.05)
        assert handle.service.open_sessions == 0
        # a client that opens a call and goes silent
        channel = grpc.insecure_channel(handle.address)
        call = channel.stream_stream("/heinfer.v1.TwoParty/Run", request_serializer=pb.TwoPartyFrame.SerializeToString,
                                     response_deserializer=pb.TwoPartyFrame.FromString)
        silent = threading.Event()
        t0 = time.monotonic()
        with pytest.raises(grpc.RpcError) as e:
            list(call(iter(silent.wait, True), timeout=30))  # blocks without sending a frame
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and "idle_timeout_s" in e.value.details()
        assert time.monotonic() - t0 < 10
        silent.set()
        channel.close()
        with connect_two_party(handle.address, prog.public()) as conn:  # the place came back
            assert conn.infer(DIGITS[:1])[0].shape == (1, 10)


def test_queries_per_session_are_capped(prog) -> None:
    """``max_queries_per_session``: the call's third query is refused with RESOURCE_EXHAUSTED
    naming the cap; a new call (new keys) is answered."""
    from heinfer.serve.limits import Limits

    with serve_two_party(prog, limits=Limits(max_queries_per_session=2)) as handle:
        with connect_two_party(handle.address, prog.public()) as conn:
            conn.infer(DIGITS[:1])
            conn.infer(DIGITS[1:2])
            with pytest.raises(ServiceError) as e:
                conn.infer(DIGITS[2:3])
            assert e.value.code == "RESOURCE_EXHAUSTED" and "max_queries_per_session" in str(e.value)
        with connect_two_party(handle.address, prog.public()) as conn:
            assert conn.infer(DIGITS[:1])[0].shape == (1, 10)


def test_a_client_that_vanishes_mid_query_frees_its_session(prog) -> None:
    """A client that takes the garbled circuits of a query and the first layer's results, then
    closes its connection: the server ends the session (its place, its circuits and masks
    go), answers nothing wrong to anyone, and serves the next client exactly."""
    from heinfer.serve.limits import Limits

    want, _ = run_in_process(prog, DIGITS[:1])
    with serve_two_party(prog, limits=Limits(max_sessions=1)) as handle:
        conn = connect_two_party(handle.address, prog.public())
        c = conn._call
        c.send(Kind.OFFLINE, 0, conn.client.offline_request(1))
        conn.client.offline_finish(c.recv(Kind.GARBLED, 0))
        c.send(Kind.LAYER, 0, conn.client.query(DIGITS[:1]))
        assert c.recv(Kind.RESULT, 0)  # mid-query: the server holds this query's state
        assert handle.service.open_sessions == 1
        conn.close()  # gone without a word
        deadline = time.monotonic() + 10
        while handle.service.open_sessions and time.monotonic() < deadline:
            time.sleep(0.05)
        assert handle.service.open_sessions == 0
        with connect_two_party(handle.address, prog.public()) as fresh:  # max_sessions=1: the place came back
            got, _ = fresh.infer(DIGITS[:1])
        np.testing.assert_array_equal(got, want)


def test_a_client_that_stops_reading_is_cancelled_and_its_place_freed() -> None:
    """A client that asks for a query's garbled circuits (tens of MB: more than gRPC buffers)
    and never reads them held the server's thread and its session place for ever (the idle
    timeout only watches what the client sends); now the send is cancelled past
    ``query_timeout_s`` and the next client is served."""
    import queue

    from heinfer.protocol.two_party import TwoPartyInferenceClient
    from heinfer.serve.limits import Limits
    from heinfer.serve.two_party import _options

    prog = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="throughput", protocol="two-party", calibration=DIGITS[100:164], batch_size=16)
    with serve_two_party(prog, limits=Limits(max_sessions=1, query_timeout_s=2.0)) as handle:
        client = TwoPartyInferenceClient(prog.public())
        keys = client.keys_message()
        q: queue.Queue = queue.Queue()
        for f in frames(Kind.KEYS, 0, [keys["pk"], keys["galois"], keys["ot"]]):
            q.put(f)
        channel = grpc.insecure_channel(handle.address, options=_options())
        call = channel.stream_stream("/heinfer.v1.TwoParty/Run", request_serializer=pb.TwoPartyFrame.SerializeToString,
                                     response_deserializer=pb.TwoPartyFrame.FromString)
        responses = call(iter(q.get, None))
        client.finish_setup(next(responses).data)
        for f in frames(Kind.OFFLINE, 0, client.offline_request(16)):
            q.put(f)  # then never read, never send
        deadline = time.monotonic() + 30
        time.sleep(1.0)
        while handle.service.open_sessions and time.monotonic() < deadline:
            time.sleep(0.1)
        assert handle.service.open_sessions == 0
        with connect_two_party(handle.address, prog.public(), timeout_s=30) as conn:
            assert conn.infer(DIGITS[:1])[0].shape == (1, 10)
        q.put(None)
        responses.cancel()
        channel.close()


def test_the_client_timeout_bounds_each_wait_not_the_session(prog) -> None:
    """``timeout_s`` was the deadline of the whole call, so a session longer than it failed
    mid-query (``heinfer predict --timeout 600`` on a few hundred images lost every result)."""
    with serve_two_party(prog) as handle, connect_two_party(handle.address, prog.public(), timeout_s=3.0) as conn:
        for i in range(3):
            assert conn.infer(DIGITS[i : i + 1])[0].shape == (1, 10)
            time.sleep(1.5)  # 4.5 s of session in all
        assert conn.infer(DIGITS[3:4])[0].shape == (1, 10)


def test_an_empty_input_and_the_wrong_kind_of_service_are_named(prog) -> None:
    """No items: ProtocolError (was numpy's "need at least one array to concatenate"); a
    client of one protocol at the other's service: which service it is (was gRPC's "Method not
    found!")."""
    from heinfer import serve as hs

    with serve_two_party(prog) as handle:
        with connect_two_party(handle.address, prog.public()) as conn:
            with pytest.raises(ProtocolError, match="no items"):
                conn.infer(DIGITS[:0])
        with pytest.raises(ProtocolError, match="no items"):
            run_in_process(prog, DIGITS[:0])
        ckks = heinfer.compile(MODELS / "cryptonets_relu.onnx", calibration=DIGITS[100:164])
        with pytest.raises(ServiceError, match="does not serve client-aided programs.*two-party service") as e:
            hs.connect(handle.address, ckks.public(), timeout_s=30)
        assert e.value.code == "UNIMPLEMENTED"
    with hs.serve(ckks, "127.0.0.1:0") as other:
        with pytest.raises(ServiceError, match="does not serve two-party programs.*client-aided service"):
            connect_two_party(f"127.0.0.1:{other.port}", prog.public(), timeout_s=30)
