"""GAZELLE's two-party protocol in throughput mode (batch-axis shares): the same integers as
the fixed-point plan run in the clear (and so as latency mode) on ReLU, max-pool, pooled and
square networks, uniform shares in every slot the client decrypts, the flooding bound above
the measured noise (squares included), refused misuse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from compiler import onnx_models as om

import heinfer
from heinfer.compiler.fixed_point import plan_fixed_point, simulate
from heinfer.compiler.fuse import fold_linear
from heinfer.compiler.latency.two_party import _merge_all_linear
from heinfer.compiler.onnx_import import load_onnx
from heinfer.compiler.pools import pools_to_client
from heinfer.compiler.ranges import calibrated_bounds
from heinfer.compiler.two_party_throughput import batch_noise_bits, compile_two_party_throughput, input_noise
from heinfer.errors import CompileError, ProtocolError, SerializationError
from heinfer.program.format import load
from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer
from heinfer.runtime.bfv_batch import BatchLayer
from protocol.test_two_party import _assert_uniform

MODELS = Path(__file__).resolve().parents[3] / "models"
DIGITS = np.load(MODELS / "digits_test.npz")["x"]
CAL = DIGITS[100:164]


MODELS_UNDER_TEST = {
    "cryptonets_relu": lambda: (MODELS / "cryptonets_relu.onnx").read_bytes(),
    "mnist_a": lambda: (MODELS / "mnist_a.onnx").read_bytes(),
    "cryptonets": lambda: (MODELS / "cryptonets.onnx").read_bytes(),
    "relu_maxpool": lambda: om.relu_maxpool((1, 8, 8), channels=3, classes=10, seed=3),  # a max-pool circuit
    "relu_avgpool_conv": om.relu_avgpool_conv,
    # 3×3 windows, stride 2, padding 1: overlapping and padded (one mask per element)
    "relu_maxpool_overlapping": lambda: om.conv_net((1, 8, 8), channels=3, act="relu", pool="max", seed=5),
}


def _calibration(model: bytes) -> np.ndarray:
    shape = load_onnx(model).input_shape
    return CAL if tuple(shape) == CAL.shape[1:] else om.random_input(shape, batch=64, seed=2)


def _plain(model: bytes, x: np.ndarray, cal: np.ndarray) -> np.ndarray:
    """The compiler's fixed-point plan run in the clear (the same graph rewrites)."""
    g = _merge_all_linear(fold_linear(pools_to_client(load_onnx(model), after=frozenset({"relu"}))))
    _, _, bounds = calibrated_bounds(g, cal, None, 4.0)
    return simulate(plan_fixed_point(g, bounds, 1_032_193, cal), x)


@pytest.fixture(scope="module")
def cryptonets_relu():
    return compile_two_party_throughput(load_onnx((MODELS / "cryptonets_relu.onnx").read_bytes()), calibration=CAL, batch=4)


@pytest.mark.parametrize("name", sorted(MODELS_UNDER_TEST))
def test_batch_axis_protocol_matches_the_fixed_point_plan_exactly(name: str) -> None:
    """Five items in queries of at most four (a full query and a partial one): ReLU, max-pool
    with ReLU, an average pool summed on shares, and squares (networks A and B: a truncation
    circuit, then ``Enc(a²) + b² + Enc(a)·2b`` per element)."""
    model = MODELS_UNDER_TEST[name]()
    cal = _calibration(model)
    prog = heinfer.compile(model, mode="throughput", protocol="two-party", calibration=cal, batch_size=4)
    assert prog.mode == "throughput" and prog.batch_capacity == 4 and prog.rotation_steps == []
    x = cal[:5] if cal is not CAL else DIGITS[:5]
    r = heinfer.infer(prog, x)
    np.testing.assert_array_equal(r.outputs, _plain(model, x, cal))
    np.testing.assert_array_equal(heinfer.simulate(prog, x), r.outputs)  # from the program alone, no keys
    want = om.run_onnxruntime(model, x.astype(np.float32))
    np.testing.assert_array_equal(r.outputs.argmax(1), want.argmax(1))
    assert r.report["queries"] == 2 and r.report["mode"] == "throughput" and r.report["items"] == 5


