"""The generated networks (models/cifar.py, models/mobilenet.py): deterministic, and the front
end's DAG and its lowered chain compute what onnxruntime computes (BN folded, residuals,
projections, depthwise convolutions, ReLU6).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from heinfer.compiler import load_onnx, load_onnx_dag

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
import cifar  # noqa: E402
import mobilenet  # noqa: E402


@pytest.fixture(scope="module", params=cifar.NAMES)
def network(request):
    return request.param, cifar.build(request.param)


def test_generation_is_deterministic(network) -> None:
    name, model = network
    assert cifar.build(name) == model


def test_dag_and_chain_match_onnxruntime(network) -> None:
    name, model = network
    x = cifar.random_inputs(4, seed=7)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert want.shape == (4, 10) and np.isfinite(want).all()
    scale = np.abs(want).max()
    dag = load_onnx_dag(model)
    np.testing.assert_allclose(dag.run(x).reshape(4, 10), want, atol=1e-4 * scale)
    np.testing.assert_allclose(load_onnx(model).run(x).reshape(4, 10), want, atol=1e-4 * scale)


def test_batch_norm_statistics_give_realistic_ranges() -> None:
    """With calibrated BN, ResNet-20's logits stay O(1) on random inputs (no blow-up)."""
    x = cifar.random_inputs(8, seed=2)
    out = ort.InferenceSession(cifar.build("resnet20"), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert 1e-2 < np.abs(out).max() < 1e2


def test_mobilenetv2_matches_onnxruntime_and_torchvision_shape() -> None:
    model = mobilenet.build(0.35, 96)
    assert mobilenet.build(0.35, 96) == model
    import onnx

    m = onnx.load_from_string(model)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Add") == 10  # torchvision's residual connections
    assert sum(1 for n in m.graph.node if n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)) == 17
    params = sum(int(np.prod(t.dims)) for t in m.graph.initializer if not t.name.startswith("relu6"))
    assert 1_600_000 < params < 1_800_000  # width 0.35 with 1,000 classes
    x = mobilenet.random_inputs(2, seed=4)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert want.shape == (2, 1000) and 1e-2 < np.abs(want).max() < 1e2
    got = load_onnx(model).run(x).reshape(2, -1)
    np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())
