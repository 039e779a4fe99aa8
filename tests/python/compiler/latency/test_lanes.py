"""Several items per query in latency mode (``heinfer.compile(..., mode="latency", items=m)``,
:mod:`heinfer.compiler.latency.lanes`).

* The widening itself: a transform widened to ``m`` lanes, on ``m`` items interleaved slot by
  slot, gives each item's transform in its lane (random transforms with folds, replications,
  giant and baby steps and a bias);
* compiled programs: ``lanes`` and the batch capacity, gather maps and placements in lane 0,
  every rotation a multiple of the lanes; the layouts are searched for ``N/(2m)`` slots;
* encrypted queries of ``m`` items (fewer too) on the bundled models and small networks
  agree with onnxruntime as one-item queries do, item by item (so no item reads another's
  lane), and a program file keeps its lanes;
* what is refused: ``items`` not a power of two, more lanes than a ring can hold, lanes with
  the two-party protocol, a program whose gather map, placement, steps or plaintexts cross
  lanes (forged programs: the client and the server both validate).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from heinfer.compiler.latency.lanes import widen_gather, widen_placement, widen_transform
from heinfer.errors import CompileError, NotSupportedYetError
from heinfer.program.format import load
from heinfer.program.placement import Placement
from heinfer.program.transform import Transform

MODELS_DIR = Path(__file__).resolve().parents[4] / "models"


def _digits(start: int, n: int) -> np.ndarray:
    return np.load(MODELS_DIR / "digits_test.npz")["x"][start : start + n]


def _random_transform(rng: np.random.Generator, slots: int, n_in: int = 2, n_out: int = 2) -> Transform:
    """Terms ``(o, g, a, b)`` sorted, random vectors and bias, a fold and a replication."""
    terms = sorted({(int(rng.integers(n_out)), int(rng.integers(slots)), int(rng.integers(n_in)), int(rng.integers(slots))) for _ in range(9)})
    t = np.array(terms, dtype=np.int64)
    return Transform(
        n_in, n_out, slots, t, rng.normal(size=(len(t), slots)), rng.normal(size=(n_out, slots)),
        fold=(slots // 2,), replicate=(3,),
    )


@pytest.mark.parametrize("m", [2, 4, 8])
def test_a_widened_transform_runs_each_lane_as_its_own_item(m: int) -> None:
    rng = np.random.default_rng(m)
    t = _random_transform(rng, 16)
    items = rng.normal(size=(m, t.n_in, t.slots))
    wide = widen_transform(t, m)
    assert wide.slots == m * t.slots and wide.rotation_steps() == {s * m for s in t.rotation_steps()}
    x = np.zeros((t.n_in, wide.slots))
    for j in range(m):
        x[:, j::m] = items[j]
    y = wide.simulate(x)
    for j in range(m):
        np.testing.assert_allclose(y[:, j::m], t.simulate(items[j]), rtol=1e-12, atol=1e-12)


def test_widened_gather_and_placement_name_lane_zero() -> None:
    g = np.array([[0, -1, 2, 1]], dtype=np.int64)
    np.testing.assert_array_equal(widen_gather(g, 2), [[0, -1, -1, -1, 2, -1, 1, -1]])
    p = widen_placement(Placement(1, 4, np.array([0, 0]), np.array([1, 3])), 2)
    assert (p.slots, p.slot.tolist()) == (8, [2, 6])


@pytest.fixture(scope="module")
def programs():
    """``get(name, items) → (model bytes, program)``, compiled once (analytic costs)."""
    cache: dict = {}

    def get(name: str, items: int):
        if (name, items) not in cache:
            if name in ("cryptonets", "cryptonets_relu", "lola_small"):
                model, cal = (MODELS_DIR / f"{name}.onnx").read_bytes(), _digits(100, 64)
            else:
                model, cal = om.conv_net((1, 8, 8), channels=3, pads=1, act="relu", seed=5), om.random_input((1, 8, 8), 64, seed=11)
            cache[name, items] = model, heinfer.compile(model, mode="latency", calibration=cal, items=items, measure_costs=False)
        return cache[name, items]

    return get


@pytest.mark.parametrize("items", [2, 4])
def test_a_program_with_lanes_keeps_every_item_in_its_lane(programs, items: int) -> None:
    _, prog = programs("cryptonets_relu", items)
    assert prog.lanes == items and prog.batch_capacity == items and prog.mode == "latency"
    assert all(s % items == 0 for s in prog.rotation_steps)
    for seg in prog.segments:
        g = seg.layout.gather.reshape(len(seg.layout.gather), -1, items)
        assert (g[:, :, 1:] == -1).all() and (g[:, :, 0] >= 0).any()
        assert (seg.output.slot % items == 0).all()
    for t in prog.layers:
        v = t.vectors.reshape(len(t.vectors), -1, items)
        assert (v == v[:, :, :1]).all()


@pytest.mark.parametrize(("name", "items"), [("cryptonets_relu", 2), ("cryptonets", 4), ("lola_small", 2), ("conv-relu", 4)])
def test_queries_of_several_items_agree_with_onnxruntime_item_by_item(programs, name: str, items: int) -> None:
    model, prog = programs(name, items)
    _, one = programs(name, 1)
    x = _digits(0, items + 1) if name != "conv-relu" else om.random_input((1, 8, 8), items + 1, seed=5)
    want = om.run_onnxruntime(model, x.astype(np.float32))
    r = heinfer.infer(prog, x)  # a full query and one of a single item
    assert r.report["queries"] == 2 and r.report["batch_capacity"] == items
    err = np.abs(r.outputs - want).max(1) / np.abs(want).max(1)
    err_one = np.abs(heinfer.infer(one, x[:2]).outputs - want[:2]).max(1) / np.abs(want[:2]).max(1)
    print(f"{name}, {items} lanes: logN {prog.params['log_n']}, rel. error {err.max():.2e} (one item per query {err_one.max():.2e})")
    np.testing.assert_array_equal(r.outputs.argmax(1), want.argmax(1))
    assert err.max() <= max(1e-3, 3 * err_one.max())


def test_a_query_in_lanes_is_not_a_mix_of_its_items(programs) -> None:
    """Items far apart give answers far apart: each lane is its own item's."""
    model, prog = programs("cryptonets_relu", 2)
    x = _digits(0, 2)
    x[1] = 0.0  # a blank image beside a digit
    got = heinfer.infer(prog, x).outputs
    want = om.run_onnxruntime(model, x.astype(np.float32))
    np.testing.assert_allclose(got, want, atol=2e-3 * np.abs(want).max())


