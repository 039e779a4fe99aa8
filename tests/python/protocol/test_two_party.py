"""GAZELLE's two-party protocol end to end (networks C and D of GAZELLE §8, the bundled
CryptoNets-ReLU and MiniONN MNIST models): exact agreement with the fixed-point plan run in the
clear, argmax agreement with onnxruntime, what the client sees (uniform shares), and refused
misuse."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from compiler import onnx_models as om

import heinfer

from heinfer import ckks
from heinfer.compiler.fixed_point import plan_fixed_point, simulate
from heinfer.compiler.fuse import fold_linear
from heinfer.compiler.latency.two_party import _merge_all_linear, compile_two_party
from heinfer.compiler.pools import pools_to_client
from heinfer.compiler.onnx_import import load_onnx
from heinfer.compiler.ranges import calibrated_bounds
from heinfer.errors import NotSupportedYetError, ProtocolError, SerializationError, UnsupportedOperatorError
from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer, run_in_process

MODELS = Path(__file__).resolve().parents[3] / "models"
DIGITS = np.load(MODELS / "digits_test.npz")["x"]
CAL = DIGITS[100:164]


@pytest.fixture(scope="module")
def compiled():
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            model = (MODELS / f"{name}.onnx").read_bytes()
            cache[name] = (model, compile_two_party(load_onnx(model), calibration=CAL))
        return cache[name]

    return get


def _plain_fixed_point(model: bytes, x: np.ndarray, cal: np.ndarray = CAL) -> np.ndarray:
    """The compiler's fixed-point plan run in the clear (the same graph rewrites)."""
    g = _merge_all_linear(fold_linear(pools_to_client(load_onnx(model), after=frozenset({"relu"}))))
    _, _, bounds = calibrated_bounds(g, cal, None, 4.0)
    return simulate(plan_fixed_point(g, bounds, 1_032_193, cal), x)


@pytest.mark.parametrize("name", ["cryptonets_relu", "mnist_d", "mnist_a", "cryptonets"])
def test_protocol_matches_the_fixed_point_plan_exactly(compiled, name: str) -> None:
    """Networks C, D, A and B (A and B: squares by truncation circuit and AHE square)."""
    model, prog = compiled(name)
    x = DIGITS[:2] if name == "mnist_d" else DIGITS[:4]
    out, rep = run_in_process(prog, x)
    # the encrypted protocol computes the plan's integers exactly (BFV is exact mod p)
    np.testing.assert_array_equal(out, _plain_fixed_point(model, x))
    np.testing.assert_array_equal(heinfer.simulate(prog, x), out)  # from the program alone, no keys
    want = om.run_onnxruntime(model, x.astype(np.float32))
    np.testing.assert_array_equal(out.argmax(1), want.argmax(1))
    # squares keep g fractional bits of a value and 2g of its square (20-bit p): coarser
    assert np.abs(out - want).max() / np.abs(want).max() < (0.1 if name in ("mnist_a", "cryptonets") else 0.05)
    assert rep["online_bytes"] > 0 and rep["offline_bytes"] > 0 and rep["setup_bytes"] > 0


def _assert_uniform(values: np.ndarray, p: int) -> None:
    """A chi-square test of ``values`` over 16 equal buckets of ``[0, p)``."""
    counts = np.bincount((values * 16 / p).astype(int), minlength=16)
    expected = len(values) / 16
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 73.6, f"chi-square {chi2:.1f} over 15 degrees of freedom"  # p = 1e-9


def _first_layer(prog, x: np.ndarray = DIGITS[0]):
    """Both parties after the set-up and the offline phase, and layer 0's masked result for
    ``x`` (the first digit)."""
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    client.offline_finish(server.offline(client.offline_request()))
    return client, server, server.layer(0, client.query(x))


def test_what_the_client_decrypts_is_uniform(compiled) -> None:
    """Every slot of every layer result the client decrypts is its share ``y + r`` or a
    uniform filler: a chi-square test over 16 buckets of [0, p) (all N slots of layer 0's
    ciphertexts, whose true values are mostly small and would fail it badly unmasked)."""
    _, prog = compiled("cryptonets_relu")
    client, server, res = _first_layer(prog)
    cts = client._results(0, res)
    slots = np.concatenate([client._dec.decrypt(c) for c in cts]).astype(np.float64)
    _assert_uniform(slots, prog.plain_modulus)


