"""The service end to end over loopback: CryptoNets-ReLU answers as in-process inference,
several clients with their own keys at once, tokens, TLS required off loopback, and starting
and stopping."""

from __future__ import annotations

import re
import socket
import threading

import heinfer
import numpy as np
import pytest
from heinfer.errors import ServiceError
from heinfer.protocol import Client
from heinfer.serve import Limits, connect, serve
from heinfer.serve.service import is_loopback

from .conftest import assert_idle, mlp_input, tolerance


def _close(a: np.ndarray, b: np.ndarray, program) -> None:
    """Two independent encrypted runs agree within twice the predicted error."""
    assert np.array_equal(a.argmax(1), b.argmax(1))
    np.testing.assert_allclose(a, b, atol=tolerance(program))


def test_cryptonets_over_grpc_matches_in_process_inference(
    cryptonets, digits, cryptonets_reference, start
) -> None:
    x, y = digits
    h = start(cryptonets, limits=Limits())  # production defaults: 1 MiB parts
    with connect(h.address, cryptonets.public()) as s:
        assert h.stats()["sessions"] == 1
        got = s.infer(x)
    want = cryptonets_reference
    _close(got.outputs, want.outputs, cryptonets)
    assert np.mean(got.outputs.argmax(1) == y) > 0.95
    r = got.report
    assert (
        set(want.report) - {"setup_s"} <= set(r) and r["transport"] == "grpc"
    )  # setup: the server's
    assert (r["items"], r["queries"], r["rounds"]) == (len(x), 1, 2)
    for k in ("items", "queries", "rounds"):
        assert r[k] == want.report[k], k  # the same quantities as in-process inference
    for k in ("bytes_up", "bytes_down"):  # the same ciphertexts, in chunks of one part each
        assert want.report[k] <= r[k] <= want.report[k] * 1.005, k
    assert r["total_s"] >= r["queries_s"] + r["keygen_s"]
    assert r["wire_bytes_up"] > r["bytes_up"] and r["server_s"] > 0
    stats = h.stats()
    assert (stats["sessions"], stats["queries_done"], stats["errors"]) == (0, 1, 0)
    assert stats["bytes_in"] >= r["wire_bytes_up"] and stats["bytes_out"] == r["wire_bytes_down"]
    assert_idle(h)


def test_two_clients_at_once_each_with_its_own_keys(
    cryptonets, digits, cryptonets_reference, start
) -> None:
    x, _ = digits
    h = start(cryptonets)
    parts = [x[:40], x[40:100]]
    results: dict[int, np.ndarray] = {}
    sessions: dict[int, str] = {}
    both_open = threading.Barrier(2, timeout=30)

    def run(i: int) -> None:
        with connect(h.address, cryptonets.public()) as s:
            sessions[i] = s.session_id
            both_open.wait()
            results[i] = s.infer(parts[i]).outputs

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == [0, 1] and sessions[0] != sessions[1]
    want = cryptonets_reference.outputs[:100]
    _close(np.concatenate([results[0], results[1]]), want, cryptonets)
    stats = h.stats()
    assert (stats["sessions_opened"], stats["queries_done"], stats["errors"]) == (2, 2, 0)
    assert_idle(h)


def test_keys_of_a_program_with_relinearization_upload_in_parts(squares, start) -> None:
    h = start(squares)  # 16 KiB parts: the 1.3 MB key travels in ~80 parts
    seen = []
    with connect(
        h.address, squares.public(), limits=h.limits, progress=lambda *a: seen.append(a)
    ) as s:
        assert s.keys_bytes > 1 << 20
        got = s.infer(mlp_input(6))
    uploads = [a for a in seen if a[0] == "upload"]
    assert len(uploads) > 60 and uploads[-1][1] == uploads[-1][2]
    _close(got.outputs, heinfer.infer(squares, mlp_input(6)).outputs, squares)


def test_a_token_is_required_when_configured(mlp, start, raw) -> None:
    h = start(mlp, token="open sesame")
    for token, text in [(None, "requires a token"), ("wrong", "invalid token")]:
        with pytest.raises(ServiceError, match=text) as e:
            connect(h.address, mlp.public(), token=token)
        assert e.value.code == "UNAUTHENTICATED"
    r = raw(h, token="nope")
    for call in (lambda: r.info(), lambda: r.close_session("ab", "00"), lambda: r.open_session([])):
        with pytest.raises(Exception) as e:
            call()
        assert e.value.code().name == "UNAUTHENTICATED"
    with pytest.raises(Exception) as e:
        list(r.infer([]))
    assert e.value.code().name == "UNAUTHENTICATED"
    with connect(h.address, mlp.public(), token="open sesame") as s:
        _close(s.infer(mlp_input()).outputs, heinfer.infer(mlp, mlp_input()).outputs, mlp)
    assert h.stats()["errors"] == 6


def test_the_server_holds_no_secret_key(mlp, start) -> None:
    h = start(mlp)
    with connect(h.address, mlp.public()):
        server = h._servicer.server
        assert not isinstance(server, Client)
        assert not any("secret" in name for name in dir(server) + dir(h._servicer))


def test_serve_refuses_bad_arguments_and_busy_ports(mlp) -> None:
    with pytest.raises(TypeError, match="a PublicProgram is what clients get"):
        serve(mlp.public())
    with pytest.raises(ValueError, match="host:port"):
        serve(mlp, "nonsense")
    with pytest.raises(ValueError, match="token"):
        serve(mlp, token="")
    with pytest.raises(ValueError, match="max_workers"):
        serve(mlp, max_workers=0)
    with pytest.raises(ValueError, match="max_memory"):
        serve(mlp, max_memory=-1)
    with pytest.raises(ValueError, match="local backend"):
        serve(mlp, max_memory=1 << 30, backend="ray")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ServiceError, match="cannot listen") as e:
            serve(mlp, f"127.0.0.1:{busy.getsockname()[1]}")
        assert e.value.code == "UNAVAILABLE"


def test_stop_is_idempotent_and_ends_the_threads(mlp) -> None:
    before = {t.name for t in threading.enumerate()}
    with serve(mlp) as h:
        assert h.port > 0 and h.address == f"127.0.0.1:{h.port}"
        with connect(h.address, mlp.public()) as s:
            s.infer(mlp_input())
    h.stop()
    assert h.wait_for_termination(1.0)
    left = {t.name for t in threading.enumerate()} - before
    assert not [n for n in left if n.startswith("heinfer")], left


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "[::]", "example.com"])
def test_no_plaintext_listening_off_loopback(mlp, host) -> None:
    """Refused before any socket is opened: nothing listens on these addresses."""
    with pytest.raises(ValueError, match=f"refusing to listen on {re.escape(host)} without TLS"):
        serve(mlp, f"{host}:0")
    with pytest.raises(ValueError, match="insecure=True"):
        serve(mlp, f"{host}:0", token="t")


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.8.9.10", True), ("localhost", True), ("[::1]", True), ("::1", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.1", False), ("example.com", False),
])  # fmt: skip
def test_what_counts_as_loopback(host, loopback) -> None:
    assert is_loopback(host) is loopback
