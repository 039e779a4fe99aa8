"""A garbled-circuit step over its circuits (``heinfer.protocol.two_party_steps``): values that
pass through a step (a residual skip of either sign) are truncated by a circuit of their own,
not given the layer's function; ONNX ``Clip`` (ReLU6) has its circuit; joined messages split
only into the parts the program names."""

from __future__ import annotations

import numpy as np
import pytest

import heinfer
from heinfer.compiler.simulate_two_party import simulate_two_party
from heinfer.errors import ProtocolError
from heinfer.protocol.two_party_steps import join, split
from protocol.residual_models import pooled_skip_model, reference, residual_model

X = np.random.default_rng(1).normal(0, 1, (300, 16))


@pytest.mark.parametrize("mode", ["latency", "throughput"])
@pytest.mark.parametrize("act", ["relu", "clip"])
def test_a_skip_of_either_sign_passes_through_the_step(act: str, mode: str) -> None:
    want, wrong = reference(act, X), reference(act, X, skip_activated=True)
    scale = np.abs(want).max()
    assert np.abs(wrong - want).max() > 0.3 * scale  # the test tells the two apart
    prog = heinfer.compile(residual_model(act), mode=mode, protocol="two-party", calibration=X[:64], batch_size=4)
    first = prog.steps[0]
    assert first.kind == act and first.keep == (24, 0) and first.instances == 24  # h kept beside act(h)
    sim = simulate_two_party(prog, X)
    assert np.abs(sim - want).max() < 0.03 * scale  # 20-bit fixed point
    assert (sim.argmax(1) == want.argmax(1)).mean() > 0.97
    got = heinfer.infer(prog, X[:4]).outputs  # the protocol computes the simulation exactly
    np.testing.assert_array_equal(got, sim[:4])


@pytest.mark.parametrize("mode", ["latency", "throughput"])
def test_values_kept_beside_a_max_pool_pass_through_it(mode: str) -> None:
    """A convolution's output read by a max-pool step and again after it: the max-pool's
    windows index the pooled slice (offset past the kept values), the kept values travel in
    truncation circuits, and the protocol computes the exact simulation, close to the model."""
    import onnxruntime as ort

    model = pooled_skip_model()
    x = np.random.default_rng(4).normal(0, 1, (200, 1, 4, 4))
    want = ort.InferenceSession(model).run(None, {"x": x.astype(np.float32)})[0]
    prog = heinfer.compile(model, mode=mode, protocol="two-party", calibration=x[:64], batch_size=4)
    st = prog.steps[0]
    assert (st.kind, st.keep, st.instances, st.window) == ("maxpool_relu", (32, 0), 8, 4) and st.groups.min() >= 32
    sim = simulate_two_party(prog, x)
    assert np.abs(sim - want).max() < 0.04 * np.abs(want).max()
    np.testing.assert_array_equal(heinfer.infer(prog, x[:4]).outputs, sim[:4])


def test_the_client_decrypts_the_kept_values_only_as_uniform_shares() -> None:
    """Privacy: the skip that passes through the first step is masked like the activations —
    the client's decrypted shares of it, over a 256-item query, are uniform mod p (chi-square
    over 16 buckets; the skip's values themselves are small integers and would fail badly)."""
    from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer

    x = np.random.default_rng(2).normal(0, 1, (256, 16))
    prog = heinfer.compile(residual_model("relu"), mode="throughput", protocol="two-party", calibration=X[:64], batch_size=256)
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    client.offline_finish(server.offline(client.offline_request(len(x))))
    shares = client._decrypt(0, server.layer(0, client.query(x)))  # items × out_size residues
    kept = shares[:, prog.steps[0].kept].reshape(-1).astype(np.float64)
    p = prog.plain_modulus
    counts = np.bincount((kept * 16 / p).astype(int), minlength=16)
    chi2 = ((counts - len(kept) / 16) ** 2 / (len(kept) / 16)).sum()
    assert len(kept) == 256 * 24 and chi2 < 73.6, f"chi-square {chi2:.1f} over 15 degrees of freedom"


def test_clip_bounds_are_the_layer_s_integers_with_the_rounding_s_half_ulp() -> None:
    prog = heinfer.compile(residual_model("clip"), mode="latency", protocol="two-party", calibration=X[:64])
    for st in prog.steps:
        h = 1 << (st.shift - 1)
        frac = round(np.log2((st.hi - h) / 3))  # hi = 3·2^f + h
        assert st.lo == h and st.hi == 3 * 2**frac + h


def test_joined_messages_split_only_into_the_named_parts() -> None:
    assert join([b"abc"]) == b"abc" and split(b"abc", 1, "m") == [b"abc"]  # one part: as it is
    blob = join([b"abc", b"", b"xy"])
    assert split(blob, 3, "m") == [b"abc", b"", b"xy"]
    for bad, count, what in ((blob, 2, "bytes after"), (blob[:-1], 3, "claims"), (blob[:5], 3, "claims"), (b"\x01", 2, "truncated")):
        with pytest.raises(ProtocolError, match=what):
            split(bad, count, "m")


def test_the_offline_phase_streams_step_by_step_and_the_server_keeps_no_circuits() -> None:
    """``offline_steps`` garbles each step when its reply is taken and keeps none of them (a
    reply taken twice is refused); the query is ready only once every step has been sent; the
    client reads the replies one at a time and refuses too few or too many."""
    from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer

    prog = heinfer.compile(residual_model("relu"), mode="latency", protocol="two-party", calibration=X[:64])
    client = TwoPartyInferenceClient(prog.public())
    server = TwoPartyInferenceServer(prog, client.keys_message())
    client.finish_setup(server.setup_reply)
    replies = server.offline_steps(client.offline_request())
    first = next(replies)
    with pytest.raises(ProtocolError, match="offline phase"):  # not ready: a step is still to come
        server.layer(0, client.query(X[0]))
    rest = list(replies)
    assert len(rest) == len(prog.steps) - 1
    assert all(step._reply is None for step in server._steps)
    with pytest.raises(ProtocolError, match="already sent"):
        server._steps[0].take_reply()
    with pytest.raises(ProtocolError, match="got more"):
        client.offline_finish([first, *rest, first])
    client.offline_request()
    if len(prog.steps) > 1:
        with pytest.raises(ProtocolError, match="expected"):
            client.offline_finish(iter([first]))
