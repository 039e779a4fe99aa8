"""Two-party programs in the program format (kinds 2 and 3): round trips, the public part
without weights, and hostile bytes refused with a SerializationError that names the problem."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer.errors import SerializationError
from heinfer.program.format import _HEAD, FORMAT_VERSION, MAGIC, _section
from heinfer.program.two_party_codec import two_party_public_to_json, two_party_weights_to_json

MODELS = Path(__file__).resolve().parents[3] / "models"


@pytest.fixture(scope="module")
def prog():
    cal = np.load(MODELS / "digits_test.npz")["x"][100:164]
    return heinfer.compile(MODELS / "mnist_d.onnx", mode="latency", protocol="two-party", calibration=cal)


def _pack(kind: int, *sections: tuple[dict, dict]) -> bytes:
    body = b"".join(_section(m, a) for m, a in sections)
    return _HEAD.pack(MAGIC, FORMAT_VERSION, kind, len(body)) + zlib.compress(body, 6)


def test_round_trip_keeps_every_field(prog) -> None:
    back = heinfer.load_program(prog.to_bytes())
    assert back.id == prog.id and back.bfv == prog.bfv and back.rotation_steps == prog.rotation_steps
    assert (back.input_frac, back.output_frac, back.input_bound) == (prog.input_frac, prog.output_frac, prog.input_bound)
    for a, b in zip(back.segments, prog.segments):
        assert np.array_equal(a.gather, b.gather) and a.flood_bits == b.flood_bits
        assert np.array_equal(a.output.ct, b.output.ct) and np.array_equal(a.output.slot, b.output.slot)
    for a, b in zip(back.steps, prog.steps):
        assert (a.kind, a.shift) == (b.kind, b.shift) and np.array_equal(a.groups, b.groups)
    for a, b in zip(back.layers, prog.layers):
        assert np.array_equal(a.vectors, b.vectors) and np.array_equal(a.terms, b.terms)
    assert heinfer.load_program(prog.to_bytes()).to_bytes() == prog.to_bytes()  # canonical


def test_square_steps_round_trip_and_bad_ones_are_refused() -> None:
    cal = np.load(MODELS / "digits_test.npz")["x"][100:164]
    prog = heinfer.compile(MODELS / "mnist_a.onnx", mode="latency", protocol="two-party", calibration=cal)
    back = heinfer.load_program(prog.public().to_bytes())
    assert [s.kind for s in back.steps] == ["square", "square"] and back.squared_input(1) and not back.squared_input(0)
    assert back.id == prog.id
    # its hybrid layers' folds run on the shares: public, in the segments
    assert [s.fold for s in back.segments] == [s.fold for s in prog.segments] and any(s.fold for s in back.segments)
    man, arrays = two_party_public_to_json(prog.public())
    k = next(i for i, s in enumerate(prog.segments) if s.fold)
    overlapping = dict(man, segments=[dict(s, fold=[1]) if i == k else s for i, s in enumerate(man["segments"])])
    with pytest.raises(SerializationError, match="folds on shares: an orbit holds another output"):
        heinfer.load_program(_pack(2, (overlapping, arrays)))
    # row pairs: a squared input (a² and a in the rows) cannot also pair its inputs; one input
    # has nothing to pair; a flag is a bool
    assert prog.squared_input(1) and not prog.segments[1].row_pairs
    paired = dict(man, segments=[dict(s, row_pairs=True) if i == 1 else s for i, s in enumerate(man["segments"])])
    two = dict(arrays)
    two["seg1.gather"] = np.vstack([arrays["seg1.gather"], np.full_like(arrays["seg1.gather"][:1], -1)])
    with pytest.raises(SerializationError, match="cannot travel in row pairs"):
        heinfer.load_program(_pack(2, (paired, two)))
    if prog.segments[1].n_inputs < 2:
        with pytest.raises(SerializationError, match="two inputs or more"):
            heinfer.load_program(_pack(2, (paired, arrays)))
    flagged = dict(man, segments=[dict(s, row_pairs=1) if i == 1 else s for i, s in enumerate(man["segments"])])
    with pytest.raises(SerializationError, match="row pairs"):
        heinfer.load_program(_pack(2, (flagged, two)))
    arrays["step0.groups"] = np.zeros((64, 2), dtype=np.int64)  # a square has one value per instance
    with pytest.raises(SerializationError, match="windows of 2 values"):
        heinfer.load_program(_pack(2, (man, arrays)))


def test_clips_and_kept_values_round_trip_and_bad_ones_are_refused() -> None:
    """A residual network's steps: ReLU6-style clips (their integer bounds) and the skip's
    values passing through (``keep``) survive the format; forged ones are refused."""
    from protocol.residual_models import residual_model

    x = np.random.default_rng(1).normal(0, 1, (64, 16))
    prog = heinfer.compile(residual_model("clip"), mode="latency", protocol="two-party", calibration=x)
    back = heinfer.load_program(prog.public().to_bytes())
    assert back.id == prog.id
    for a, b in zip(back.steps, prog.steps):
        assert (a.kind, a.lo, a.hi, a.keep) == (b.kind, b.lo, b.hi, b.keep) and np.array_equal(a.groups, b.groups)
    assert back.steps[0].keep == (24, 0) and back.steps[0].kind == "clip"
    man, arrays = two_party_public_to_json(prog.public())
    st0 = man["steps"][0]
    p = prog.plain_modulus
    for forged, what in (
        (dict(st0, lo=st0["hi"] + 1), "clips to"),  # lo > hi
        (dict(st0, hi=p), "clips to"),  # beyond what the circuit holds
        (dict(st0, keep=[24, 24]), "keeps"),  # every value kept
        (dict(st0, keep=[-1, 0]), "keeps"),
        (dict(st0, keep=[24]), "kept values"),
        (dict(st0, kind="square"), "keeps"),  # a square's values cannot pass through
        (dict(st0, keep=[25, 0]), "indexes outside"),  # a window reads a kept value
    ):
        bad = dict(man, steps=[forged] + man["steps"][1:])
        with pytest.raises(SerializationError, match=what):
            heinfer.load_program(_pack(2, (bad, arrays)))


def test_row_pairs_round_trip() -> None:
    """CryptoNets-ReLU's first layer takes LoLa's expanded input, 7 slot vectors: they travel
    two per ciphertext, and the flag survives the format."""
    cal = np.load(MODELS / "digits_test.npz")["x"][100:164]
    prog = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=cal)
    back = heinfer.load_program(prog.public().to_bytes())
    assert back.segments[0].row_pairs and back.segments[0].n_inputs == 7 and back.segments[0].n_input_cts == 4
    assert [s.row_pairs for s in back.segments] == [s.row_pairs for s in prog.segments] and any(back.rows_summed(k) for k in range(len(back.segments)))


def test_the_public_part_has_no_weights(prog) -> None:
    data = prog.public().to_bytes()
    pub = heinfer.load_program(data)
    assert pub.is_public and pub.layers is None and pub.id == prog.id
    _, arrays = two_party_public_to_json(pub)
    _, weights = two_party_weights_to_json(prog)
    assert weights and not set(arrays) & set(weights)
    # the weights are most of the full program (MNIST-D: 52 KB public with LoLa's expanded
    # input for layer 0, 187 KB full)
    assert len(data) < len(prog.to_bytes()) / 3


def test_hostile_bytes_are_refused(prog) -> None:
    data = prog.to_bytes()
    with pytest.raises(SerializationError):
        heinfer.load_program(data[:-10])
    m, a = two_party_public_to_json(prog.public())
    w_m, w_a = two_party_weights_to_json(prog)
    bad = dict(a)
    bad["seg0.gather"] = np.full_like(a["seg0.gather"], 10**9)
    with pytest.raises(SerializationError, match="gather map indexes outside"):
        heinfer.load_program(_pack(2, (m, bad)))
    bad = dict(a)
    bad["step0.groups"] = a["step0.groups"] + 10**6
    with pytest.raises(SerializationError, match="windows indexes outside"):
        heinfer.load_program(_pack(2, (m, bad)))
    m2 = dict(m, steps=m["steps"][:-1])
    with pytest.raises(SerializationError):
        heinfer.load_program(_pack(2, (m2, a)))
    w_bad = dict(w_a)
    w_bad["layer0.vectors"] = w_a["layer0.vectors"] + 0.5
    with pytest.raises(SerializationError, match="not integers"):
        heinfer.load_program(_pack(3, (m, a), (w_m, w_bad)))
    with pytest.raises(SerializationError, match="kind"):
        heinfer.load_program(data[:10] + struct.pack("<B", 7) + data[11:])