def test_the_program_round_trips_and_its_public_part_has_no_weights(cryptonets_relu) -> None:
    prog = cryptonets_relu
    back = load(prog.to_bytes())
    assert back.id == prog.id and back.mode == "throughput" and back.batch_capacity == 4
    for a, b in zip(prog.layers, back.layers):
        assert (a.matrix != b.matrix).nnz == 0 and np.array_equal(a.bias, b.bias)
    public = load(prog.public().to_bytes())
    assert public.is_public and public.id == prog.id


def test_a_program_whose_layout_is_not_batch_axis_is_refused(cryptonets_relu) -> None:
    prog = cryptonets_relu
    seg = prog.segments[0]
    seg.gather = seg.gather[::-1].copy()  # ciphertext e would hold element in_size − 1 − e
    try:
        with pytest.raises(SerializationError, match="not a batch-axis layout"):
            load(prog.to_bytes())
    finally:
        seg.gather = seg.gather[::-1].copy()
    prog.layers[0].matrix.data[0] += 0.5
    try:
        with pytest.raises(SerializationError, match="not integers"):
            load(prog.to_bytes())
    finally:
        prog.layers[0].matrix.data[0] -= 0.5


def _parties(prog):
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    return client, server


def test_every_slot_the_client_decrypts_is_uniform(cryptonets_relu) -> None:
    """Two items of a four-item program: the slots of those items hold the client's shares
    ``y + r``, the others (and unused slots) uniform fillers — all N slots of layer 0's 845
    ciphertexts pass a chi-square test over 16 buckets of [0, p)."""
    prog = cryptonets_relu
    client, server = _parties(prog)
    client.offline_finish(server.offline(client.offline_request(2)))
    res = server.layer(0, client.query(DIGITS[:2]))
    cts = client._results(0, res)
    slots = np.concatenate([client._dec.decrypt(c) for c in cts]).astype(np.float64)
    _assert_uniform(slots, prog.plain_modulus)


def test_the_flooding_bound_holds_the_measured_noise(cryptonets_relu) -> None:
    prog = cryptonets_relu
    client, server = _parties(prog)
    p = server.p
    for k, seg in enumerate(prog.segments):
        values = np.random.default_rng(k).integers(0, p, (3, seg.in_size))
        cts = server._load(client._encrypt(k, values), seg.n_input_cts, "test")
        out = server.layers[k].run(server._ev, cts)
        worst = max(server.params.log_q - np.log2(p) - client._dec.noise_budget(c) - 1 for c in out)
        l1 = float(abs(prog.layers[k].matrix).sum(axis=1).max())
        assert worst < batch_noise_bits(l1, p), (k, worst)


def test_item_counts_are_checked_on_both_sides(cryptonets_relu) -> None:
    prog = cryptonets_relu
    client, server = _parties(prog)
    with pytest.raises(ProtocolError, match="1 to 4"):
        client.offline_request(5)
    req = client.offline_request(2)
    for header in (b"", (0).to_bytes(4, "little"), (5).to_bytes(4, "little"), b"\x02\x00\x00"):
        with pytest.raises(ProtocolError, match="header"):
            server.offline([header] + req[1:])
    with pytest.raises(ProtocolError, match="a header and 2 requests"):
        server.offline(req[1:])
    client.offline_finish(server.offline(req))
    with pytest.raises(ProtocolError, match="3 items in a query announced with 2"):
        client.query(DIGITS[:3])
    with pytest.raises(ProtocolError, match="shape"):
        client.query(DIGITS[:2, :, :4])
    out = server.layer(0, client.query(DIGITS[:2]))
    with pytest.raises(ProtocolError, match="expected 845 ciphertexts"):
        client.choose(0, out[:-1])


