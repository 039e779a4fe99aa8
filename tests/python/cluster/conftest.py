"""Fixtures of the cluster tests: CryptoNets-ReLU (throughput mode, no evaluation keys), a
tiny network that needs a relinearization key, a latency-mode network whose first layer
splits by output ciphertexts, and the inputs of each segment as the
in-process server sees them (so that Ray's outputs can be compared byte for byte)."""

from __future__ import annotations

from pathlib import Path

import heinfer
import pytest
from heinfer import _native
from heinfer.program import Program

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def relu_net(digits) -> Program:
    """CryptoNets-ReLU compiled in throughput mode."""
    return heinfer.compile(str(ROOT / "models" / "cryptonets_relu.onnx"), mode="throughput", calibration=digits[0][:64])


@pytest.fixture(scope="session")
def latency_net() -> Program:
    """A latency-mode MLP (32 → 2,500 → 10, ReLU) at N = 2^12: its first transform has two
    output ciphertexts (2,048 slots each), so it can be split by output ciphertexts. Compiled
    with the analytic cost model: the plan (and so its giant-step groups) is the same on every
    machine, where measured costs could choose another hoisting and another grouping."""
    from compiler import onnx_models as om

    return heinfer.compile(
        om.mlp((32, 2500, 10), act="relu", seed=1), mode="latency", calibration=om.random_input((32,), 64, seed=11), log_n=12,
        measure_costs=False,
    )


@pytest.fixture(scope="module")
def cluster():
    """A local Ray with two CPUs on 127.0.0.1, for the whole module (skipped without Ray)."""
    pytest.importorskip("ray")
    from heinfer.cluster.local import ensure_ray, release_ray

    owned = ensure_ray(None, 2)
    yield
    if owned:
        release_ray()


def as_batch(program: Program, data: bytes) -> _native.CiphertextBatch:
    """Decodes serialized ciphertexts of ``program``."""
    from heinfer.runtime.executor import native_params

    return _native.CiphertextBatch.from_bytes(native_params(program.params), data, len(data), 1 << 20)