def test_after_a_square_the_client_still_decrypts_only_uniform_shares(compiled) -> None:
    """Network A's second layer runs on the squared shares (``a²`` in row 0 and ``a`` in row 1
    of each ciphertext, the cross term with the server's share in row 1 of its diagonals):
    every slot of its result is still the client's uniform share or a uniform filler, and its
    compacted ciphertexts hold one prime."""
    _, prog = compiled("mnist_a")
    client, server, res = _first_layer(prog)
    msgs = client.next_input(0, server.labels(0, client.choose(0, res)))
    assert len(msgs) == prog.segments[1].n_input_cts and prog.rows_packed(1) and prog.rows_summed(1)
    with pytest.raises(ProtocolError, match="expected"):
        server.layer(1, msgs[:-1])  # a ciphertext missing
    # an input switched down to fewer primes (as results travel) is refused by name
    low = ckks.Evaluator(client.params.rlwe).drop_level(client._load(msgs[:1], 1, "test")[0], 1)
    with pytest.raises(ProtocolError, match="level 1; inputs are at level 2"):
        server.layer(1, [bytes(client.params._raw.ciphertext_to_bytes(low._raw))] + msgs[1:])
    res = server.layer(1, msgs)
    cts = client._results(1, res)
    assert all(c.level == 0 for c in cts)
    slots = np.concatenate([client._dec.decrypt(c) for c in cts]).astype(np.float64)
    _assert_uniform(slots, prog.plain_modulus)


def test_results_travel_rounded_and_the_client_refuses_them_at_another_level(compiled) -> None:
    """Each result travels switched down and without the low bits its flooding leaves free
    (``result_drop_bits``: at most ``Δ_ℓ/8`` of error with the flooding, worst case): under 62 %
    of its prime in full, and it still decrypts to the client's uniform share. A result left
    at the top level (not what the program's flooding names) is refused by name; rounded
    beyond the bits: ``crates/heinfer-bfv/src/rounding.rs``."""
    _, prog = compiled("cryptonets_relu")
    client, server, res = _first_layer(prog)
    seg = prog.segments[0]
    j0, j1 = client.params.result_drop_bits(seg.flood_bits)
    assert j0 >= 20 and j1 >= 10
    assert {len(m) for m in res} == {client.params.result_wire_bytes(seg.flood_bits)}
    cts = client._results(0, res)
    assert len(res[0]) < 0.62 * len(client._bytes(cts[0]))  # the same ciphertext in full
    top = server._bytes(server._rr.rerandomize(client._kg.encrypt_symmetric(client._enc.encode([0])), seg.flood_bits))
    with pytest.raises(SerializationError, match="level"):
        client.choose(0, [top] + res[1:])


def test_folds_run_on_the_shares_and_the_unfolded_output_shows_only_its_sums(compiled) -> None:
    """Network A's transforms keep no fold or replication (the client lays its input out
    replicated; both parties fold their shares), and its last layer travels unfolded: every
    slot the client decrypts is uniform (each orbit's masks sum to 0), yet the folded slots
    are the outputs."""
    _, prog = compiled("mnist_a")
    assert all(not t.fold and not t.replicate for t in prog.layers)
    assert prog.segments[-1].fold and (prog.segments[0].gather >= 0).sum() > prog.segments[0].in_size  # replicated
    client, server, res = _first_layer(prog)
    for k in range(len(prog.steps)):
        res = server.layer(k + 1, client.next_input(k, server.labels(k, client.choose(k, res))))
    cts = client._results(len(prog.segments) - 1, res)
    _assert_uniform(np.concatenate([client._dec.decrypt(c) for c in cts]).astype(np.float64), prog.plain_modulus)
    np.testing.assert_array_equal(client.finish(res), heinfer.simulate(prog, DIGITS[:1]))


