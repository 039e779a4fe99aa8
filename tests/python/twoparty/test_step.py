"""The two-party non-linear step through the Python API: results, uniform shares, errors."""

from __future__ import annotations

import numpy as np
import pytest

from heinfer.errors import OperandError, ProtocolError, SerializationError
from heinfer.twoparty import LayerCircuit, TwoPartyClient, TwoPartyServer, run_in_process

P = 1_032_193  # 20 bits, ≡ 1 mod 8192


@pytest.fixture(scope="module")
def parties():
    client, m1 = TwoPartyClient.start()
    server, m2 = TwoPartyServer.start(m1)
    client.finish_setup(m2)
    return client, server


def _signed(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.int64)
    return np.where(v > (P - 1) // 2, v - P, v)


@pytest.mark.parametrize("shift", [0, 6])
def test_relu_step_reconstructs_relu(parties, shift: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.integers(0, P, 2000, dtype=np.uint64)
    run = run_in_process(*parties, LayerCircuit("relu", P, shift), x, P)
    np.testing.assert_array_equal(run.outputs, np.maximum(_signed(x), 0) >> shift)
    # ~4.3 KB offline (5b + 1 AND gates, output table) and ~0.3 KB online per 23-bit ReLU
    assert 3_500 * 2000 < run.offline_bytes < 5_000 * 2000
    assert run.online_bytes < 400 * 2000


def test_maxpool_relu_step(parties) -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, P, 4 * 500, dtype=np.uint64)
    run = run_in_process(*parties, LayerCircuit("maxpool_relu", P, 3, window=4), x, P)
    want = np.maximum(_signed(x).reshape(500, 4).max(1), 0) >> 3
    np.testing.assert_array_equal(run.outputs, want)


def test_client_view_is_uniform(parties) -> None:
    """What the client decrypts, c = x + r mod p, is uniform whatever x is (x = 0 here)."""
    client, server = parties
    layer = LayerCircuit("relu", P, 0)
    _, o1 = client.offline(layer, 20_000)
    sstep, _ = server.offline(layer, 20_000, o1)
    counts = np.bincount((sstep.masks().astype(np.float64) * 20 / P).astype(int), minlength=20)
    chi2 = float(((counts - 1000.0) ** 2 / 1000.0).sum())
    # 19 degrees of freedom: p = 1e-9 (81.6), so that an unbiased sampler fails once in a
    # billion runs, not once in a thousand (43.8, p = 0.001, failed a clean CI run); a real bias
    # shows far above it (masks on half the range: chi2 ≈ 20,000)
    assert chi2 < 81.6, chi2


def test_errors_name_the_problem(parties) -> None:
    client, server = parties
    with pytest.raises(OperandError, match="unknown non-linear layer"):
        LayerCircuit("sigmoid", P, 0)
    with pytest.raises(OperandError, match="must be odd"):
        LayerCircuit("relu", 1 << 20, 0)
    layer = LayerCircuit("relu", P, 0)
    cstep, o1 = client.offline(layer, 4)
    with pytest.raises(ProtocolError, match="choices before the offline phase"):
        cstep.choose(np.zeros(4, np.uint64))
    sstep, o2 = server.offline(layer, 4, o1)
    with pytest.raises(SerializationError):
        cstep.receive_offline(o2[:-1])
    cstep.receive_offline(o2)
    with pytest.raises(OperandError, match="not below p"):
        cstep.choose(np.full(4, P, np.uint64))
    labels = sstep.labels(cstep.choose(np.ones(4, np.uint64)))
    with pytest.raises(ProtocolError, match="already sent"):
        sstep.labels(b"")
    assert len(cstep.finish(labels)) == 4


def test_server_view_does_not_depend_on_the_client_shares(parties) -> None:
    """The server sees only the OT choices d = b ⊕ c (c: the client's random OT choices): for
    all-zero shares and all-(p−1) shares alike, about half the bits of d are ones, and the two
    messages differ from each other in about half their bits (they would be equal, or each
    other's complement, if d leaked b)."""
    client, server = parties
    layer = LayerCircuit("relu", P, 0)
    views = []
    for value in (0, P - 1):
        cstep, o1 = client.offline(layer, 4000)
        _, o2 = server.offline(layer, 4000, o1)
        cstep.receive_offline(o2)
        views.append(np.frombuffer(cstep.choose(np.full(4000, value, np.uint64)), np.uint8))
    bits = [np.unpackbits(v[-10_000:]) for v in views]  # the packed choice bits (payload end)
    for b in bits:
        assert abs(b.mean() - 0.5) < 0.01
    assert abs((bits[0] ^ bits[1]).mean() - 0.5) < 0.01