def test_the_flooding_bound_holds_after_a_square() -> None:
    """Network A's second layer on ``Enc(a²) + b² + Enc(a)·2b``: the measured error stays below
    the bound the compiler floods for (one plaintext-polynomial product, then scalars)."""
    prog = compile_two_party_throughput(load_onnx((MODELS / "mnist_a.onnx").read_bytes()), calibration=CAL, batch=4)
    assert prog.squared_input(1)
    client, server = _parties(prog)
    p, n, seg, ev = server.p, server.n, prog.segments[1], server._ev
    rng = np.random.default_rng(9)
    a, b = rng.integers(0, p, (4, seg.in_size)), rng.integers(0, p, (4, seg.in_size))
    sq = server._load(client._encrypt(1, a * a % p), seg.n_input_cts, "test")
    lin = server._load(client._encrypt(1, a), seg.n_input_cts, "test")
    b_sq, twice_b = seg.input_rows(b * b % p, n, True), seg.input_rows(2 * b % p, n, True)
    cts = [
        ev.add(ev.add_plain(s, server._enc.encode(r)), ev.mul_plain(c, server._enc.encode_multiplier(t)))
        for s, c, r, t in zip(sq, lin, b_sq, twice_b)
    ]
    out = server.layers[1].run(ev, cts)
    z = (a + b) % p  # the square of the reconstructed value, then the layer, mod p
    want = (np.asarray(prog.layers[1].matrix @ (z * z % p).T).T + prog.layers[1].bias) % p
    got = np.stack([client._dec.decrypt(c)[:4] for c in out]).T
    np.testing.assert_array_equal(got, np.rint(want).astype(np.int64) % p)
    worst = max(server.params.log_q - np.log2(p) - client._dec.noise_budget(c) - 1 for c in out)
    l1 = float(abs(prog.layers[1].matrix).sum(axis=1).max())
    assert worst < batch_noise_bits(l1, p, input_noise(p, server.params.log_n, True)), worst


def test_oversized_batches_are_refused_by_name() -> None:
    with pytest.raises(CompileError, match="takes 1 to 1240"):
        heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="throughput", protocol="two-party", calibration=CAL, batch_size=5000)


def test_flooding_hides_which_weights_ran(cryptonets_relu) -> None:
    """Playing the client against two servers whose first layers differ (the weights, and
    so the noise of the products, 8× larger): before flooding the noise budget separates them
    by about 3 bits in every ciphertext; after the server's flooding the two views agree to a
    fraction of a bit — the noise no longer tells the weights apart."""
    from dataclasses import replace

    prog = cryptonets_relu
    layer = prog.layers[0]
    heavy = replace(layer, matrix=layer.matrix * 8)
    client, server = _parties(prog)
    seg = prog.segments[0]
    values = np.random.default_rng(5).integers(0, server.p, (4, seg.in_size))
    budgets = {}
    for name, step in (("light", layer), ("heavy", heavy)):
        run = BatchLayer(server.params, step)
        out = run.run(server._ev, server._load(client._encrypt(0, values), seg.n_input_cts, "test"))[:64]
        flooded = [server._rr.rerandomize_compact(c, seg.flood_bits) for c in out]
        budgets[name] = (np.array([client._dec.noise_budget(c) for c in out]), np.array([client._dec.noise_budget(c) for c in flooded]))
    raw_gap = budgets["light"][0].mean() - budgets["heavy"][0].mean()
    flooded_gap = abs(budgets["light"][1].mean() - budgets["heavy"][1].mean())
    assert raw_gap > 2.0 and flooded_gap < 0.5, (raw_gap, flooded_gap)


def test_the_default_capacity_bounds_a_querys_circuits() -> None:
    """256 items for CryptoNets-ReLU (945 circuit inputs per item), 25 for MiniONN's MNIST net
    (2,560 max-pools of 4 values and 100 ReLUs: 10,340 inputs per item)."""
    for name, want in (("cryptonets_relu", 256), ("mnist_d", 25)):
        prog = heinfer.compile(MODELS / f"{name}.onnx", mode="throughput", protocol="two-party", calibration=CAL)
        assert prog.batch_capacity == want
        assert want * sum(st.instances * st.window for st in prog.steps) <= 1 << 18


def test_the_server_sees_choice_bits_that_do_not_depend_on_the_inputs(cryptonets_relu) -> None:
    """Playing the server on the batch axis: a query of two blank images and one of two real
    digits give step 0's OT choice bits (the only plaintext-looking bytes it receives besides
    the item count) that are balanced coins alike."""
    prog = cryptonets_relu
    fractions = []
    for x in (np.zeros_like(DIGITS[:2]), DIGITS[:2]):
        client, server = _parties(prog)
        client.offline_finish(server.offline(client.offline_request(2)))
        choices = client.choose(0, server.layer(0, client.query(x)))
        bits = np.unpackbits(np.frombuffer(choices, dtype=np.uint8)[16:])  # past any header
        fractions.append(bits.mean())
    # ~33,800 choice bits each: a coin's fraction of ones is within 0.5 ± 0.02 (over 7σ)
    assert all(abs(f - 0.5) < 0.02 for f in fractions), fractions