def test_folds_stay_on_the_server_where_the_shares_cannot_take_them() -> None:
    """A fold whose orbits meet another output's position, or a bias outside the output
    positions, stays in the server's transform; replication always moves to the client."""
    from heinfer.compiler.latency.two_party import _to_shares
    from heinfer.program.placement import Placement
    from heinfer.program.transform import Transform

    gather = np.full((1, 64), -1)
    gather[0, :8] = np.arange(8)
    out = Placement(1, 64, np.zeros(8, np.int64), np.arange(8))
    t = Transform(1, 1, 64, np.zeros((0, 4), np.int64), np.zeros((0, 64)), None, (4,), (32,))
    g, kept, fold = _to_shares(t, gather, out)  # output 0's orbit {0, 4} holds output 4
    assert fold == () and kept.fold == (4,) and not kept.replicate and (g >= 0).sum() == 16
    _, moved, fold = _to_shares(replace(t, fold=(8, 16)), gather, out)
    assert fold == (8, 16) and not moved.fold
    bias = np.zeros((1, 64))
    bias[0, 24] = 1.0  # in output 0's orbit: the client's fold would add it there
    _, kept, fold = _to_shares(replace(t, fold=(8, 16), bias=bias), gather, out)
    assert fold == () and kept.fold == (8, 16)


def test_parties_refuse_out_of_order_and_malformed_messages(compiled) -> None:
    _, prog = compiled("cryptonets_relu")
    client = TwoPartyInferenceClient(prog.public())
    with pytest.raises(ProtocolError, match="offline"):
        client.query(DIGITS[0])
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    with pytest.raises(ProtocolError, match="offline"):
        server.layer(0, [])
    client.offline_finish(server.offline(client.offline_request()))
    msgs = client.query(DIGITS[0])
    # LoLa's expanded input: 7 slot vectors, two per ciphertext (rows 0 and 1)
    assert prog.segments[0].n_inputs == 7 and prog.segments[0].row_pairs and len(msgs) == 4
    with pytest.raises(ProtocolError, match="expected 4 ciphertexts"):
        server.layer(0, msgs[:-1])
    with pytest.raises(SerializationError):
        server.layer(0, [m[:-5] for m in msgs])
    res = server.layer(0, msgs)
    with pytest.raises(ProtocolError, match="unexpected result"):
        client.choose(1, res)
    with pytest.raises(ProtocolError, match="before the last layer"):
        client.finish(res)
    with pytest.raises(ProtocolError, match="weights"):
        TwoPartyInferenceServer(prog.public(), client.keys_message())
    assert prog.public().layers is None


def test_a_client_cannot_replay_a_layer_to_read_the_weights(compiled) -> None:
    """The attack: run layer k of one query twice on inputs x and x'. Both answers carry the
    same masks, so their difference is W_k·(x − x') mod p in the clear — impulses read the
    weights column by column. The server runs each layer and each step's labels once per
    offline phase, in order; the query's masks are gone after its last layer."""
    _, prog = compiled("cryptonets_relu")
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    client.offline_finish(server.offline(client.offline_request()))
    msgs = client.query(DIGITS[0])
    with pytest.raises(ProtocolError, match="layer 1 out of order"):
        server.layer(1, msgs)
    with pytest.raises(ProtocolError, match="labels 0 out of order"):
        server.labels(0, b"")
    res = server.layer(0, msgs)
    with pytest.raises(ProtocolError, match="layer 0 out of order.*once"):
        server.layer(0, msgs)  # the replay
    for k in range(len(prog.steps)):
        msgs = client.next_input(k, server.labels(k, client.choose(k, res)))
        with pytest.raises(ProtocolError, match=f"labels {k} out of order"):
            server.labels(k, b"")
        res = server.layer(k + 1, msgs)
    client.finish(res)
    last = len(prog.steps)
    with pytest.raises(ProtocolError, match="offline phase"):
        server.layer(last, msgs)  # the output layer again, where its masks are zero
    # a rejected message is not a spent one: the honest query after a new offline phase runs
    client.offline_finish(server.offline(client.offline_request()))
    msgs = client.query(DIGITS[1])
    with pytest.raises(ProtocolError, match="expected"):
        server.layer(0, msgs[:-1])
    res = server.layer(0, msgs)
    for k in range(len(prog.steps)):
        res = server.layer(k + 1, client.next_input(k, server.labels(k, client.choose(k, res))))
    np.testing.assert_array_equal(client.finish(res), run_in_process(prog, DIGITS[1:2])[0])


def test_unsupported_networks_are_refused_by_name() -> None:
    with pytest.raises((UnsupportedOperatorError, NotSupportedYetError), match="tanh"):
        compile_two_party(load_onnx(om.mlp((16, 8, 4), act="Tanh")), input_bound=1.0)


