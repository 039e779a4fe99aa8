"""Classifiers on deep features (LoLa §5): the public extractor runs on the client in the clear,
the private classifier on encrypted features — through the API and the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer.cli.process import ServerProcess, run_cli
from heinfer.errors import CompileError, ProtocolError
from heinfer.features import FeatureExtractor
from heinfer.program.model import PUBLIC_META

MODELS = Path(__file__).resolve().parents[2] / "models"
EXTRACTOR = MODELS / "features_extractor.onnx"
CLASSIFIER = MODELS / "features_classifier.onnx"


@pytest.fixture(scope="module")
def data():
    d = np.load(MODELS / "digits_test.npz")
    hi = d["y"] >= 5  # the classifier's digits (5–9)
    return d["x"][hi], d["y"][hi] - 5


@pytest.fixture(scope="module")
def prog(data):
    return heinfer.compile(CLASSIFIER, mode="latency", features=EXTRACTOR, calibration=data[0][:64], measure_costs=False)


def _plain(x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    f = ort.InferenceSession(str(EXTRACTOR)).run(None, {"input": x.astype(np.float32)})[0]
    return ort.InferenceSession(str(CLASSIFIER)).run(None, {"input": f})[0]


def test_encrypted_classifier_on_features_matches_plaintext(prog, data) -> None:
    x, y = data
    r = heinfer.infer(prog, x[:8], features=EXTRACTOR)
    want = _plain(x[:8])
    np.testing.assert_array_equal(r.outputs.argmax(1), want.argmax(1))
    assert np.abs(r.outputs - want).max() / np.abs(want).max() <= 1e-3
    assert (r.outputs.argmax(1) == y[:8]).mean() >= 0.75
    assert r.report["features_s"] > 0 and not prog.steps  # a linear classifier: no client step


def test_the_client_holds_the_extractor_only(prog) -> None:
    public = prog.public()
    assert public.meta["features_sha256"] == FeatureExtractor(EXTRACTOR).sha256
    assert not hasattr(public, "layers") or getattr(public, "layers", None) is None
    assert heinfer.load_program(public.to_bytes()).meta["features_sha256"] == public.meta["features_sha256"]


def test_wrong_or_missing_extractor_is_refused(prog, data) -> None:
    x = data[0][:1]
    with pytest.raises(ProtocolError, match="pass features"):
        heinfer.infer(prog, x)
    with pytest.raises(ProtocolError, match="compiled for the feature extractor"):
        heinfer.infer(prog, x, features=MODELS / "cryptonets_relu.onnx")
    plain = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", calibration=x, measure_costs=False)
    with pytest.raises(ProtocolError, match="not features"):
        heinfer.infer(plain, x, features=EXTRACTOR)
    with pytest.raises(CompileError, match="yields 10"):
        heinfer.compile(CLASSIFIER, mode="latency", features=MODELS / "cryptonets_relu.onnx", calibration=data[0][:8], measure_costs=False)
    import onnx  # every form of the classifier is checked against the features (ModelProto here)

    with pytest.raises(CompileError, match=r"takes \(64,\) values, the feature extractor yields 10"):
        heinfer.compile(onnx.load(str(CLASSIFIER)), mode="latency", features=MODELS / "cryptonets_relu.onnx",
                        calibration=data[0][:8], measure_costs=False)
    with pytest.raises(CompileError, match="cannot load the feature extractor"):
        heinfer.compile(CLASSIFIER, mode="latency", features=b"not onnx", calibration=data[0][:8])
    with pytest.raises(CompileError, match="calibration"):
        heinfer.compile(CLASSIFIER, mode="latency", features=EXTRACTOR, input_bound=1.0)


def test_command_line_compiles_serves_and_predicts(tmp_path, data) -> None:
    x = data[0]
    np.save(tmp_path / "cal.npy", x[:64])
    np.save(tmp_path / "few.npy", x[:6])
    out = tmp_path / "clf.hep"
    run_cli("compile", str(CLASSIFIER), "-o", str(out), "--mode", "latency", "--features", str(EXTRACTOR),
            "--calibration", str(tmp_path / "cal.npy"), timeout=300)
    public = str(tmp_path / "clf.public.hep")
    inspected = json.loads(run_cli("inspect", public, "--json", timeout=120).stdout)
    assert inspected["features_sha256"] == FeatureExtractor(EXTRACTOR).sha256  # which extractor
    env = {k: v for k, v in os.environ.items() if k != "HEINFER_TOKEN"}
    with ServerProcess(str(out), "--threads", "1", env=env) as server:
        common = ["predict", str(tmp_path / "few.npy"), "--server", server.address, "--model", public, "-o", str(tmp_path / "out.npy")]
        missing = run_cli(*common, check=False, env=env, timeout=120)
        assert missing.returncode != 0 and "--features" in missing.stderr
        ok = run_cli(*common, "--features", str(EXTRACTOR), "--json", env=env, timeout=120)
    report = json.loads(ok.stdout.strip().splitlines()[-1])
    assert report["items"] == 6
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy").argmax(1), _plain(x[:6]).argmax(1))


def _body(program: heinfer.PublicProgram) -> bytes:
    """A program's canonical body, uncompressed (after the 19-byte header of the format)."""
    import zlib

    return zlib.decompress(program.to_bytes()[19:])


