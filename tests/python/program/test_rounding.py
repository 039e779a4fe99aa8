"""Rounded segment outputs (``heinfer.program.rounding``): fewer bytes, no more error than the
budget the module states (in both layouts, against the same outputs sent in full), and a
client that refuses a reply rounded more than its program allows."""

from __future__ import annotations

import math
from functools import cache

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from heinfer import _native
from heinfer.program.rounding import STEP_SHARE, output_drop_bits, output_rounding_std
from heinfer.protocol import Client, Server
from heinfer.protocol.layouts import decrypt_rows, decrypt_segment_output
from heinfer.protocol.messages import decode
from protocol.forge import ANY_ROUNDING


@cache
def _model(act: str = "relu") -> bytes:
    return om.mlp((8, 16, 4), act=act, seed=1)


@cache
def _program(mode: str, act: str = "relu"):
    return heinfer.compile(_model(act), mode=mode, calibration=om.random_input((8,), 64, seed=11))


def _outputs(mode: str, k: int = 0, act: str = "relu"):
    """Segment ``k``'s output for up to 6 items (``k = 0``: or the only segment), as the server
    computes it, with its client."""
    prog = _program(mode, act)
    client, server = Client(prog.public()), Server(prog)
    session = server.open_session(client.keys_message())
    x = om.random_input((8,), min(6, prog.batch_capacity), seed=5)
    message = client.query_message(session, x)
    q = client._queries[decode(message)[1].ref]
    batch = _native.CiphertextBatch.from_bytes(client.params, decode(message)[1].ciphertexts, 1 << 30, 1 << 16)
    keys = server._sessions[session]
    return prog, client, q, server.executor.run(k, batch, keys.relin, keys.galois), len(x)


def test_a_rounded_step_is_smaller_and_adds_no_more_than_its_budget() -> None:
    prog, client, q, out, n = _outputs("throughput")
    seg, nxt = prog.segments[0], prog.segments[1]
    drop = output_drop_bits(client.params, prog, 0)
    assert all(j > 0 for j in drop), drop
    full, rounded = out.to_bytes(), out.to_bytes(drop_bits=drop)
    assert len(rounded) < 0.9 * len(full), (len(rounded), len(full))

    def values(data: bytes) -> np.ndarray:
        batch = _native.CiphertextBatch.from_bytes(client.params, data, 1 << 30, 1 << 16, ANY_ROUNDING)
        return decrypt_segment_output(q.key.dec, seg, batch, n)

    diff = values(rounded) - values(full)
    got = float(np.sqrt(np.mean(diff**2)))
    # the budget in values: σ/Δ_out per coefficient, ×√N through the slots' embedding
    n_ring = 1 << int(prog.params["log_n"])
    embed = 1.0 if seg.layout.packing == "coeff" else math.sqrt(n_ring)
    budget = output_rounding_std(prog, 0) * embed / seg.output_scale
    assert 0 < got <= 1.2 * budget, (got, budget)
    # which is a quarter of the rounding the next encoding does to every value anyway
    next_rounding = (1.0 if nxt.layout.packing == "coeff" else math.sqrt(n_ring)) / (math.sqrt(12) * nxt.input_scale)
    assert got <= 1.2 * STEP_SHARE * next_rounding, (got, next_rounding)


def test_rounding_puts_no_offset_on_any_slot() -> None:
    """Dropped bits leave an error of mean zero in every coefficient. It had mean +1/2: the
    constant polynomial ``½·Σ_k X^k`` is ``≈ N/π`` at slot 0's root, and times ``s(ζ_0)`` in
    ``c_1`` it put a key-dependent offset on slot 0 of every result — ~50 times the
    rounding's own error there with one bit dropped (``√(12N)/(π·2^j)``), 0.3–3 released
    precisions on a latency network's first output (2 bits dropped from ``c_1``), the same
    for every query of a session."""
    prog, client, q, out, _ = _outputs("latency", act="square")  # one segment: the result

    def slots(data: bytes) -> np.ndarray:
        batch = _native.CiphertextBatch.from_bytes(client.params, data, 1 << 30, 1 << 16, ANY_ROUNDING)
        return decrypt_rows(q.key.dec, prog.segments[0], batch)

    full = slots(out.to_bytes())
    for drop in ([1, 1], [2, 2]):
        diff = (slots(out.to_bytes(drop_bits=drop)) - full).ravel()
        rms = float(np.sqrt(np.mean(np.abs(diff) ** 2)))
        # slot j's error scales with |s(ζ_j)| (exponential |s(ζ_j)|²): 8× the RMS has a
        # chance below 1e-6 in a given slot; slot 0's offset was 50× (25×) it, ×√a for the
        # key's a ~ Exp(1)
        assert rms > 0 and abs(diff[0]) < 8 * rms, (drop, abs(diff[0]) / rms)


def test_a_step_without_slack_travels_in_full() -> None:
    """Latency mode plans a step's output at the next segment's input scale: a quarter of the
    next encoding's rounding is below one unit, so nothing is dropped."""
    prog, client, _, out, _ = _outputs("latency")
    assert prog.segments[0].output_scale <= prog.segments[1].input_scale
    drop = output_drop_bits(client.params, prog, 0)
    assert drop == [0, 0]
    assert out.to_bytes(drop_bits=drop) == out.to_bytes()


@pytest.mark.parametrize("mode", ["throughput", "latency"])
def test_rounded_queries_answer_as_before(mode: str) -> None:
    prog = _program(mode)
    x = om.random_input((8,), min(5, prog.batch_capacity), seed=9)
    got, want = heinfer.infer(prog, x).outputs, om.run_onnxruntime(_model(), x)
    if mode == "throughput":  # the compiler's predicted error and the client's release
        tol = prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision
    else:  # as the latency protocol's tests
        tol = 1e-3 * max(1.0, np.abs(want).max())
    np.testing.assert_allclose(got, want, atol=tol)


def test_the_client_refuses_a_step_rounded_more_than_its_program_allows() -> None:
    prog = _program("throughput")
    client, server = Client(prog.public()), Server(prog)
    session = server.open_session(client.keys_message())
    server._drop[0] = [server._drop[0][0] + 1, *server._drop[0][1:]]
    step = server.begin(client.query_message(session, om.random_input((8,), 3, seed=2)))
    with pytest.raises(heinfer.SerializationError, match="drops"):
        client.reply_message(step)


def test_the_client_accepts_a_step_sent_in_full() -> None:
    prog = _program("throughput")
    client, server = Client(prog.public()), Server(prog, round_outputs=False)
    session = server.open_session(client.keys_message())
    x = om.random_input((8,), 3, seed=2)
    reply = server.begin(client.query_message(session, x))
    while decode(reply)[0] == "step":
        reply = server.resume(client.reply_message(reply))
    tol = prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision
    np.testing.assert_allclose(client.decode_result(reply), om.run_onnxruntime(_model(), x), atol=tol)


def test_nothing_is_rounded_where_q_is_too_wide_or_the_budget_is_below_one() -> None:
    prog = _program("throughput")
    params = Client(prog.public()).params
    assert params.rounding_drop_bits(0, 2, 0.5) == [0, 0]
    assert all(j > 0 for j in params.rounding_drop_bits(0, 2, 1e6))
    with pytest.raises(heinfer.OperandError):
        params.rounding_drop_bits(0, 6, 1.0)  # 2 to 5 parts