def test_public_api_compiles_and_runs_two_party() -> None:
    import heinfer

    prog = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=CAL)
    assert prog.protocol == "two-party" and prog.public().layers is None
    r = heinfer.infer(prog, DIGITS[:2])
    assert r.outputs.shape == (2, 10) and r.report["protocol"] == "two-party"
    for key in ("setup_s", "offline_s", "online_s", "setup_bytes", "offline_bytes", "online_bytes", "bytes_per_item"):
        assert r.report[key] > 0, key
    with pytest.raises(heinfer.NotSupportedYetError, match="own parties"):
        heinfer.infer(prog, DIGITS[:1], client=object())
    # the client-aided parties refuse it by name and say what runs it
    with pytest.raises(ProtocolError, match="a Server runs client-aided programs; a two-party program runs with heinfer.infer"):
        heinfer.Server(prog)
    with pytest.raises(ProtocolError, match="a Client runs client-aided programs; .*connect_two_party"):
        heinfer.Client(prog.public())


def test_streamed_diagonals_give_the_same_result(compiled) -> None:
    """A layer whose encoded diagonals exceed the memory budget encodes them group by group
    during the query: same exact result."""
    model, prog = compiled("cryptonets_relu")
    client = TwoPartyInferenceClient(prog.public())
    from heinfer.protocol.two_party import prepare_server_layers

    layers = prepare_server_layers(_params_of(prog), prog, max_memory=0)
    assert all(layer.lazy for layer in layers)
    some = prepare_server_layers(_params_of(prog), prog, max_memory=max(x.plaintext_bytes for x in layers) - 1)
    assert [x.lazy for x in some].count(True) == 1  # only the largest streams
    lazy = TwoPartyInferenceServer(prog, client.keys_message(), layers)
    out, _ = run_in_process(prog, DIGITS[:2], server=lazy)
    np.testing.assert_array_equal(out, _plain_fixed_point(model, DIGITS[:2]))


def _params_of(prog):
    from heinfer.protocol.two_party import _params

    return _params(prog)


