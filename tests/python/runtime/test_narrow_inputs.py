"""Queries decoded into 32-bit words (``CiphertextBatch.from_bytes(..., narrow=True)``): the
linear kernels read them as they are, every other operation widens them first, and whole
queries give the same outputs, bit for bit, as with 64-bit words."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer import _native
from heinfer.errors import OperandError, SerializationError
from heinfer.protocol import Client, Server
from heinfer.protocol.messages import decode_bulk
from heinfer.runtime import executor as executor_mod
from heinfer.runtime.executor import Executor, native_params, reads_narrow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402

SHAPE = (1, 8, 8)


@pytest.fixture(scope="module")
def program():
    """Conv → x² → dense 10 at N = 2^13 with 30-bit primes: one batch-axis segment, a chain."""
    model = om.conv_net(SHAPE, channels=4, act="square", classes=10, seed=31)
    prog = heinfer.compile(model, mode="throughput", calibration=om.random_input(SHAPE, 32, seed=32), batch_size=8)
    assert max(prog.params["log_q"]) < 32
    return prog


@pytest.fixture(scope="module")
def kit(program):
    """``(params, key generator, segment 0's input serialized, its count)``."""
    seg = program.segments[0]
    params = native_params(program.params)
    kg = _native.KeyGenerator(params)
    vals = np.random.default_rng(33).uniform(-1, 1, (seg.in_size, program.batch_capacity))
    data = _native.encrypt_batch_coefficients(kg, vals, seg.input_scale, seg.input_level).to_bytes()
    return params, kg, data, seg.in_size


def _decode(kit, narrow: bool, data=None, count=None) -> _native.CiphertextBatch:
    params, _, whole, n = kit
    data = whole if data is None else data
    return _native.CiphertextBatch.from_bytes(params, data, 2 * len(data), n if count is None else count, narrow=narrow)


def _values(kit, batch) -> np.ndarray:
    params, kg, _, _ = kit
    return _native.decrypt_batch_coefficients(_native.Decryptor(params, kg.secret_key()), batch)


def test_a_narrow_batch_holds_the_same_ciphertexts(kit) -> None:
    wide, narrow = _decode(kit, False), _decode(kit, True)
    assert narrow.is_narrow and not wide.is_narrow and "narrow" in repr(narrow)
    assert (len(narrow), narrow.level, narrow.size, narrow.scale) == (len(wide), wide.level, wide.size, wide.scale)
    np.testing.assert_array_equal(_values(kit, narrow), _values(kit, wide))
    # one ciphertext, a gather and the list are the wide ones' residues
    assert narrow[3].to_bytes() == wide[3].to_bytes() != wide[4].to_bytes()
    assert narrow.take([5, 0, 5]).to_bytes() == wide.take([5, 0, 5]).to_bytes()
    assert narrow.to_bytes(2, 7) == wide.to_bytes(2, 7)  # a chunk widens only its ciphertexts
    assert [c.to_bytes() for c in narrow.to_list()] == [c.to_bytes() for c in wide.to_list()]
    assert narrow.is_narrow  # reading never widens the batch itself


def test_the_kernels_read_narrow_batches_bit_for_bit(program, kit) -> None:
    seg, ex = program.segments[0], Executor(program)
    (l1, b1), (l2, b2) = ex.built[seg.ops[0].layer], ex.built[seg.ops[2].layer]
    packing = seg.layout.packing
    for square in (False, True):
        want = l1.apply(_decode(kit, False), b1, packing, square).to_bytes()
        assert l1.apply(_decode(kit, True), b1, packing, square).to_bytes() == want
    want = _native.square_chain(l1, l2, _decode(kit, False), b1, b2, packing).to_bytes()
    assert _native.square_chain(l1, l2, _decode(kit, True), b1, b2, packing).to_bytes() == want


def test_other_operations_widen_the_batch_first(kit) -> None:
    wide, narrow = _decode(kit, False), _decode(kit, True)
    _native.batch_square(wide)
    _native.batch_square(narrow)
    assert not narrow.is_narrow
    assert narrow.to_bytes() == wide.to_bytes()


def test_chunks_join_narrow_and_mixed(kit) -> None:
    params, _, data, n = kit
    wide = _decode(kit, False)
    halves = [wide.to_bytes(0, n // 2), wide.to_bytes(n // 2, n)]
    narrow = [_decode(kit, True, h, n) for h in halves]
    kept = _native.CiphertextBatch.concat(narrow)  # copies: the inputs stay usable
    joined = _native.CiphertextBatch.concat(narrow, consume=True)
    assert joined.is_narrow and kept.is_narrow and len(joined) == n == len(kept)
    assert joined.to_bytes() == wide.to_bytes() == kept.to_bytes()
    mixed = _native.CiphertextBatch.concat([_decode(kit, True, halves[0], n), _decode(kit, False, halves[1], n)])
    assert not mixed.is_narrow and mixed.to_bytes() == wide.to_bytes()


def test_narrow_decoding_refuses_what_decoding_refuses(kit) -> None:
    params, _, data, n = kit
    for bad in (data[:-1], data[:100], b"HEBT" + data[4:20]):
        with pytest.raises(SerializationError):
            _decode(kit, True, bad)
    with pytest.raises(SerializationError, match="ciphertexts"):
        _decode(kit, True, count=n - 1)
    with pytest.raises(OperandError, match="narrow or max_drop_bits"):
        _native.CiphertextBatch.from_bytes(params, data, 2 * len(data), n, [0, 0], narrow=True)


def test_primes_of_32_bits_or_more_stay_wide() -> None:
    model = om.conv_net(SHAPE, channels=4, act="relu", classes=10, seed=21)
    prog = heinfer.compile(model, mode="throughput", calibration=om.random_input(SHAPE, 32, seed=22), batch_size=8)
    assert max(prog.params["log_q"]) >= 32
    seg = prog.segments[0]
    kg = _native.KeyGenerator(native_params(prog.params))
    vals = np.zeros((seg.in_size, prog.batch_capacity))
    data = _native.encrypt_batch_coefficients(kg, vals, seg.input_scale, seg.input_level).to_bytes()
    batch = _native.CiphertextBatch.from_bytes(native_params(prog.params), data, 2 * len(data), seg.in_size, narrow=True)
    assert not batch.is_narrow and len(batch) == seg.in_size


def test_which_segments_read_narrow(program) -> None:
    assert reads_narrow(program, 0) and Executor(program).reads_narrow(0)
    assert not reads_narrow(program, 0, baseline=True)
    lat = heinfer.compile(om.conv_net(SHAPE, channels=2, act="square", classes=10, seed=34), mode="latency", calibration=om.random_input(SHAPE, 8, seed=35))
    assert not any(reads_narrow(lat, k) for k in range(len(lat.segments)))


@pytest.mark.parametrize("chunk_bytes", [None, 200_000])
def test_queries_decoded_narrow_give_the_same_outputs(program, monkeypatch, chunk_bytes) -> None:
    """The same query messages answered with 32-bit and with 64-bit words: the same result
    ciphertexts, byte for byte (one session: the same keys and inputs)."""
    x = om.random_input(SHAPE, 8, seed=36)
    server, client = Server(program), Client(program.public())
    session = server.open_session(client.keys_message())
    query = list(client.query_messages(session, x, chunk_bytes))
    decoded = []
    real = executor_mod.run_batch_segment

    def spy(seg, batch, *args, **kw):
        decoded.append(batch.is_narrow)
        return real(seg, batch, *args, **kw)

    monkeypatch.setattr(executor_mod, "run_batch_segment", spy)
    outs = []
    for narrow in (True, False):
        monkeypatch.setattr(Executor, "reads_narrow", lambda self, k, n=narrow: n)
        decoded.clear()
        for m in query:
            sent = server.receive(m, chunk_bytes)
        assert decoded and set(decoded) == {narrow}
        (msg,) = list(sent)
        outs.append(bytes(decode_bulk(msg, "result")[2]))
    assert outs[0] == outs[1]
    got, want = client.decode_result(msg), heinfer.infer(program, x).outputs
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))
