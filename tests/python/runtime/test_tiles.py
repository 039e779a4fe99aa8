"""A batch-axis segment's last layer computed in tiles of output rows: the same bytes as the
whole layer's, each tile computed once when the chunks come in order, the predicted peak
counting two tiles, and whole queries through the protocol with tiles in every segment."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer import _native
from heinfer.program.ops import Linear
from heinfer.program.rounding import output_drop_bits
from heinfer.protocol import Client, Server
from heinfer.protocol.chunks import bounds
from heinfer.runtime import tiles as tiles_mod
from heinfer.runtime.batch import peak_ciphertext_bytes, run_batch_segment
from heinfer.runtime.executor import Executor, native_params
from heinfer.runtime.tiles import TiledOutput, plan_tiles, tile_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402

SHAPE = (1, 8, 8)


@pytest.fixture(scope="module")
def program():
    """Conv (4 maps of 8×8: 256 outputs) → ReLU → dense 10: two batch-axis segments."""
    model = om.conv_net(SHAPE, channels=4, act="relu", classes=10, seed=21)
    return heinfer.compile(model, mode="throughput", calibration=om.random_input(SHAPE, 32, seed=22), batch_size=8)


def _ct_bytes(program, seg) -> int:
    return 2 * (seg.input_level + 1) * (1 << program.params["log_n"]) * 8


def _input(program, k: int, seed: int) -> _native.CiphertextBatch:
    """Segment ``k``'s input: fresh ciphertexts at its level and scale."""
    seg = program.segments[k]
    kg = _native.KeyGenerator(native_params(program.params))
    vals = np.random.default_rng(seed).uniform(-1, 1, (seg.in_size, program.batch_capacity))
    return _native.encrypt_batch_coefficients(kg, vals, seg.input_scale, seg.input_level)


def test_tiles_give_the_whole_layers_bytes(program) -> None:
    seg, log_n = program.segments[0], program.params["log_n"]
    ex = Executor(program)
    assert ex.tiles == {}  # 256 small ciphertexts: no tiles by default
    rows = 40
    plan = plan_tiles(seg, program.layers, log_n, tile_bytes=rows * 2 * _ct_bytes(program, seg) // 2)
    assert plan is not None
    idx, parts = plan
    assert isinstance(seg.ops[idx], Linear) and [(a, b) for a, b, _, _ in parts][:2] == [(0, 40), (40, 80)]
    assert parts[-1][1] == seg.out_size == 256
    batch = _input(program, 0, seed=1)
    whole = run_batch_segment(seg, batch.take(list(range(len(batch)))), program.layers, ex.built, None)
    tiled = run_batch_segment(seg, batch, program.layers, ex.built, None, tiles=plan)
    assert isinstance(tiled, TiledOutput) and len(tiled) == len(whole) == 256
    # chunks in order, some across two tiles: the bytes of the whole layer, each tile once
    for i in range(6):
        a, b = bounds(256, 6, i)
        assert tiled.to_bytes(a, b) == whole.to_bytes(a, b), f"chunk {i}"
    assert tiled.computed == len(parts)
    assert tiled.to_bytes() == whole.to_bytes()  # the whole output again (tiles recomputed)
    # rounded as the protocol sends it: the same bytes too, across tile boundaries
    drop = output_drop_bits(native_params(program.params), program, 0)
    assert any(drop)
    for a, b in [(0, 40), (30, 90), (200, 256)]:
        assert tiled.to_bytes(a, b, drop_bits=drop) == whole.to_bytes(a, b, drop_bits=drop), (a, b)
    # after a message header (frame), in one tile and across two
    for a, b in [(0, 40), (30, 90)]:
        want = whole.to_bytes(a, b, drop_bits=drop)
        assert tiled.to_bytes(a, b, drop_bits=drop, frame=lambda n: b"head%d" % n) == b"head%d" % len(want) + want
    with pytest.raises(ValueError, match="ciphertexts 10:300 of 256"):
        tiled.to_bytes(10, 300)


def test_the_peak_counts_two_tiles(program, monkeypatch) -> None:
    seg, log_n = program.segments[0], program.params["log_n"]
    per = _ct_bytes(program, seg)
    untiled = peak_ciphertext_bytes(seg, program.layers, log_n)
    assert untiled == (seg.in_size + 256) * per
    monkeypatch.setattr(tiles_mod, "TILE_BYTES", 32 * per)
    assert tile_rows(seg, program.layers, log_n) == (0, 32)
    assert peak_ciphertext_bytes(seg, program.layers, log_n) == (seg.in_size + 64) * per
    assert peak_ciphertext_bytes(seg, program.layers, log_n, tiled=False) == untiled
    ex = Executor(program)
    assert sorted(ex.tiles) == [0] and ex.ciphertext_bytes < untiled
    # the baseline (naive kernel) runs whole layers, and is checked as such
    assert Executor(program, baseline=True).tiles == {}


@pytest.mark.parametrize("chunk_bytes", [None, 200_000])
def test_queries_with_tiled_segments_match_untiled_ones(program, monkeypatch, chunk_bytes) -> None:
    """Whole messages (every tile serialized into one) and chunks of a few ciphertexts (most
    within one tile, some across two): the same outputs as without tiles."""
    x = om.random_input(SHAPE, 8, seed=23)
    want = heinfer.infer(program, x).outputs
    monkeypatch.setattr(tiles_mod, "TILE_BYTES", 24 * _ct_bytes(program, program.segments[0]))
    server = Server(program)
    assert sorted(server.executor.tiles) == [0]
    client = Client(program.public())
    session = server.open_session(client.keys_message())
    sent = None
    for m in client.query_messages(session, x, chunk_bytes):
        sent = server.receive(m, chunk_bytes)
    while sent.kind == "step":
        replies = None
        for m in sent:
            replies = client.receive_step(m, chunk_bytes)
        for r in replies:
            sent = server.receive(r, chunk_bytes)
    (msg,) = list(sent)
    got = client.decode_result(msg)
    # two sessions' noise and the release's rounding (steps of 1.2e-4 here) differ; a wrong
    # row would be off by the logits' own size
    np.testing.assert_allclose(got, want, atol=2e-3)
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))
