"""Fixtures of the protocol tests: CryptoNets-ReLU (two client-aided steps, no evaluation
key) and a client and a server with an open session on it."""

from __future__ import annotations

import numpy as np
import pytest

import heinfer

DIGITS = np.load("models/digits_test.npz")["x"]


@pytest.fixture(scope="module")
def relu_program() -> heinfer.Program:
    """CryptoNets-ReLU, batch axis: two client-aided steps, no evaluation key."""
    return heinfer.compile("models/cryptonets_relu.onnx", mode="throughput", calibration=DIGITS[:64])


@pytest.fixture()
def parties(relu_program):
    """``(client, server, session)`` on :func:`relu_program` (the client holds the public
    program only)."""
    client = heinfer.Client(relu_program.public())
    server = heinfer.Server(relu_program)
    return client, server, server.open_session(client.keys_message())