def _classifier_values(prog: heinfer.Program) -> np.ndarray:
    """Every non-negligible weight and bias the server holds: the program's linear layers (as
    the compiler stored them) and the classifier's ONNX initializers (as trained)."""
    import onnx
    from onnx import numpy_helper

    from heinfer.program.transform import Transform

    inits = onnx.load(str(CLASSIFIER)).graph.initializer
    vals = [numpy_helper.to_array(t).astype(np.float64).ravel() for t in inits]
    for lay in prog.layers:
        if isinstance(lay, Transform):
            vals += [lay.vectors.ravel(), lay.bias.ravel() if lay.bias is not None else np.zeros(0)]
        else:
            bias = lay.bias if lay.bias is not None else np.zeros(0)
            vals += [np.asarray(lay.matrix.data).ravel(), bias]
    v = np.concatenate(vals)
    return np.unique(v[np.abs(v) > 1e-6])


def test_public_bytes_hold_no_classifier_weight(prog) -> None:
    """An attack test: the client's artifact is searched for every weight of the private
    classifier (float64 and float32 bytes, decimal text); only the extractor's hash is there."""
    public = prog.public()
    assert type(public) is heinfer.PublicProgram and not hasattr(public, "layers")
    raw = _body(public)
    secrets = _classifier_values(prog)
    assert len(secrets) > 300  # 64×5 weights and 5 biases, at least
    for v in secrets:
        assert np.float64(v).tobytes() not in raw
        assert np.float32(v).tobytes() not in raw
        assert repr(float(v)).encode() not in raw
    assert public.meta == {k: v for k, v in prog.meta.items() if k in PUBLIC_META}
    # positive control: the same search finds the weights in the server's program
    full = _body(prog)
    assert sum(np.float64(v).tobytes() in full for v in secrets) > len(secrets) // 2


def test_the_extractor_stays_with_the_client(prog) -> None:
    """Neither program carries the extractor: its weights are in no program's bytes (the
    server never needs it, the client brings it), only its SHA-256."""
    import onnx
    from onnx import numpy_helper

    weights = [numpy_helper.to_array(t) for t in onnx.load(str(EXTRACTOR)).graph.initializer]
    conv1 = weights[0].astype(np.float32).ravel()
    full, public = _body(prog), _body(prog.public())
    for raw in (full, public):
        for w in (conv1[:8], conv1[-8:]):
            assert w.tobytes() not in raw and w.astype(np.float64).tobytes() not in raw
    assert FeatureExtractor(EXTRACTOR).sha256.encode() in public


def test_missing_onnxruntime_is_a_heinfer_error(monkeypatch) -> None:
    """Without onnxruntime (not a core dependency) the extractor cannot run: a CompileError
    naming the extra to install, not a bare ImportError."""
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails
    with pytest.raises(CompileError, match=r"heinfer\[features\]"):
        FeatureExtractor(EXTRACTOR)


def test_client_and_server_apart(prog, data) -> None:
    """The README's two-party form: the client runs heinfer.FeatureExtractor itself and sends
    the features through Client.query_message; the server gets only the full program."""
    ext = heinfer.FeatureExtractor(EXTRACTOR)
    client, server = heinfer.Client(prog.public()), heinfer.Server(prog)
    ext.check_program(client.program.meta)
    session = server.open_session(client.keys_message())
    x = data[0][:3]
    got = np.concatenate([client.decode_result(server.begin(client.query_message(session, ext(x[i : i + 1])))) for i in range(3)])
    np.testing.assert_array_equal(got.argmax(1), _plain(x).argmax(1))
