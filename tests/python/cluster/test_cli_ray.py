"""``heinfer serve --ray``: the command line starts a local Ray on 127.0.0.1 in the server's
process, serves through it, and stops it on SIGTERM (``heinfer.cli`` with ``heinfer.cluster``)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import heinfer
import numpy as np
import pytest
from heinfer.cli.process import ServerProcess, run_cli

pytest.importorskip("ray")


def _serve_with_ray_and_predict(tmp_path: Path, prog, x: np.ndarray, workers: int):
    """``heinfer serve PROG.hep --ray`` in a child process, ``heinfer predict`` on ``x``
    against it, then SIGTERM (a clean exit); returns predict's process result."""
    (tmp_path / "net.hep").write_bytes(prog.to_bytes())
    (tmp_path / "net.public.hep").write_bytes(prog.public().to_bytes())
    np.save(tmp_path / "x.npy", x)
    with ServerProcess(str(tmp_path / "net.hep"), "--ray", "--ray-workers", str(workers), "--json", startup_timeout=120) as server:
        ok = run_cli(
            "predict", "--server", server.address, "--model", str(tmp_path / "net.public.hep"),
            str(tmp_path / "x.npy"), "-o", str(tmp_path / "out.npy"), "--timeout", "120", "--json", timeout=180,
        )
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
    return ok


def test_serve_with_ray_and_predict(tmp_path: Path, relu_net, digits):
    x = digits[0][:10]
    ok = _serve_with_ray_and_predict(tmp_path, relu_net, x, 2)
    report = json.loads(ok.stdout.strip().splitlines()[-1])
    assert report["items"] == 10
    out = np.load(tmp_path / "out.npy")
    assert (out.argmax(1) == heinfer.infer(relu_net, x).outputs.argmax(1)).all()


def test_serve_a_two_party_program_with_ray_and_predict(tmp_path: Path, digits):
    """A two-party program on Ray (whole sessions per actor) through the command line."""
    prog = heinfer.compile(Path(__file__).resolve().parents[3] / "models" / "cryptonets_relu.onnx", mode="latency",
                           protocol="two-party", calibration=digits[0][:64])
    x = digits[0][:2]
    ok = _serve_with_ray_and_predict(tmp_path, prog, x, 1)
    assert ok.returncode == 0, ok.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), heinfer.infer(prog, x).outputs)
