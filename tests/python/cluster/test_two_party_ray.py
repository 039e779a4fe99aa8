"""GAZELLE's two-party service on Ray actors (``heinfer.serve.two_party_ray``), on a local
two-worker Ray bound to 127.0.0.1: whole sessions per actor, spread over the actors, the
in-process results exactly; a session whose actor is killed fails with an error that says
so (never a wrong answer), and new sessions are served by its replacement."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import heinfer
import numpy as np
import pytest
from heinfer.errors import ProtocolError
from heinfer.protocol.two_party import TwoPartyInferenceClient, run_in_process
from heinfer.serve.two_party_ray import TwoPartySessions

MODELS = Path(__file__).resolve().parents[3] / "models"
DIGITS = np.load(MODELS / "digits_test.npz")["x"]


@pytest.fixture(scope="module")
def prog():
    return heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=DIGITS[100:164])


def test_a_worker_hosts_whole_sessions_and_refuses_unknown_ones(prog) -> None:
    """The actor's body without Ray: a session opened on it runs a query as in process."""
    worker = TwoPartySessions(prog.to_bytes())
    client = TwoPartyInferenceClient(prog.public())
    client.finish_setup(worker.open("a", client.keys_message()))
    assert worker.count() == 1
    with pytest.raises(ProtocolError, match="already open"):
        worker.open("a", client.keys_message())
    client.offline_finish(worker.offline("a", client.offline_request()))
    msgs = worker.layer("a", 0, client.query(DIGITS[0]))
    with pytest.raises(ProtocolError, match="no session b"):
        worker.layer("b", 0, msgs)
    worker.close("a")
    worker.close("a")
    assert worker.count() == 0
    with pytest.raises(TypeError, match="weights"):
        TwoPartySessions(prog.public().to_bytes())


def _wait_for(f, want, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while (got := f()) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_sessions_spread_over_the_actors_with_the_in_process_results(cluster, prog) -> None:
    from heinfer.serve.two_party import connect_two_party, serve_two_party

    want, _ = run_in_process(prog, DIGITS[:3])
    with serve_two_party(prog, backend="ray", ray_workers=2) as handle:
        pool = handle.service.backend
        with connect_two_party(handle.address, prog.public()) as a, connect_two_party(handle.address, prog.public()) as b:
            assert pool.sessions_on_workers() == [1, 1]  # the second session went to the idle actor
            got_a, _ = a.infer(DIGITS[:2])
            got_b, _ = b.infer(DIGITS[2:3])
            again, _ = a.infer(DIGITS[2:3])  # a second query of the same session, on the same actor
        np.testing.assert_array_equal(np.concatenate([got_a, got_b]), want)
        np.testing.assert_array_equal(again, want[2:3])
        assert _wait_for(pool.sessions_on_workers, [0, 0]) == [0, 0]  # closed with their calls
        assert handle.service.errors == 0
    with pytest.raises(heinfer.ClusterError, match="closed"):
        pool.open({})
    with pytest.raises(ValueError, match="backend"):
        serve_two_party(prog, backend="spark")


def test_a_session_whose_actor_dies_fails_clearly_and_new_ones_are_served(cluster, prog) -> None:
    from heinfer.serve.two_party import connect_two_party, serve_two_party

    want, _ = run_in_process(prog, DIGITS[:1])
    with serve_two_party(prog, backend="ray", ray_workers=1) as handle:
        pool = handle.service.backend
        conn = connect_two_party(handle.address, prog.public(), timeout_s=120)
        np.testing.assert_array_equal(conn.infer(DIGITS[:1])[0], want)
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        with pytest.raises(heinfer.ServiceError, match="session is lost") as err:
            conn.infer(DIGITS[:1])
        assert err.value.code == "UNAVAILABLE"
        conn.close()
        with connect_two_party(handle.address, prog.public(), timeout_s=120) as fresh:
            np.testing.assert_array_equal(fresh.infer(DIGITS[:1])[0], want)
        assert handle.service.errors == 1
