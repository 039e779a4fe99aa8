"""A graph-shaped program (a residual block) against a malicious server: the skip rides in
the step beside the branch, and the client checks the whole step — count, scale — from the
public program before decrypting, as for chains."""

from __future__ import annotations

import heinfer
import numpy as np
import pytest
from compiler import dag_models as dm
from compiler import onnx_models as om
from heinfer import _native
from heinfer.protocol.messages import decode
from protocol.forge import ANY_ROUNDING
from protocol.forge import reencode as _forge

SHAPE = dm.DAG_MODELS["residual-block"][1]


@pytest.fixture(scope="module")
def program() -> heinfer.Program:
    return heinfer.compile(dm.residual_block(), mode="throughput", calibration=om.random_input(SHAPE, 64, seed=11))


X = om.random_input(SHAPE, 4, seed=3)


@pytest.fixture()
def step(program):
    client, server = heinfer.Client(program.public()), heinfer.Server(program)
    session = server.open_session(client.keys_message())
    return client, server, server.begin(client.query_message(session, X))


def _batch(params, message: bytes) -> _native.CiphertextBatch:
    return _native.CiphertextBatch.from_bytes(params, decode(message)[1].ciphertexts, 1 << 30, 1 << 20, ANY_ROUNDING)


def test_the_step_carries_the_branch_and_the_skip(program, step) -> None:
    client, server, msg = step
    assert len(_batch(client.params, msg)) == program.segments[0].n_output_cts == 100
    rounds = 0
    while decode(msg)[0] == "step":
        msg = server.resume(client.reply_message(msg))
        rounds += 1
    assert rounds == len(program.steps) == 2
    got = client.decode_result(msg)
    np.testing.assert_allclose(got, om.run_onnxruntime(dm.residual_block(), X), atol=program.meta["predicted_error"][-1] + 4 * program.segments[-1].precision)


def test_a_step_without_the_skip_is_refused(step) -> None:
    """Defense: the count (branch + skip) comes from the public program."""
    client, _, msg = step
    batch = _batch(client.params, msg)
    forged = batch.take(list(range(50)))  # the branch only
    with pytest.raises((heinfer.ProtocolError, heinfer.SerializationError), match="ciphertexts"):
        client.reply_message(_forge(msg, ciphertexts=forged.to_bytes()))


def test_a_step_at_another_scale_is_refused(step) -> None:
    """Defense: one exact scale for the whole step, branch and skip alike: a batch cannot even
    hold two scales, and one at another scale than the program's is refused."""
    client, _, msg = step
    cts = _batch(client.params, msg).to_list()
    for c in cts[:50]:  # the skip's ciphertexts come first
        c.set_scale(c.scale * 2.0)
    with pytest.raises(heinfer.OperandError, match="differs from ciphertext 0"):
        _native.CiphertextBatch.from_list(cts)
    for c in cts[50:]:
        c.set_scale(c.scale * 2.0)
    with pytest.raises(heinfer.ProtocolError, match="scale"):
        client.reply_message(_forge(msg, ciphertexts=_native.CiphertextBatch.from_list(cts).to_bytes()))
