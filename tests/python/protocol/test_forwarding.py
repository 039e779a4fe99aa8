"""A server whose executor forwards bytes (``run_serialized``, as :class:`heinfer.cluster.RayExecutor`
does) checks every input in full without decoding it (``CiphertextBatch.check_bytes``): it
refuses exactly what a decoding server refuses, before the executor sees anything, and
answers good queries with the same bytes."""

from __future__ import annotations

from functools import cache

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from heinfer import _native
from heinfer.program import Program
from heinfer.protocol import Client, Server
from heinfer.protocol.messages import decode
from heinfer.runtime.executor import Executor
from protocol.forge import payload as _payload
from protocol.forge import reencode as _reencode

BAD = (heinfer.ProtocolError, heinfer.SerializationError)


class Forwarding:
    """An executor that takes its inputs as bytes and decodes them itself (as a Ray worker
    does); :meth:`run` must never be called by a server that forwards."""

    def __init__(self, program: Program) -> None:
        self.inner = Executor(program)
        self.program, self.baseline, self.setup_seconds = program, self.inner.baseline, 0.0
        self.calls = 0

    def run(self, *args):
        raise AssertionError("the server decoded an input it should have forwarded")

    def run_serialized(self, k: int, parts: list[bytes], count: int, relin, galois, drop_bits=None):
        self.calls += 1
        params = self.inner.params
        batch = _native.CiphertextBatch.concat([_native.CiphertextBatch.from_bytes(params, p, len(p), count) for p in parts], consume=True)
        assert len(batch) == count
        return self.inner.run(k, batch, relin, galois)


@cache
def _model(name: str) -> bytes:
    return {"relu": lambda: om.mlp((8, 16, 4), act="relu", seed=1), "square-relu": om.squares_then_relu}[name]()


@cache
def _program(name: str) -> Program:
    return heinfer.compile(_model(name), calibration=om.random_input((8,), 64, seed=11))


def _parties(name: str) -> tuple[Client, Server, Server, Forwarding, str, str]:
    prog = _program(name)
    client, plain = Client(prog.public()), Server(prog)
    fwd_ex = Forwarding(prog)
    fwd = Server(prog, executor=fwd_ex)
    keys = client.keys_message()
    return client, plain, fwd, fwd_ex, plain.open_session(keys), fwd.open_session(keys)


def _body(message: bytes) -> bytes:
    return _payload(message) if decode(message)[0] != "result" else decode(message)[1].ciphertexts


@pytest.mark.parametrize("name", ["relu", "square-relu"])
def test_a_forwarding_server_answers_with_the_decoding_servers_bytes(name: str) -> None:
    client, plain, fwd, fwd_ex, s1, s2 = _parties(name)
    x = om.random_input((8,), 5, seed=3)
    query = client.query_message(s1, x)
    a, b = plain.begin(query), fwd.begin(_reencode(query, session=s2))
    while decode(a)[0] == "step":
        assert _body(a) == _body(b)
        reply = client.reply_message(a)
        a = plain.resume(reply)
        b = fwd.resume(_reencode(reply, query=decode(b)[1].query))
    assert decode(b)[0] == "result" and _body(a) == _body(b)
    assert fwd_ex.calls == len(_program(name).segments)
    prog = _program(name)
    tol = prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision
    np.testing.assert_allclose(client.decode_result(a), om.run_onnxruntime(_model(name), x), atol=tol)


def _corruptions(client: Client, prog: Program, good: bytes) -> dict[str, bytes]:
    """Input payloads a server must refuse, each named."""
    batch = _native.CiphertextBatch.from_bytes(client.params, good, len(good), 1 << 16)
    n = len(batch)
    seg = prog.segments[0]
    body = bytearray(good)
    out = {
        "truncated": good[:-1],
        "trailing byte": good + b"\0",
        "too few": batch.take(list(range(n - 1))).to_bytes(),
        "too many": batch.take([i % n for i in range(n + 1)]).to_bytes(),
        "bad magic": b"XXXX" + good[4:],
        "forged count": good[:6] + (n + 1).to_bytes(4, "little") + good[10:],
        "scale": _native.encrypt_batch(client._session_key.kg, np.zeros((n, prog.slots), complex), seg.input_scale * 2, seg.input_level).to_bytes(),
    }
    if seg.input_level > 0:
        out["level"] = _native.encrypt_batch(client._session_key.kg, np.zeros((n, prog.slots), complex), seg.input_scale, seg.input_level - 1).to_bytes()
    # residues at or above their modulus, in the first and the last ciphertext
    for where, at in (("first", 60), ("last", len(body) - 48)):
        bad = bytearray(body)
        bad[at : at + 16] = b"\xff" * 16  # holds a whole residue of any width, all ones
        out[f"residue in the {where} ciphertext"] = bytes(bad)
    return out


@pytest.mark.parametrize("name", ["relu", "square-relu"])
def test_a_forwarding_server_refuses_what_a_decoding_one_refuses_before_running(name: str) -> None:
    client, plain, fwd, fwd_ex, s1, s2 = _parties(name)
    prog = _program(name)
    query = client.query_message(s1, om.random_input((8,), 4, seed=5))
    for case, payload in _corruptions(client, prog, _payload(query)).items():
        with pytest.raises(BAD) as e1:
            plain.begin(_reencode(query, ciphertexts=payload))
            pytest.fail(f"{case}: accepted")
        with pytest.raises(BAD) as e2:
            fwd.begin(_reencode(query, session=s2, ciphertexts=payload))
        assert type(e1.value) is type(e2.value), (case, e1.value, e2.value)
        assert fwd_ex.calls == 0, case
    # and it still answers
    b = fwd.begin(_reencode(query, session=s2))
    assert fwd_ex.calls == 1 and decode(b)[0] in ("step", "result")
