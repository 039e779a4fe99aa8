"""The CIFAR-shaped generated networks (models/cifar.py): deterministic, and the front end's
DAG and its lowered chain compute what onnxruntime computes (BN folded, residuals, projections).
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
