"""The archive format of latency programs (``heinfer.program.latency_format``).

``LatencyProgram.to_bytes`` → :func:`heinfer.load_program` must round-trip every field (gather
maps, output placements, transforms with their terms, plaintext vectors, biases, folds and
replication steps, plans, client functions, rotation steps) and load a program that runs like
the original. Whatever a hostile archive holds — truncated bytes, flipped bytes, arrays of the
wrong dtype or shape, gather maps or terms out of range, non-finite weights, missing or
unexpected members, a throughput manifest relabelled ``latency`` — loading raises
:class:`heinfer.SerializationError` and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder
from heinfer.program.latency import LatencyProgram
from heinfer.program.serialize import dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from program.test_serialize import _assert_fn_equal, _manifest, _members, _pack, _pre_post_model

MODELS_DIR = Path(__file__).resolve().parents[3] / "models"


# ---------------------------------------------------------------------------------- programs
def _square_no_bias() -> bytes:
    """Conv (no bias) → x² → Flatten → MatMul (no bias): one segment, a relinearization key,
    transforms without bias."""
    b = ModelBuilder((1, 6, 6), seed=8)
    b.node("Conv", [b.x, b.weight(2, 1, 3, 3)], pads=[1, 1, 1, 1])
    b.node("Mul", [b.last, b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("MatMul", [b.last, b.weight(72, 5, fan_in=72)])
    return b.build()


def _digits(n: int) -> np.ndarray:
    return np.load(MODELS_DIR / "digits_test.npz")["x"][:n]


MODELS = {
    # name: (model bytes, calibration inputs)
    "cryptonets_relu": (
        lambda: (MODELS_DIR / "cryptonets_relu.onnx").read_bytes(),
        lambda: _digits(32),
    ),
    "pre-maxpool-sigmoid-post": (_pre_post_model, lambda: om.random_input((1, 6, 6), 32, seed=4)),
    "square-no-bias": (_square_no_bias, lambda: om.random_input((1, 6, 6), 32, seed=4)),
}
#: The program the hostile-archive tests edit (small: a few kilobytes).
P = "pre-maxpool-sigmoid-post"


@pytest.fixture(scope="module")
def zoo() -> dict[str, tuple[bytes, LatencyProgram, bytes]]:
    """name → (model, program, archive bytes), compiled once for the module."""
    out = {}
    for name, (model, cal) in MODELS.items():
        m = model()
        prog = heinfer.compile(m, mode="latency", calibration=cal(), measure_costs=False)
        out[name] = (m, prog, prog.to_bytes())
    return out


def assert_latency_programs_equal(a: LatencyProgram, b: LatencyProgram) -> None:
    """Every field of two latency programs, arrays compared exactly (dtype included)."""
    assert isinstance(b, LatencyProgram)
    for f in (
        "mode",
        "packing",
        "params",
        "input_name",
        "input_shape",
        "output_name",
        "output_shape",
        "input_bound",
        "galois_steps",
        "needs_relin_key",
        "meta",
    ):
        assert getattr(a, f) == getattr(b, f), f
    assert type(b.input_shape) is tuple and type(b.output_shape) is tuple
    assert len(a.segments) == len(b.segments)
    for sa, sb in zip(a.segments, b.segments):
        assert (sa.in_size, sa.input_level, sa.output_bound, sa.predicted_s) == (
            sb.in_size,
            sb.input_level,
            sb.output_bound,
            sb.predicted_s,
        )
        assert sa.gather.dtype == sb.gather.dtype and np.array_equal(sa.gather, sb.gather)
        assert (sa.output.n_cts, sa.output.slots) == (sb.output.n_cts, sb.output.slots)
        assert np.array_equal(sa.output.ct, sb.output.ct) and np.array_equal(
            sa.output.slot, sb.output.slot
        )
        assert len(sa.steps) == len(sb.steps)
        for ta, tb in zip(sa.steps, sb.steps):
            assert (ta.op, ta.level, ta.plan) == (tb.op, tb.level, tb.plan)
            assert (ta.transform is None) == (tb.transform is None)
            if ta.transform is None:
                continue
            x, y = ta.transform, tb.transform
            assert (x.n_in, x.n_out, x.slots, x.fold, x.replicate) == (
                y.n_in,
                y.n_out,
                y.slots,
                y.fold,
                y.replicate,
            )
            assert x.terms.dtype == y.terms.dtype and np.array_equal(x.terms, y.terms)
            assert x.vectors.dtype == y.vectors.dtype and np.array_equal(x.vectors, y.vectors)
            assert (x.bias is None) == (y.bias is None)
            if x.bias is not None:
                assert np.array_equal(x.bias, y.bias)
    for fa, fb in ((a.pre, b.pre), (a.post, b.post), *zip(a.steps, b.steps)):
        assert len(fa) == len(fb)
        for f, g in zip(fa, fb):
            _assert_fn_equal(f, g)
    assert len(a.steps) == len(b.steps)


# ---------------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("name", list(MODELS))
def test_round_trip_is_equal(zoo, name: str) -> None:
    _, prog, data = zoo[name]
    loaded = heinfer.load_program(data)
    assert_latency_programs_equal(prog, loaded)
    assert loaded.to_bytes() == data  # deterministic
    assert_latency_programs_equal(prog, LatencyProgram.from_bytes(data))
    assert loaded.key_manifest == prog.key_manifest and loaded.key_bytes() == prog.key_bytes()


def test_the_zoo_covers_every_part_of_the_format(zoo) -> None:
    progs = [p for _, p, _ in zoo.values()]
    steps = [st for p in progs for seg in p.segments for st in seg.steps]
    ts = [st.transform for st in steps if st.transform is not None]
    assert any(p.pre for p in progs) and any(p.post for p in progs)
    assert any(f.groups is not None for p in progs for fns in p.steps for f in fns)
    assert any(p.needs_relin_key for p in progs) and any(not p.needs_relin_key for p in progs)
    assert any(st.op == "square" for st in steps)
    assert any(t.bias is None for t in ts) and any(t.bias is not None for t in ts)
    assert any(t.fold for t in ts) and any(not t.fold for t in ts)
    assert any(t.replicate for t in ts)
    assert len({st.plan["method"] for st in steps if st.transform is not None}) >= 2
    assert any(len(seg.gather) > 1 for p in progs for seg in p.segments)
    assert any(len(p.segments) > 1 for p in progs) and any(len(p.segments) == 1 for p in progs)


def test_loaded_program_runs_like_the_original(zoo) -> None:
    model, prog, data = zoo[P]
    loaded = heinfer.load_program(data)
    x = om.random_input((1, 6, 6), 2, seed=6)
    want = om.run_onnxruntime(model, x)
    for client_prog, server_prog in ((loaded, loaded), (loaded, prog)):
        got = heinfer.infer(
            server_prog, x, client=heinfer.Client(client_prog), server=heinfer.Server(server_prog)
        ).outputs
        np.testing.assert_allclose(got, want, atol=1e-3 * np.abs(want).max())


# ---------------------------------------------------------------------------------- hostile bytes
def _refused(data, match: str | None = None) -> None:
    with pytest.raises(heinfer.SerializationError, match=match):
        heinfer.load_program(data)


def _with_array(data: bytes, key: str, value) -> bytes:
    arrays = _members(data)
    if value is None:
        del arrays[key]
    else:
        arrays[key] = value(arrays[key]) if callable(value) else value
    return _pack(arrays)


_DELETE = object()


def _with_manifest(data: bytes, path: tuple, value) -> bytes:
    arrays = _members(data)
    m = _manifest(arrays)
    obj = m
    for k in path[:-1]:
        obj = obj[k]
    if value is _DELETE:
        del obj[path[-1]]
    elif callable(value):
        obj[path[-1]] = value(obj[path[-1]])
    else:
        obj[path[-1]] = value
    arrays["manifest"] = np.frombuffer(json.dumps(m).encode(), dtype=np.uint8)
    return _pack(arrays)


def test_truncated_at_every_length_is_refused(zoo) -> None:
    data = zoo[P][2]
    for n in sorted({*range(80), *range(80, len(data), 61), len(data) - 1}):
        _refused(data[:n])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), min_size=1, max_size=4)
)
def test_random_byte_flips_are_refused_or_change_nothing(zoo, flips) -> None:
    _, prog, data = zoo[P]
    b = bytearray(data)
    for pos, mask in flips:
        b[pos % len(b)] ^= mask
    try:
        loaded = heinfer.load_program(bytes(b))
    except heinfer.SerializationError:
        return
    assert_latency_programs_equal(prog, loaded)


# ---------------------------------------------------------------------------------- arrays
@pytest.mark.parametrize(
    ("key", "dtype"),
    [
        ("g0", np.int32),
        ("g0", np.float64),
        ("g1", np.uint64),
        ("o0_ct", np.int32),
        ("o1_slot", np.float64),
        ("t0_0_terms", np.int32),
        ("t1_0_terms", np.float64),
        ("t0_0_vectors", np.float32),
        ("t2_0_vectors", np.complex128),
        ("t1_0_vectors", np.int64),
        ("t0_0_bias", np.float32),
        ("s0_f1", np.int32),  # the max-pooling groups of the client step
    ],
)
def test_array_of_the_wrong_dtype_is_refused(zoo, key: str, dtype) -> None:
    _refused(_with_array(zoo[P][2], key, lambda a: a.astype(dtype)), "dtype")


def _set_at(index, value):
    def edit(a):
        a = a.copy()
        a[index] = value
        return a

    return edit


@pytest.mark.parametrize(
    ("key", "edit"),
    [
        # gather maps: elements outside the segment input, wrong shapes
        ("g0", _set_at((0, 0), 36)),  # segment 0 takes 36 values
        ("g0", _set_at((0, 0), -2)),
        ("g1", _set_at((0, 5), 10**12)),
        ("g0", lambda a: a[:, :-1]),
        ("g0", lambda a: np.concatenate([a, a[:, :1]], axis=1)),
        ("g0", lambda a: a.ravel()),
        ("g0", lambda a: a[:0]),
        ("g0", lambda a: a[:-1]),  # one ciphertext fewer than the transform takes
        ("g1", lambda a: np.concatenate([a, a])),
        # output placements
        ("o0_ct", _set_at(0, 5)),  # past the output ciphertexts
        ("o1_slot", _set_at(0, 2048)),  # past the slots
        ("o1_slot", _set_at(0, -1)),
        ("o1_slot", lambda a: np.full_like(a, a[0])),  # shared slots
        ("o2_ct", lambda a: a[:-1]),  # ct and slot of different lengths
        ("o2_slot", lambda a: a.reshape(1, -1)),
    ],
)
def test_gather_maps_and_placements_out_of_range_are_refused(zoo, key: str, edit) -> None:
    _refused(_with_array(zoo[P][2], key, edit))


def test_output_placement_of_the_wrong_size_is_refused(zoo) -> None:
    arrays = _members(zoo[P][2])
    arrays["o2_ct"], arrays["o2_slot"] = arrays["o2_ct"][:-1], arrays["o2_slot"][:-1]
    _refused(_pack(arrays))


@pytest.mark.parametrize("key", ["t0_0_terms", "t1_0_terms", "t2_0_terms"])
@pytest.mark.parametrize(
    ("column", "value"),
    [(0, "n_out"), (0, -1), (1, "S"), (1, -1), (2, "n_in"), (2, -5), (3, "S"), (3, -1)],
)
def test_transform_terms_out_of_range_are_refused(zoo, key: str, column: int, value) -> None:
    _, prog, data = zoo[P]
    i = int(key[1])
    t = prog.segments[i].steps[0].transform
    v = {"n_out": t.n_out, "n_in": t.n_in, "S": t.slots}.get(value, value)
    _refused(_with_array(data, key, _set_at((0, column), v)))


@pytest.mark.parametrize(
    ("key", "edit"),
    [
        ("t0_0_terms", lambda a: a[:, :3]),
        ("t0_0_terms", lambda a: a.ravel()),
        ("t0_0_terms", lambda a: a[:-1]),  # one term fewer than vectors
        ("t1_0_vectors", lambda a: a[:, :-1]),
        ("t1_0_vectors", lambda a: np.concatenate([a, a])),
        ("t1_0_vectors", lambda a: a.ravel()),
        ("t0_0_bias", lambda a: a[:, :-1]),
        ("t0_0_bias", lambda a: np.concatenate([a, a])),
        ("t0_0_bias", lambda a: a.ravel()),
    ],
)
def test_transform_arrays_of_the_wrong_shape_are_refused(zoo, key: str, edit) -> None:
    _refused(_with_array(zoo[P][2], key, edit))


@pytest.mark.parametrize(
    "key", ["t0_0_vectors", "t1_0_vectors", "t2_0_vectors", "t0_0_bias", "t1_0_bias"]
)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused(zoo, key: str, value: float) -> None:
    _refused(_with_array(zoo[P][2], key, _set_at((0, 3), value)), "finite")


@pytest.mark.parametrize(
    "key",
    [
        "manifest",
        "g0",
        "g2",
        "o0_ct",
        "o1_slot",
        "t0_0_terms",
        "t1_0_vectors",
        "t2_0_bias",
        "s0_f1",
    ],
)
def test_missing_member_is_refused(zoo, key: str) -> None:
    _refused(_with_array(zoo[P][2], key, None))


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        (P, "zzz", np.zeros(3)),
        (P, "t9_0_terms", np.zeros((1, 4), np.int64)),
        (P, "l0_data", np.zeros(3)),  # a throughput member
        (
            "square-no-bias",
            "t0_0_bias",
            np.zeros((1, 4096)),
        ),  # a bias the manifest does not declare
    ],
)
def test_unexpected_member_is_refused(zoo, name: str, key: str, value) -> None:
    arrays = _members(zoo[name][2])
    assert key not in arrays
    arrays[key] = value
    _refused(_pack(arrays), "unexpected")


# ---------------------------------------------------------------------------------- manifest
def test_throughput_manifest_relabelled_latency_is_refused(zoo) -> None:
    _, cal = MODELS[P]
    throughput = heinfer.compile(_pre_post_model(), calibration=cal())
    _refused(_with_manifest(dump(throughput), ("mode",), "latency"))


@pytest.mark.parametrize("mode", ["throughput", "batch", None, _DELETE])
def test_latency_manifest_with_another_mode_is_refused(zoo, mode) -> None:
    _refused(_with_manifest(zoo[P][2], ("mode",), mode))


def _drop_one(steps: list) -> list:
    return steps[:-1]


T0 = ("segments", 0, "steps", 0)
T1 = ("segments", 1, "steps", 0)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("version",), 2),
        (("format",), "heinfer-model"),
        (("params", "log_n"), 40),
        (("params", "log_n"), 10),
        (("params", "log_n"), "12"),
        (("params", "log_p"), []),
        (("params", "security"), 100),
        (("params", "log_q"), ["x"]),
        (("params",), _DELETE),
        (("params",), [12]),
        (("segments",), []),
        (("segments",), {"0": 1}),
        (("segments", 0, "in_size"), 10),
        (("segments", 0, "in_size"), "many"),
        (("segments", 0, "input_level"), 0),
        (("segments", 0, "input_level"), 7),
        (("segments", 0, "output_cts"), 0),
        (("segments", 0, "output_cts"), -1),
        (("segments", 0, "output_bound"), float("nan")),
        (("segments", 0, "output_bound"), float("inf")),
        (("segments", 0, "output_bound"), -1.0),
        (("segments", 0, "output_bound"), 0.0),
        (("segments", 0, "steps"), []),
        (("segments", 0, "steps"), 3),
        ((*T0, "op"), "cube"),
        ((*T0, "op"), "square"),  # a square without a relinearization key
        ((*T0, "level"), 0),
        ((*T0, "level"), "one"),
        ((*T0, "plan"), [1, 2]),
        ((*T0, "transform"), _DELETE),
        ((*T0, "transform", "n_in"), -1),
        ((*T0, "transform", "n_in"), lambda v: v + 1),
        ((*T0, "transform", "n_out"), lambda v: v + 1),
        ((*T0, "transform", "n_out"), 0),
        ((*T1, "transform", "fold"), [0]),
        ((*T1, "transform", "fold"), [2048]),
        ((*T1, "transform", "fold"), ["a"]),
        ((*T1, "transform", "fold"), None),
        ((*T1, "transform", "replicate"), [-3]),
        ((*T1, "transform", "bias"), False),  # the bias array becomes an unexpected member
        ((*T0, "transform"), [1, 2]),
        (("galois_steps",), []),
        (("galois_steps",), _drop_one),  # a step the kernels rotate by has no key
        (("galois_steps",), lambda s: [*s, 0]),
        (("galois_steps",), lambda s: [*s, 2048]),
        (("galois_steps",), ["a"]),
        (("steps",), []),
        (("steps", 0, 0, "kind"), "gelu"),
        (("steps", 0, 1, "groups"), "nonexistent"),
        (("input_shape",), "abc"),
        (("pre",), [{"name": "x"}]),
        (("post",), 5),
    ],
)
def test_malformed_manifest_is_refused(zoo, path: tuple, value) -> None:
    _refused(_with_manifest(zoo[P][2], path, value))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("needs_relin_key",), False),
        (("segments", 0, "steps", 1, "op"), "cube"),
        (("segments", 0, "steps", 0, "transform", "bias"), True),  # declares a missing array
    ],
)
def test_malformed_manifest_of_a_squaring_program_is_refused(zoo, path: tuple, value) -> None:
    _refused(_with_manifest(zoo["square-no-bias"][2], path, value))


@pytest.mark.parametrize(
    ("path", "value"), [(("input_shape",), [1, 3, 3]), (("output_shape",), [11])]
)
def test_shapes_inconsistent_with_the_segments_are_refused(zoo, path: tuple, value) -> None:
    _refused(_with_manifest(zoo["cryptonets_relu"][2], path, value))  # no pre- or post-processing


@pytest.mark.parametrize(
    ("path", "value"), [(("input_shape",), [1, 3, 3]), (("output_shape",), [11])]
)
def test_shapes_inconsistent_with_pre_and_post_processing_are_refused(
    zoo, path: tuple, value
) -> None:
    _refused(_with_manifest(zoo[P][2], path, value))


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 0.0])
def test_non_finite_or_non_positive_input_bound_is_refused(zoo, value: float) -> None:
    _refused(_with_manifest(zoo[P][2], ("input_bound",), value))


def test_deeply_nested_manifest_is_refused(zoo) -> None:
    arrays = _members(zoo[P][2])
    text = json.dumps(_manifest(arrays))[:-1] + ', "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    arrays["manifest"] = np.frombuffer(text.encode(), dtype=np.uint8)
    _refused(_pack(arrays))
