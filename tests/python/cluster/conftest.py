"""Fixtures of the cluster tests: CryptoNets-ReLU (throughput mode, no evaluation keys), a
tiny network that needs a relinearization key, and the inputs of each segment as the
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


def as_batch(program: Program, data: bytes) -> _native.CiphertextBatch:
    """Decodes serialized ciphertexts of ``program``."""
    from heinfer.runtime.executor import native_params

    return _native.CiphertextBatch.from_bytes(native_params(program.params), data, len(data), 1 << 20)
