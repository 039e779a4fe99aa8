"""Fixtures of the cluster tests: CryptoNets-ReLU (throughput mode, no evaluation keys), a
tiny network that needs a relinearization key, and the inputs of each segment as the
in-process server sees them (so that Ray's outputs can be compared byte for byte)."""

from __future__ import annotations

from pathlib import Path

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder
from heinfer import _native
from heinfer.program import Program
from heinfer.protocol import Client, Server
from heinfer.protocol.messages import decode

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """The held-out digits ``(x, y)``."""
    d = np.load(ROOT / "models" / "digits_test.npz")
    return d["x"], d["y"]


@pytest.fixture(scope="session")
def relu_net(digits) -> Program:
    """CryptoNets-ReLU compiled in throughput mode."""
    return heinfer.compile(str(ROOT / "models" / "cryptonets_relu.onnx"), mode="throughput", calibration=digits[0][:64])


@pytest.fixture(scope="session")
def squares() -> Program:
    """Gemm → x² → Gemm → x² → Gemm → ReLU → Gemm: needs a relinearization key."""
    b = ModelBuilder((8,), seed=5)
    for i, (k, m) in enumerate([(8, 8), (8, 8), (8, 8), (8, 4)]):
        if i in (1, 2):
            b.node("Mul", [b.last, b.last])
        if i == 3:
            b.node("Relu", [b.last])
        b.node("Gemm", [b.last, b.weight(m, k), b.weight(m, fan_in=k)], transB=1)
    return heinfer.compile(b.build(), calibration=om.random_input((8,), 64, seed=11))


def segment_inputs(program: Program, x: np.ndarray) -> list[bytes]:
    """The serialized input ciphertexts of every segment of one query on ``x``, recorded
    from an in-process run (keys are not needed by the programs this is used with)."""
    client = Client(program.public())
    server = Server(program)
    sid = server.open_session(client.keys_message())
    seen: list[bytes] = []
    run = server.executor.run

    def record(k, batch, relin, galois):
        seen.append(batch.to_bytes())
        return run(k, batch, relin, galois)

    server.executor.run = record
    msg = server.begin(client.query_message(sid, x))
    while decode(msg)[0] == "step":
        msg = server.resume(client.reply_message(msg))
    return seen


def as_batch(program: Program, data: bytes) -> _native.CiphertextBatch:
    """Decodes serialized ciphertexts of ``program``."""
    from heinfer.runtime.executor import native_params

    return _native.CiphertextBatch.from_bytes(native_params(program.params), data, len(data), 1 << 20)