def test_a_program_file_keeps_its_lanes(programs) -> None:
    _, prog = programs("cryptonets_relu", 2)
    for art in (prog, prog.public()):
        back = load(art.to_bytes())
        assert back.lanes == 2 and back.batch_capacity == 2 and back.id == prog.id
    assert programs("cryptonets_relu", 1)[1].id != prog.id


def test_the_ring_grows_for_lanes_the_layouts_need(programs) -> None:
    """CryptoNets-ReLU's widest layer (845 values) fits 2^12's 2,048 slots once, not four times."""
    assert programs("cryptonets_relu", 1)[1].params["log_n"] == 12
    assert programs("cryptonets_relu", 4)[1].params["log_n"] == 13


@pytest.mark.parametrize("items", [0, 3, -2, 2.0, True, "2"])
def test_items_must_be_a_power_of_two(items) -> None:
    with pytest.raises(CompileError, match="items must be a power of two"):
        heinfer.compile(MODELS_DIR / "cryptonets_relu.onnx", mode="latency", calibration=_digits(0, 8), items=items, measure_costs=False)


def test_more_lanes_than_a_ring_holds_are_refused() -> None:
    with pytest.raises(CompileError, match="fewer than 2 slots per item"):
        heinfer.compile(MODELS_DIR / "cryptonets_relu.onnx", mode="latency", calibration=_digits(0, 8), items=4096, log_n=13, measure_costs=False)


def test_lanes_with_the_two_party_protocol_are_not_supported_yet() -> None:
    with pytest.raises(NotSupportedYetError, match="two-party"):
        heinfer.compile(MODELS_DIR / "cryptonets_relu.onnx", mode="latency", protocol="two-party", calibration=_digits(0, 8), items=2)


def _forged(prog, **changes):
    """The public program with fields changed, through its bytes (validated on load)."""
    return dataclasses.replace(prog.public(), **changes)


def test_a_program_whose_layouts_cross_lanes_is_refused(programs) -> None:
    _, prog = programs("cryptonets_relu", 2)
    seg = prog.segments[0]
    g = seg.layout.gather.copy()
    g[0, 1] = 0  # an input in lane 1
    with pytest.raises(CompileError, match="outside lane 0"):
        _forged(prog, segments=[dataclasses.replace(seg, layout=dataclasses.replace(seg.layout, gather=g)), *prog.segments[1:]])
    out = seg.output
    moved = Placement(out.n_cts, out.slots, out.ct, out.slot + 1)
    with pytest.raises(CompileError, match="outside lane 0"):
        _forged(prog, segments=[dataclasses.replace(seg, output=moved), *prog.segments[1:]])
    with pytest.raises(CompileError, match="multiple of the 2 lanes"):
        _forged(prog, rotation_steps=[*prog.rotation_steps, 1])
    with pytest.raises(CompileError, match="lanes 3"):
        _forged(prog, lanes=3)
    with pytest.raises(CompileError, match="lanes"):
        _forged(programs("cryptonets_relu", 1)[1], lanes=4)  # its gather fills every lane


def test_a_server_program_whose_plaintexts_differ_between_lanes_is_refused(programs) -> None:
    _, prog = programs("cryptonets_relu", 2)
    t = prog.layers[0]
    v = t.vectors.copy()
    v[0, 1] += 1.0  # lane 1 of one plaintext
    with pytest.raises(CompileError, match="differs between the 2 lanes"):
        dataclasses.replace(prog, layers=[dataclasses.replace(t, vectors=v), *prog.layers[1:]])


def test_lanes_on_the_batch_axis_are_refused() -> None:
    prog = heinfer.compile(MODELS_DIR / "cryptonets_relu.onnx", calibration=_digits(0, 8))
    with pytest.raises(CompileError, match="batch axis"):
        _forged(prog, lanes=2)


def test_lanes_narrower_than_a_layer_spread_it_over_more_ciphertexts() -> None:
    """64 items of CryptoNets-ReLU (845-value layers) need more than the largest ring's 2^15
    slots at one lane each: the ring stops at 2^16 and each item's layers take several
    ciphertexts of 512-slot lanes (was refused), answering as onnxruntime does."""
    model = (MODELS_DIR / "cryptonets_relu.onnx").read_bytes()
    prog = heinfer.compile(model, mode="latency", calibration=_digits(100, 64), items=64, measure_costs=False)
    assert prog.params["log_n"] == 16 and prog.lanes == 64
    assert prog.segments[0].n_input_cts > 1
    x = _digits(0, 3)
    np.testing.assert_array_equal(heinfer.infer(prog, x).outputs.argmax(1), om.run_onnxruntime(model, x.astype(np.float32)).argmax(1))
    import io

    assert "64 items per query" in heinfer.explain(prog, file=io.StringIO())
