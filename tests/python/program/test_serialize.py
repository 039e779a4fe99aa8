"""The program format (``heinfer.program.serialize``): round trips, and hostile bytes.

``dump``/``load`` must round-trip every field of a program (segments, instructions, the
layers' sparse matrices, client steps with their pooling groups and hiding components,
parameters), and a loaded program must run exactly like the original. Whatever bytes
``load`` is given — truncated, bit-flipped, with a wrong version or magic, arrays of the
wrong dtype or shape, inconsistent CSR matrices, oversized — it raises
:class:`heinfer.SerializationError` and nothing else.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from functools import cache
from pathlib import Path

import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from compiler.onnx_models import ModelBuilder
from heinfer.program import Program, load
from heinfer.program.serialize import MAX_PROGRAM_BYTES, dump
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

MODELS_DIR = Path(__file__).resolve().parents[3] / "models"


# ---------------------------------------------------------------------------------- programs
def _pre_post_model() -> bytes:
    """Relu on the input (client pre-processing) → Conv → Relu → MaxPool → Gemm → Sigmoid →
    Gemm → Softmax (client post-processing)."""
    b = ModelBuilder((1, 6, 6), seed=3)
    b.node("Relu", [b.x])
    b.node("Conv", [b.last, b.weight(2, 1, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("MaxPool", [b.last], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(6, 18), b.weight(6)], transB=1)
    b.node("Sigmoid", [b.last])
    b.node("Gemm", [b.last, b.weight(4, 6), b.weight(4)], transB=1)
    b.node("Softmax", [b.last])
    return b.build()


PROGRAMS = {
    # name: (model bytes, per-item input shape)
    "cryptonets": (lambda: (MODELS_DIR / "cryptonets.onnx").read_bytes(), (1, 28, 28)),
    "cryptonets_relu": (lambda: (MODELS_DIR / "cryptonets_relu.onnx").read_bytes(), (1, 28, 28)),
    "pre-maxpool-sigmoid-post": (_pre_post_model, (1, 6, 6)),
    "square-no-bias": (lambda: om.conv_net(act="square", pool="avg"), (1, 8, 8)),
}


@cache
def _model(name: str) -> bytes:
    return PROGRAMS[name][0]()


@cache
def _program(name: str) -> Program:
    shape = PROGRAMS[name][1]
    cal = om.random_input(shape, 32, seed=4)
    if shape == (1, 28, 28):
        cal = np.abs(cal)  # digits are in [0, 1]
    return heinfer.compile(_model(name), calibration=cal)


@cache
def _bytes(name: str) -> bytes:
    return dump(_program(name))


def _input(name: str, n: int) -> np.ndarray:
    x = om.random_input(PROGRAMS[name][1], n, seed=6)
    return np.abs(x) if PROGRAMS[name][1] == (1, 28, 28) else x


def _assert_fn_equal(a, b) -> None:
    assert (a.name, a.kind, a.attrs, a.in_shape, a.out_shape) == (
        b.name,
        b.kind,
        b.attrs,
        b.in_shape,
        b.out_shape,
    )
    assert (a.groups is None) == (b.groups is None)
    if a.groups is not None:
        assert a.groups.dtype == b.groups.dtype and np.array_equal(a.groups, b.groups)


def assert_programs_equal(a: Program, b: Program) -> None:
    """Every field of two programs, arrays compared exactly."""
    scalars = (
        "mode",
        "params",
        "packing",
        "input_name",
        "input_shape",
        "output_name",
        "output_shape",
        "input_bound",
        "hide_range",
        "needs_relin_key",
        "meta",
    )
    for f in scalars:
        assert getattr(a, f) == getattr(b, f), f
    assert type(b.input_shape) is tuple and type(b.output_shape) is tuple
    assert len(a.segments) == len(b.segments)
    for sa, sb in zip(a.segments, b.segments):
        assert vars(sa) == vars(sb)
    assert len(a.layers) == len(b.layers)
    for la, lb in zip(a.layers, b.layers):
        assert (la.name, la.weight_scale, la.digits) == (lb.name, lb.weight_scale, lb.digits)
        ma, mb = la.matrix.tocsr(), lb.matrix.tocsr()
        assert ma.shape == mb.shape
        assert np.array_equal(ma.data, mb.data) and np.array_equal(ma.indices, mb.indices)
        assert np.array_equal(ma.indptr, mb.indptr)
        assert (la.bias is None) == (lb.bias is None)
        if la.bias is not None:
            assert np.array_equal(la.bias, lb.bias)
    assert len(a.steps) == len(b.steps)
    for ta, tb in zip(a.steps, b.steps):
        assert (ta.in_size, ta.out_size, ta.hide_scale) == (tb.in_size, tb.out_size, tb.hide_scale)
        assert np.array_equal(ta.components, tb.components)
        assert np.array_equal(ta.out_components, tb.out_components)
        assert len(ta.functions) == len(tb.functions)
        for fa, fb in zip(ta.functions, tb.functions):
            _assert_fn_equal(fa, fb)
    for fns_a, fns_b in ((a.pre, b.pre), (a.post, b.post)):
        assert len(fns_a) == len(fns_b)
        for fa, fb in zip(fns_a, fns_b):
            _assert_fn_equal(fa, fb)


# ---------------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_round_trip_is_equal(name: str) -> None:
    prog = _program(name)
    loaded = load(_bytes(name))
    assert isinstance(loaded, Program)
    assert_programs_equal(prog, loaded)
    assert dump(loaded) == _bytes(name)  # the format is deterministic


def test_the_zoo_covers_every_part_of_the_format() -> None:
    progs = [_program(n) for n in PROGRAMS]
    assert any(p.pre for p in progs) and any(p.post for p in progs)
    assert any(
        st.grouping is not None and st.grouping.kind == "maxpool" for p in progs for st in p.steps
    )
    assert any(not st.hide_scale for p in progs for st in p.steps)
    assert any(p.needs_relin_key for p in progs) and any(not p.needs_relin_key for p in progs)
    assert any(lay.bias is None for p in progs for lay in p.layers)
    assert any(lay.bias is not None for p in progs for lay in p.layers)
    assert {p.packing for p in progs} == {"real", "coeff"}
    assert any(i.op == "rescale" for p in progs for s in p.segments for i in s.instrs)


def test_load_program_is_exported() -> None:
    assert heinfer.load_program is load
    assert_programs_equal(
        heinfer.load_program(_bytes("cryptonets_relu")), _program("cryptonets_relu")
    )


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_load_accepts_bytes_like(kind) -> None:
    assert_programs_equal(load(kind(_bytes("cryptonets_relu"))), _program("cryptonets_relu"))


@pytest.mark.parametrize("name", ["pre-maxpool-sigmoid-post", "square-no-bias"])
def test_loaded_program_runs_like_the_original(name: str) -> None:
    prog = _program(name)
    loaded = load(_bytes(name))
    x = _input(name, 5)
    want = om.run_onnxruntime(_model(name), x)
    for p in (prog, loaded):
        got = heinfer.infer(p, x).outputs
        np.testing.assert_allclose(got, want, atol=p.segments[-1].predicted_error)
    # a client of the loaded program talks to a server of the original one
    got = heinfer.infer(prog, x, client=heinfer.Client(loaded), server=heinfer.Server(prog)).outputs
    np.testing.assert_allclose(got, want, atol=prog.segments[-1].predicted_error)


# ---------------------------------------------------------------------------------- helpers for hostile bytes
def _members(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _pack(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _manifest(arrays: dict[str, np.ndarray]) -> dict:
    return json.loads(bytes(arrays["manifest"]).decode())


def _with_manifest(name: str, edit) -> bytes:
    arrays = _members(_bytes(name))
    m = _manifest(arrays)
    edit(m)
    arrays["manifest"] = np.frombuffer(json.dumps(m).encode(), dtype=np.uint8)
    return _pack(arrays)


def _with_array(name: str, key: str, value) -> bytes:
    arrays = _members(_bytes(name))
    if value is None:
        del arrays[key]
    else:
        arrays[key] = value(arrays[key]) if callable(value) else value
    return _pack(arrays)


def _refused(data, match: str | None = None) -> None:
    with pytest.raises(heinfer.SerializationError, match=match):
        load(data)


# ---------------------------------------------------------------------------------- truncated, flipped
def test_truncated_at_every_length_is_refused() -> None:
    data = _bytes("pre-maxpool-sigmoid-post")
    for n in sorted({*range(64), *range(64, len(data), 97), len(data) - 1}):
        _refused(data[:n])


@pytest.mark.parametrize(
    "data", [b"", b"PK", b"\x00" * 100, b"HEMS\x01", b"PK\x03\x04" + b"\x00" * 60]
)
def test_garbage_is_refused(data: bytes) -> None:
    _refused(data)


@pytest.mark.parametrize("obj", ["a string", 42, None, [1, 2]])
def test_non_bytes_are_refused(obj) -> None:
    _refused(obj, "bytes")


def test_appended_garbage_is_tolerated_or_refused() -> None:
    data = _bytes("cryptonets_relu")
    try:
        loaded = load(data + b"\x00" * 17)
    except heinfer.SerializationError:
        return
    assert_programs_equal(loaded, _program("cryptonets_relu"))


def test_crc_mismatch_is_refused() -> None:
    data = bytearray(_bytes("cryptonets_relu"))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).infolist()[0]
    (n, e) = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    start = info.header_offset + 30 + n + e
    data[start + info.compress_size // 2] ^= 0x10
    _refused(bytes(data))


def test_corrupted_deflate_stream_is_a_serialization_error() -> None:
    data = bytearray(_bytes("cryptonets_relu"))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).infolist()[0]
    (n, e) = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    data[info.header_offset + 30 + n + e + 5] ^= 0x10  # inside the first member's deflate data
    _refused(bytes(data))


def test_unsupported_zip_compression_is_a_serialization_error() -> None:
    data = bytearray(_bytes("cryptonets_relu"))
    start_dir = zipfile.ZipFile(io.BytesIO(bytes(data))).start_dir
    data[start_dir + 10] ^= 0x01  # central directory: method 8 (deflate) → 9 (deflate64)
    _refused(bytes(data))


def _flip(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    b = bytearray(data)
    for pos, mask in flips:
        b[pos % len(b)] ^= mask
    return bytes(b)


_FLIPS = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), min_size=1, max_size=4)


@settings(
    max_examples=300,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(flips=_FLIPS)
def test_random_byte_flips_raise_serialization_error_or_load_the_same_program(flips) -> None:
    data = _bytes("pre-maxpool-sigmoid-post")
    try:
        loaded = load(_flip(data, flips))
    except heinfer.SerializationError:
        return
    # a flip the format does not protect (zip timestamps, attributes) must not change content
    assert_programs_equal(loaded, _program("pre-maxpool-sigmoid-post"))


@settings(max_examples=200, deadline=None)
@given(flips=_FLIPS)
def test_random_byte_flips_never_load_a_different_program(flips) -> None:
    """Whatever a flip raises, it never yields a program that differs from the original."""
    data = _bytes("pre-maxpool-sigmoid-post")
    try:
        loaded = load(_flip(data, flips))
    except Exception:  # noqa: BLE001 - the exception type is the other test's business
        return
    assert_programs_equal(loaded, _program("pre-maxpool-sigmoid-post"))


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=2000))
def test_random_bytes_are_refused(data: bytes) -> None:
    _refused(data)


# ---------------------------------------------------------------------------------- manifest
def _set(path: tuple, value):
    def edit(m: dict) -> None:
        obj = m
        for k in path[:-1]:
            obj = obj[k]
        if value is _DELETE:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value

    return edit


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("version",), 2, "version"),
        (("version",), 0, "version"),
        (("version",), "1", "version"),
        (("version",), _DELETE, "version"),
        (("format",), "onnx", "not a heinfer program"),
        (("format",), _DELETE, "not a heinfer program"),
        (("mode",), "latency", None),
        (("packing",), "quaternion", None),
        (("params", "log_n"), 40, None),
        (("params", "log_q"), [], None),
        (("params",), _DELETE, None),
        (("segments",), [], None),
        (("segments", 0, "instrs", 0), ["bootstrap", 0], None),
        (("segments", 0, "instrs", 0), ["linear", 99], None),
        (("segments", 0, "instrs", 0), ["linear"], None),
        (("segments", 0, "input_level"), 7, None),
        (("segments", 0, "output_level"), -1, None),
        (("segments", 0, "in_size"), "many", None),
        (("steps", 0, "in_size"), 3, None),
        (("steps", 0, "functions", 0, "kind"), "gelu", None),
        (("steps", 0, "functions", 1, "groups"), "nonexistent", None),
        (("layers", 0, "shape"), [3], None),
        (("layers", 0, "shape"), [-1, 5], None),
        (("layers", 0, "weight_scale"), 0.5, "weight scale"),
        (("layers", 0, "weight_scale"), float("nan"), "weight scale"),
        (("layers", 0, "digits"), 3, "digits"),
        (("layers", 0, "bias"), True, None),
        (("layers",), [], None),
        (("pre",), [{"name": "x"}], None),
        (("input_shape",), "abc", None),
    ],
)
def test_malformed_manifest_is_refused(path: tuple, value, match) -> None:
    name = "pre-maxpool-sigmoid-post"
    if path[0] == "layers" and path[-1] == "bias" and _program(name).layers[0].bias is not None:
        name = "cryptonets"  # a layer without bias claiming one
    _refused(_with_manifest(name, _set(path, value)), match)


@pytest.mark.parametrize(
    "manifest",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"text"',
        b"\xff\xfe\x00",
        b'{"format": "heinfer-program"}',
        b"null",
    ],
)
def test_manifest_that_is_not_a_json_object_is_refused(manifest: bytes) -> None:
    arrays = _members(_bytes("cryptonets_relu"))
    arrays["manifest"] = np.frombuffer(manifest, dtype=np.uint8)
    _refused(_pack(arrays))


def test_missing_manifest_is_refused() -> None:
    _refused(_with_array("cryptonets_relu", "manifest", None))


# ---------------------------------------------------------------------------------- arrays
@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("l0_data", lambda a: a.astype(np.float32), "dtype"),
        ("l0_data", lambda a: a.astype(np.int64), "dtype"),
        ("l0_indices", lambda a: a.astype(np.int32), "dtype"),
        ("l0_indptr", lambda a: a.astype(np.uint64), "dtype"),
        ("l0_indptr", lambda a: a.astype(np.float64), "dtype"),
        ("l0_bias", lambda a: a.astype(np.float32), "dtype"),
        ("s0_comp", lambda a: a.astype(np.int32), "dtype"),
        ("s0_outcomp", lambda a: a.astype(np.float64), "dtype"),
        ("s0_f1", lambda a: a.astype(np.int32), "dtype"),
        ("l0_data", lambda a: a.astype(np.complex128), "dtype"),
    ],
)
def test_array_of_the_wrong_dtype_is_refused(key: str, value, match: str) -> None:
    _refused(_with_array("pre-maxpool-sigmoid-post", key, value), match)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("l0_bias", lambda a: a[:-1]),
        ("l0_bias", lambda a: a.reshape(1, -1)),
        ("l0_data", lambda a: a.reshape(-1, 1)),
        ("l0_data", lambda a: a[:-1]),
        ("l0_indices", lambda a: a.reshape(1, -1)),
        ("s0_comp", lambda a: a[:-1]),
        ("s0_comp", lambda a: a.reshape(1, -1)),
        ("s0_outcomp", lambda a: np.concatenate([a, a])),
        ("s0_f1", lambda a: a[:-1]),  # maxpool groups with a row missing
        ("s0_f1", lambda a: a.ravel()),  # groups not 2-D
        ("s0_f1", lambda a: np.full_like(a, a.size * 10)),  # groups index out of range
        ("s0_f1", lambda a: np.full_like(a, -1)),  # windows of padding only
        ("l0_data", None),
        ("l0_indptr", None),
        ("s0_comp", None),
        ("s0_f1", None),
    ],
)
def test_array_of_the_wrong_shape_or_missing_is_refused(key: str, value) -> None:
    _refused(_with_array("pre-maxpool-sigmoid-post", key, value))


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("l0_indptr", lambda a: a[::-1].copy(), "sparse"),  # decreasing
        ("l0_indptr", lambda a: np.concatenate([a[:1], a[-1:], a[2:]]), "sparse"),  # non-monotone
        ("l0_indptr", lambda a: a[:-1], "sparse"),  # one row short
        ("l0_indptr", lambda a: a + 1, "sparse"),  # does not start at 0
        ("l0_indptr", lambda a: np.concatenate([a[:-1], [a[-1] + 5]]), "sparse"),  # nnz mismatch
        ("l0_indices", lambda a: np.full_like(a, 10**6), "column"),
        ("l0_indices", lambda a: np.full_like(a, -1), "column"),
        ("l0_indices", lambda a: a[:-1], "sparse"),
        ("l0_data", lambda a: np.full_like(a, np.nan), "finite"),
        ("l0_data", lambda a: np.full_like(a, np.inf), "finite"),
        ("l0_bias", lambda a: np.full_like(a, np.nan), "bias"),
    ],
)
def test_inconsistent_csr_matrix_is_refused(key: str, value, match: str) -> None:
    _refused(_with_array("pre-maxpool-sigmoid-post", key, value), match)


def test_unexpected_pickled_object_array_is_refused() -> None:
    """Object arrays would need pickle: the loader never unpickles."""
    arrays = _members(_bytes("cryptonets_relu"))
    buf = io.BytesIO()
    np.savez(buf, **arrays, evil=np.array([{"a": 1}], dtype=object))
    try:
        loaded = load(buf.getvalue())
    except heinfer.SerializationError:
        return
    assert_programs_equal(loaded, _program("cryptonets_relu"))  # ignored, never unpickled


# ---------------------------------------------------------------------------------- size limits
def test_oversized_input_is_refused() -> None:
    data = _bytes("cryptonets_relu")
    assert len(data) < MAX_PROGRAM_BYTES
    with pytest.raises(heinfer.SerializationError, match="exceeds"):
        load(data, max_bytes=len(data) - 1)
    assert_programs_equal(load(data, max_bytes=len(data)), _program("cryptonets_relu"))


def test_default_limit_is_one_gib() -> None:
    assert MAX_PROGRAM_BYTES == 1 << 30


def _npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_member_declaring_a_huge_shape_is_refused() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("manifest.npy", _npy_header((1 << 50,)) + b"\x00" * 16)
    _refused(buf.getvalue())


def test_decompressed_size_is_limited_too() -> None:
    arrays = _members(_bytes("cryptonets_relu"))
    arrays["padding"] = np.zeros(16 << 20, dtype=np.uint8)  # 16 MiB of zeros: ~16 KiB deflated
    data = _pack(arrays)
    limit = 1 << 20
    assert len(data) < limit
    with pytest.raises(heinfer.SerializationError):
        load(data, max_bytes=limit)


# ---------------------------------------------------------------------------------- validation gaps
@pytest.mark.parametrize("bad", [10**9, -3])
def test_hiding_components_out_of_range_are_refused(bad: int) -> None:
    def edit(a):
        a = a.copy()
        a[0] = bad
        return a

    _refused(_with_array("pre-maxpool-sigmoid-post", "s0_comp", edit))


@pytest.mark.parametrize("field", ["input_scale", "output_bound", "predicted_error"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_non_finite_or_negative_scales_and_bounds_are_refused(field: str, value: float) -> None:
    _refused(_with_manifest("pre-maxpool-sigmoid-post", _set(("segments", 0, field), value)))


def test_input_shape_inconsistent_with_the_first_segment_is_refused() -> None:
    _refused(_with_manifest("cryptonets_relu", _set(("input_shape",), [1, 3, 3])))


def test_non_integer_moduli_are_refused() -> None:
    _refused(_with_manifest("cryptonets_relu", _set(("params", "log_q"), ["x"])))