def test_a_slow_link_chooses_layouts_with_fewer_ciphertexts() -> None:
    import heinfer

    lan = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=CAL)
    slow = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=CAL, bandwidth=1.25e6)
    count = lambda prog: sum(s.n_input_cts + s.output.n_cts for s in prog.segments)  # noqa: E731
    assert count(slow) < count(lan)
    # on a 1 Mbit/s link a result ciphertext (one prime after flooding: 102 KB) costs more than
    # any compute it saves: the output placement is chosen with the link priced (at 100 Mbit/s
    # layer 0's aligned grid of 2 results still wins)
    slower = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=CAL, bandwidth=1.25e5)
    mid = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=CAL, bandwidth=1.25e7)
    slots = 1 << (slower.bfv["log_n"] - 1)
    assert [s.output.n_cts for s in slower.segments] == [-(-s.out_size // slots) for s in slower.segments]
    assert [s.output.n_cts for s in mid.segments] != [s.output.n_cts for s in slower.segments]
    with pytest.raises(heinfer.CompileError, match="bandwidth"):
        heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=CAL, bandwidth=0)


@pytest.mark.parametrize("bandwidth", [1.25e8, 1.25e6])
def test_layers_are_priced_single_hoisted_as_bfv_runs_them(bandwidth: float) -> None:
    """BFV brings every hoisted rotation back to ``Q`` before its products: the search must
    price every layer that way, not pick a double-hoisted price it cannot run."""
    import heinfer

    prog = heinfer.compile(MODELS / "mnist_d.onnx", mode="latency", protocol="two-party", calibration=CAL, bandwidth=bandwidth)
    plans = prog.meta["plans"]
    assert plans and all(p["hoisting"] == "single" for p in plans.values()), plans
    assert all(t.hoisting == "single" for t in prog.layers)


def test_inputs_beyond_the_planned_range_are_refused(compiled) -> None:
    from heinfer.errors import RangeError

    _, prog = compiled("cryptonets_relu")
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    client.offline_finish(server.offline(client.offline_request()))
    with pytest.raises(RangeError, match="beyond the bound"):
        client.query(DIGITS[0] * 1000)
    with pytest.raises(RangeError, match="non-finite values \\(NaN or infinity\\)"):
        client.query(np.full(DIGITS[0].shape, np.nan))
    with pytest.raises(ProtocolError, match="shape"):
        client.query(DIGITS[0][:, :10])


def test_average_pools_run_on_the_shares() -> None:
    """An average pool after a ReLU is summed by each party on its own shares (no BFV layer of
    its own, no circuit): the result still equals the fixed-point plan bit for bit."""
    model = om.relu_avgpool_conv(seed=3)
    cal = om.random_input((2, 8, 8), 64, seed=5)
    prog = compile_two_party(load_onnx(model), calibration=cal)
    assert len(prog.segments) == 3 and prog.steps[0].pool is not None
    assert prog.steps[0].pool.shape == (64, 4) and prog.steps[0].instances == 256
    x = om.random_input((2, 8, 8), 2, seed=6)
    out, _ = run_in_process(prog, x)
    np.testing.assert_array_equal(out, _plain_fixed_point(model, x, cal))
    want = om.run_onnxruntime(model, x.astype(np.float32))
    assert np.abs(out - want).max() / np.abs(want).max() < 0.05


def test_overlapping_and_padded_max_pools_share_masks() -> None:
    """A 3×3 max-pool with stride 2 and padding 1 after a ReLU: windows overlap (an element
    in up to four of them) and the border ones are padded. The circuits read each element
    through one mask (``TwoPartyStep.sources``); the result equals the fixed-point plan bit
    for bit, and what the client decrypts stays uniform."""
    model = om.conv_net((2, 8, 8), channels=3, act="relu", pool="max", classes=5, seed=11)
    cal = om.random_input((2, 8, 8), 64, seed=12)
    prog = compile_two_party(load_onnx(model), calibration=cal)
    st = prog.steps[0]
    assert st.kind == "maxpool_relu" and st.window == 9 and st.instances == 3 * 4 * 4
    assert st.sources(2) is not None and len(np.unique(st.sources(2))) == 2 * 3 * 8 * 8
    x = om.random_input((2, 8, 8), 3, seed=13)
    out, _ = run_in_process(prog, x)
    np.testing.assert_array_equal(out, _plain_fixed_point(model, x, cal))
    # the plan pads with -inf (``MaxPool`` in the clear); its 20-bit fixed point is what
    # separates it from onnxruntime (two logits of item 2 lie 0.007 apart there: no argmax test)
    want = om.run_onnxruntime(model, x.astype(np.float32))
    assert np.abs(out - want).max() / np.abs(want).max() < 0.05
    # every slot the client decrypts before the pooling circuits: uniform
    client, _, res = _first_layer(prog, x[0])
    cts = client._results(0, res)
    _assert_uniform(np.concatenate([client._dec.decrypt(c) for c in cts]).astype(np.float64), prog.plain_modulus)


def test_the_flooding_bound_holds_the_measured_noise(compiled) -> None:
    """Each layer's error, measured on a real run before flooding, stays below the worst-case
    bound the compiler floods for (``noise_bits``); the bound is loose by design (worst case
    over every coefficient), so it sits well above the measurement."""
    from heinfer.compiler.latency.two_party import noise_bits

    _, prog = compiled("mnist_d")
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    params = server.params
    p, log_q = params.plain_modulus, params.log_q
    for k, seg in enumerate(prog.segments):
        values = np.random.default_rng(k).integers(-(p // 4), p // 4, seg.in_size)
        cts = server._load(client._encrypt(k, values[None]), seg.n_input_cts, "test")
        out = server.layers[k].run(server._ev, cts, server._galois)
        # invariant noise v = |R|/Q with R ≈ p·e + (Q mod p)·m, budget = −log2(2|v|)
        worst = max(log_q - np.log2(p) - client._dec.noise_budget(c) - 1 for c in out)
        assert worst < noise_bits(prog.layers[k], prog.bfv), (k, worst)


@pytest.mark.parametrize("name", ["cryptonets", "mnist_a"])
def test_both_rows_stay_within_the_flooding_bound_and_sum_on_the_shares(compiled, name: str) -> None:
    """Layers that use both rows of the slots — a squared input (``a²`` in row 0, ``a`` in row
    1 with the ``2b``-scaled diagonals) or inputs in row pairs — compute both rows' parts in
    one run: the measured error stays below the transform's bound, and the two rows of the
    decrypted result, summed as the parties sum their shares, are the layer's outputs."""
    from heinfer.compiler.latency.two_party import noise_bits
    from heinfer.compiler.simulate_two_party import _linear as linear_in_clear

    _, prog = compiled(name)
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    params = server.params
    p, log_q = params.plain_modulus, params.log_q
    rng = np.random.default_rng(11)
    checked = 0
    for k, seg in enumerate(prog.segments):
        if not prog.rows_summed(k):
            continue
        values = rng.integers(-(p // 4), p // 4, seg.in_size)
        layer = server.layers[k]
        if prog.rows_packed(k):
            twice_b = rng.integers(0, p, seg.in_size)
            layer = layer.with_cross_term(seg.gather, twice_b, p)
            cts = server._load(client._encrypt(k, values[None] * values[None] % p, values[None]), seg.n_input_cts, "test")
            want = (values * values + twice_b * values) % p  # W·(a² + 2b·a) with b's square left out
        else:
            cts = server._load(client._encrypt(k, values[None]), seg.n_input_cts, "test")
            want = values % p
        out = layer.run(server._ev, cts, server._galois)
        worst = max(log_q - np.log2(p) - client._dec.noise_budget(c) - 1 for c in out)
        assert worst < noise_bits(prog.layers[k], prog.bfv), (k, worst)
        got = seg.read(np.stack([client._dec.decrypt(c) for c in out]), 1, False, p, summed=True)
        # the layer in the clear on the residues (W·v + bias, folds included)
        np.testing.assert_array_equal(got % p, linear_in_clear(prog, k, prog.layers[k], want[None], p) % p)
        checked += 1
    assert checked


def test_the_server_sees_choice_bits_that_do_not_depend_on_the_input(compiled) -> None:
    """Playing the server: the only plaintext-looking bytes it receives are the OT choice bits
    (its other inputs are BFV ciphertexts under the client's key). For an all-zero image and a
    real digit, the bits of step 0's choices are balanced coins alike — the choice bits are the
    client's share bits XOR random OT bits, so they carry nothing about the input."""
    _, prog = compiled("cryptonets_relu")
    fractions = []
    for x in (np.zeros_like(DIGITS[0]), DIGITS[0]):
        client = TwoPartyInferenceClient(prog.public())
        server = TwoPartyInferenceServer(prog, client.keys_message())
        client.finish_setup(server.setup_reply)
        client.offline_finish(server.offline(client.offline_request()))
        choices = client.choose(0, server.layer(0, client.query(x)))
        bits = np.unpackbits(np.frombuffer(choices, dtype=np.uint8)[16:])  # past any header
        fractions.append(bits.mean())
    # ~16,900 choice bits each: a coin's fraction of ones is within 0.5 ± 0.02 (over 5σ)
    assert all(abs(f - 0.5) < 0.02 for f in fractions), fractions


def test_shared_pool_inputs_give_the_server_independent_choice_bits() -> None:
    """Playing the server of a max-pool whose windows share elements (3×3, stride 2, pad 1):
    the circuit inputs that read one element carry the client's one share of it, but each
    travels by its own oblivious transfer, so the choice bits the server sees are balanced
    coins for a blank and a random input alike, and two inputs of one element agree on a
    choice bit half the time — not always, as a share sent twice in the clear would."""
    model = om.conv_net((2, 8, 8), channels=3, act="relu", pool="max", classes=5, seed=11)
    prog = compile_two_party(load_onnx(model), calibration=om.random_input((2, 8, 8), 64, seed=12))
    st = prog.steps[0]
    entries = st.groups.reshape(-1)
    bits_per = int(np.ceil(np.log2(prog.plain_modulus)))
    for x in (np.zeros((2, 8, 8)), om.random_input((2, 8, 8), 1, seed=14)[0]):
        client = TwoPartyInferenceClient(prog.public())
        server = TwoPartyInferenceServer(prog, client.keys_message())
        client.finish_setup(server.setup_reply)
        client.offline_finish(server.offline(client.offline_request()))
        choices = client.choose(0, server.layer(0, client.query(x)))
        # packed least significant bit first (the OT wire format), after a header
        assert 0 < len(choices) - len(entries) * bits_per // 8 < 64  # one bit per circuit input bit
        bits = np.unpackbits(np.frombuffer(choices, dtype=np.uint8), bitorder="little")[-len(entries) * bits_per :]
        n = bits.size
        assert abs(bits.mean() - 0.5) < 5 * 0.5 / np.sqrt(n), bits.mean()
        # pairs of circuit inputs that read the same element: their choice bits, bit by bit
        per_input = bits.reshape(len(entries), bits_per)
        first = {}
        same = []
        for i, e in enumerate(entries):
            if e in first:
                same.append(per_input[i] == per_input[first[e]])
            else:
                first[e] = i
        agree = np.concatenate(same)
        assert abs(agree.mean() - 0.5) < 5 * 0.5 / np.sqrt(agree.size), agree.mean()


def _leading_functions_net() -> bytes:
    """Sigmoid, then max-pooling of the 8×8 image to 4×4, then dense layers with a ReLU: the
    first two are client functions before the first linear layer."""
    b = om.ModelBuilder((1, 8, 8), seed=4)
    b.node("Sigmoid", [b.last])
    b.node("MaxPool", [b.last], kernel_shape=[2, 2], strides=[2, 2])
    b.node("Flatten", [b.last])
    b.node("Gemm", [b.last, b.weight(12, 16), b.weight(12, fan_in=16)], transB=1)
    b.node("Relu", [b.last])
    b.node("Gemm", [b.last, b.weight(4, 12), b.weight(4, fan_in=12)], transB=1)
    return b.build()


@pytest.mark.parametrize("mode", ["latency", "throughput"])
def test_client_functions_before_the_first_layer_run_on_the_client(mode: str) -> None:
    """The client applies them in the clear before encoding; the plan starts at the first
    layer on the calibration inputs passed through them, and both parties agree with
    onnxruntime. The public program carries them (and nothing it decodes may break the chain)."""
    import heinfer
    from heinfer.program.format import load

    model = _leading_functions_net()
    rng = np.random.default_rng(7)
    cal, x = rng.normal(0, 2, (64, 1, 8, 8)), rng.normal(0, 2, (6, 1, 8, 8))
    prog = heinfer.compile(model, mode=mode, protocol="two-party", calibration=cal)
    assert [f.kind for f in prog.pre] == ["sigmoid", "maxpool"]
    public = load(prog.public().to_bytes())
    assert [f.kind for f in public.pre] == ["sigmoid", "maxpool"] and public.id == prog.id
    out = heinfer.infer(prog, x).outputs
    want = om.run_onnxruntime(model, x.astype(np.float32))
    np.testing.assert_array_equal(out.argmax(1), want.argmax(1))
    assert np.abs(out - want).max() / np.abs(want).max() < 0.02
    # the input bound guards the first layer's input: sigmoid keeps it below 1 whatever x is
    assert prog.input_bound <= 4.0


def test_bfv_parameters_of_the_callers_choice_are_checked_at_compile_time() -> None:
    model = MODELS / "cryptonets_relu.onnx"
    default = heinfer.compile(model, mode="latency", protocol="two-party", calibration=CAL)
    wide = {"log_n": 13, "log_q": [54, 54, 54], "log_p": [54], "plain_modulus": 1_032_193, "security": 128}
    prog = heinfer.compile(model, mode="latency", protocol="two-party", calibration=CAL, bfv=wide)
    assert prog.bfv == wide and max(s.flood_bits for s in prog.segments) == max(s.flood_bits for s in default.segments)
    # the same fixed-point plan mod the same p: the same integers whatever the ciphertext modulus
    np.testing.assert_array_equal(heinfer.infer(prog, DIGITS[:1]).outputs, heinfer.infer(default, DIGITS[:1]).outputs)
    for bad, match in (
        ({**wide, "log_n": 14}, "p ≡ 1 \\(mod 2N = 32768\\)"),  # p = 1,032,193 is 1 mod 8,192 only
        ({**wide, "log_q": [60, 60, 60]}, "insecure parameters: log2\\(QP\\) = 234"),  # above 218 bits at N = 2^13
        ({"log_n": 13}, "bfv must be a dict with the keys"),
    ):
        with pytest.raises(heinfer.HeinferError, match=match):
            heinfer.compile(model, mode="latency", protocol="two-party", calibration=CAL, bfv=bad)
