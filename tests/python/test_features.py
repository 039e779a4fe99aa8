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
    assert public.meta["features_sha256"] == heinfer.features.FeatureExtractor(EXTRACTOR).sha256
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
    env = {k: v for k, v in os.environ.items() if k != "HEINFER_TOKEN"}
    with ServerProcess(str(out), "--threads", "1", env=env) as server:
        common = ["predict", str(tmp_path / "few.npy"), "--server", server.address, "--model", public, "-o", str(tmp_path / "out.npy")]
        missing = run_cli(*common, check=False, env=env, timeout=120)
        assert missing.returncode != 0 and "--features" in missing.stderr
        ok = run_cli(*common, "--features", str(EXTRACTOR), "--json", env=env, timeout=120)
    report = json.loads(ok.stdout.strip().splitlines()[-1])
    assert report["items"] == 6
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy").argmax(1), _plain(x[:6]).argmax(1))
