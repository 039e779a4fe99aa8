"""ONNX import: every supported operator and small networks match onnxruntime, before and after
``fold_linear``; unsupported or malformed models raise the documented errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from heinfer.compiler import ClientFunction, Linear, Square, fold_linear, load_onnx
from heinfer.errors import CompileError, UnsupportedOperatorError
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from . import onnx_models as om
from .onnx_models import ModelBuilder, single_node

RNG = np.random.default_rng(7)
CHW = (2, 6, 6)


def _w(*shape: int) -> np.ndarray:
    return RNG.normal(0, 0.5, shape).astype(np.float32)


def _torch_style_flatten() -> bytes:
    """``x.view(x.size(0), -1)`` as torch.onnx.export writes it (Shape/Gather/Concat)."""
    b = ModelBuilder(CHW)
    b.node("Relu", [b.x])
    relu = b.last
    shape = b.node("Shape", [relu])
    dim0 = b.node("Gather", [shape, b.const(0, dtype=np.int64)], axis=0)
    dim0 = b.node("Unsqueeze", [dim0, b.const([0], dtype=np.int64)])
    target = b.node("Concat", [dim0, b.const([-1], dtype=np.int64)], axis=0)
    b.node("Reshape", [relu, target])
    return b.build()


def _folded_weight() -> bytes:
    """A weight computed from constants (Transpose of an initializer, a Constant node)."""
    b = ModelBuilder((5,))
    w = b.node("Transpose", [b.const(_w(3, 5))], perm=[1, 0])
    k = b.node("Constant", [], value=onnx.numpy_helper.from_array(np.float32(2.0)))
    b.node("MatMul", [b.x, w])
    b.node("Mul", [b.last, k])
    return b.build()


# id → (model bytes, per-item input shape)
CASES = {
    # Conv: strides, explicit / asymmetric / automatic padding, no bias, 1-D
    "conv_s1_p1": (single_node("Conv", CHW, [_w(3, 2, 3, 3), _w(3)], pads=[1, 1, 1, 1]), CHW),
    "conv_s2_p1": (
        single_node("Conv", CHW, [_w(3, 2, 3, 3), _w(3)], strides=[2, 2], pads=[1, 1, 1, 1]),
        CHW,
    ),
    "conv_asym_pads_nobias": (
        single_node("Conv", CHW, [_w(4, 2, 2, 3)], strides=[1, 2], pads=[0, 1, 1, 0]),
        CHW,
    ),
    "conv_same_upper_s2": (
        single_node("Conv", CHW, [_w(3, 2, 4, 4), _w(3)], strides=[2, 2], auto_pad="SAME_UPPER"),
        CHW,
    ),
    "conv_same_lower": (
        single_node("Conv", CHW, [_w(3, 2, 2, 2), _w(3)], auto_pad="SAME_LOWER"),
        CHW,
    ),
    "conv_valid": (single_node("Conv", CHW, [_w(3, 2, 3, 3), _w(3)], auto_pad="VALID"), CHW),
    "conv_1d": (
        single_node("Conv", (2, 9), [_w(3, 2, 3), _w(3)], strides=[2], pads=[1, 0]),
        (2, 9),
    ),
    "batchnorm": (
        single_node(
            "BatchNormalization",
            CHW,
            [RNG.uniform(0.5, 2, 2), _w(2), _w(2), RNG.uniform(0.5, 2, 2)],
        ),
        CHW,
    ),
    # dense
    "gemm_transB1": (single_node("Gemm", (6,), [_w(4, 6), _w(4)], transB=1), (6,)),
    "gemm_transB0_alpha_beta": (
        single_node("Gemm", (6,), [_w(6, 4), _w(1, 4)], alpha=0.5, beta=2.0),
        (6,),
    ),
    "gemm_scalar_C": (single_node("Gemm", (6,), [_w(6, 4), _w(1)]), (6,)),
    "gemm_no_C": (single_node("Gemm", (6,), [_w(4, 6)], transB=1), (6,)),
    "matmul": (single_node("MatMul", (6,), [_w(6, 4)]), (6,)),
    "matmul_3d": (single_node("MatMul", (3, 6), [_w(6, 4)]), (3, 6)),
    "matmul_add": (om.mlp((6, 4), matmul=True), (6,)),
    "folded_weight": (_folded_weight(), (5,)),
    # padding and pooling
    "pad_value": (
        single_node("Pad", CHW, [np.array([0, 0, 1, 2, 0, 0, 2, 1]), 0.5], mode="constant"),
        CHW,
    ),
    "pad_crop_axes": (
        single_node("Pad", CHW, [np.array([1, -1, 0, 2]), None, np.array([2, 3])], opset=18),
        CHW,
    ),
    "avgpool_pads_exclude": (
        single_node("AveragePool", CHW, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        CHW,
    ),
    "avgpool_pads_include": (
        single_node(
            "AveragePool", CHW, kernel_shape=[3, 3], pads=[1, 0, 1, 1], count_include_pad=1
        ),
        CHW,
    ),
    "avgpool_same_upper": (
        single_node(
            "AveragePool", (2, 5, 5), kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER"
        ),
        (2, 5, 5),
    ),
    "global_avgpool": (single_node("GlobalAveragePool", CHW), CHW),
    # grouped and depthwise convolutions (MobileNet's depthwise: group = channels)
    "conv_group2": (single_node("Conv", (4, 5, 5), [_w(6, 2, 3, 3), _w(6)], group=2), (4, 5, 5)),
    "conv_depthwise_s2": (
        single_node("Conv", (3, 7, 7), [_w(3, 1, 3, 3)], group=3, strides=[2, 2], pads=[1, 1, 1, 1]),
        (3, 7, 7),
    ),
    "conv_depthwise_multiplier2": (single_node("Conv", (2, 5, 5), [_w(4, 1, 3, 3)], group=2), (2, 5, 5)),
    "maxpool_overlap_pads": (
        single_node("MaxPool", CHW, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        CHW,
    ),
    "maxpool_s2_pads": (
        single_node("MaxPool", CHW, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        CHW,
    ),
    "maxpool_same_upper": (
        single_node(
            "MaxPool", (2, 5, 5), kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_UPPER"
        ),
        (2, 5, 5),
    ),
    # element-wise with constants (numpy broadcasting, either operand order)
    "add_channel": (single_node("Add", CHW, [_w(2, 1, 1)]), CHW),
    "add_const_first": (single_node("Add", CHW, [_w(1, 1, 6, 6)], x_position=1), CHW),
    "add_broadcast_grows": (single_node("Add", (1, 4), [_w(3, 1)]), (1, 4)),
    "sub_x_minus_c": (single_node("Sub", CHW, [_w(6)]), CHW),
    "sub_c_minus_x": (single_node("Sub", CHW, [_w(2, 1, 1)], x_position=1), CHW),
    "mul_channel": (single_node("Mul", CHW, [_w(2, 1, 1)]), CHW),
    "mul_const_first_scalar": (single_node("Mul", CHW, [np.float32(-1.5)], x_position=1), CHW),
    "div_const": (single_node("Div", CHW, [RNG.uniform(0.5, 2, (2, 6, 1))]), CHW),
    "add_x_x": (single_node("Add", (5,), ["x"]), (5,)),
    # polynomial and client-side activations
    "mul_x_x": (single_node("Mul", CHW, ["x"]), CHW),
    "pow_2": (single_node("Pow", CHW, [np.float32(2.0)]), CHW),
    "relu": (single_node("Relu", CHW), CHW),
    "leaky_relu": (single_node("LeakyRelu", CHW, alpha=0.2), CHW),
    "sigmoid": (single_node("Sigmoid", CHW), CHW),
    "tanh": (single_node("Tanh", CHW), CHW),
    "clip_min_max": (single_node("Clip", CHW, [np.float32(-0.3), np.float32(0.4)]), CHW),
    "clip_max_only": (single_node("Clip", CHW, [None, np.float32(0.2)], opset=13), CHW),
    "softmax_2d": (single_node("Softmax", (10,)), (10,)),
    "softmax_4d_axis1": (single_node("Softmax", CHW, axis=1), CHW),
    "softmax_4d_last": (single_node("Softmax", CHW, axis=-1), CHW),
    # reshapes
    "flatten": (single_node("Flatten", CHW), CHW),
    "reshape_zero_minus1": (single_node("Reshape", CHW, [np.array([0, 4, -1])]), CHW),
    "reshape_minus1_first": (single_node("Reshape", CHW, [np.array([-1, 72])]), CHW),
    "reshape_torch_style": (_torch_style_flatten(), CHW),
    "identity": (single_node("Identity", CHW), CHW),
    # global average pools as ReduceMean (torch's dynamo exporter): axes attribute or input
    "reduce_mean_keepdims_opset17": (single_node("ReduceMean", CHW, axes=[2, 3]), CHW),
    "reduce_mean_negative_axes_no_keepdims": (single_node("ReduceMean", CHW, axes=[-1, -2], keepdims=0), CHW),
    "reduce_mean_axes_input_opset18": (single_node("ReduceMean", CHW, [np.array([2, 3])], opset=18), CHW),
    "dropout": (single_node("Dropout", CHW, [np.float32(0.5)]), CHW),
    # small networks
    "cnn_relu_maxpool": (om.conv_net(pool="max"), (1, 8, 8)),
    "cnn_bn_avgpool": (om.conv_net(batchnorm=True, pool="avg"), (1, 8, 8)),
    "cnn_s2_global": (om.conv_net((3, 9, 9), stride=2, pool="global", act="Tanh"), (3, 9, 9)),
    "cnn_square_opset13": (om.conv_net(act="square", pads=0, opset=13), (1, 8, 8)),
    "cnn_pow_opset21": (om.conv_net(act="pow", pool="avg", opset=21), (1, 8, 8)),
    "cryptonets": (om.cryptonets(), (1, 12, 12)),
    "mlp_transB0_softmax": (om.mlp((12, 8, 6), trans_b=0, softmax=True), (12,)),
    "mlp_matmul_sigmoid": (om.mlp((12, 8, 6), act="Sigmoid", matmul=True), (12,)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_onnxruntime(case: str) -> None:
    model, shape = CASES[case]
    x = om.random_input(shape)
    want = om.run_onnxruntime(model, x)
    graph = load_onnx(model)
    assert graph.output_shape == want.shape[1:]
    np.testing.assert_allclose(graph.run(x), want, rtol=1e-5, atol=1e-5)
    folded = fold_linear(graph)
    np.testing.assert_allclose(folded.run(x), want, rtol=1e-5, atol=1e-5)


@st.composite
def _window_nodes(draw: st.DrawFn) -> tuple[bytes, tuple[int, ...]]:
    """A random Conv / AveragePool / MaxPool geometry (strides, pads, auto_pad, kernel)."""
    op = draw(st.sampled_from(["Conv", "AveragePool", "MaxPool"]))
    c, h, w = draw(st.integers(1, 3)), draw(st.integers(3, 7)), draw(st.integers(3, 7))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    attrs: dict = {"strides": [draw(st.integers(1, 3)), draw(st.integers(1, 3))]}
    auto_pad = draw(st.sampled_from(["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]))
    if auto_pad == "NOTSET":
        attrs["pads"] = [draw(st.integers(0, k - 1)) for k in (kh, kw, kh, kw)]
    else:
        attrs["auto_pad"] = auto_pad
        for size, k, stride in zip((h, w), (kh, kw), attrs["strides"]):
            # onnxruntime rejects SAME padding that would be negative (we clamp it to 0)
            assume(auto_pad == "VALID" or (-(-size // stride) - 1) * stride + k >= size)
    if op == "Conv":
        m = draw(st.integers(1, 3))
        consts = [_w(m, c, kh, kw)] + ([_w(m)] if draw(st.booleans()) else [])
    else:
        consts, attrs["kernel_shape"] = [], [kh, kw]
        if op == "AveragePool" and auto_pad == "NOTSET":
            attrs["count_include_pad"] = draw(st.integers(0, 1))
    return single_node(op, (c, h, w), consts, **attrs), (c, h, w)


@settings(max_examples=40, deadline=None)
@given(_window_nodes())
def test_window_geometry_matches_onnxruntime(case: tuple[bytes, tuple[int, ...]]) -> None:
    model, shape = case
    x = om.random_input(shape, batch=2)
    np.testing.assert_allclose(
        load_onnx(model).run(x), om.run_onnxruntime(model, x), rtol=1e-5, atol=1e-5
    )


def test_op_kinds_and_shapes() -> None:
    graph = load_onnx(om.cryptonets())
    assert [type(op) for op in graph.ops] == [Linear, Square, Linear, Square, Linear]
    assert graph.input_shape == (1, 12, 12) and graph.output_shape == (10,)
    assert graph.ops[0].out_shape == (5, 5, 5) and graph.ops[2].in_shape == (125,)
    pool = load_onnx(CASES["maxpool_s2_pads"][0]).ops[0]
    assert isinstance(pool, ClientFunction) and pool.kind == "maxpool"
    assert pool.groups.shape == (2 * 3 * 3, 9) and (pool.groups == -1).any()
    assert pool.positively_homogeneous
    soft = load_onnx(CASES["softmax_4d_axis1"][0]).ops[0]
    assert soft.groups.shape == (36, 2) and not soft.positively_homogeneous
    assert load_onnx(CASES["flatten"][0]).ops == []


def test_matmul_add_is_one_linear() -> None:
    (op,) = load_onnx(CASES["matmul_add"][0]).ops
    assert isinstance(op, Linear) and "+" in op.name


def test_conv_matrix_is_sparse() -> None:
    (op,) = load_onnx(CASES["conv_s1_p1"][0]).ops
    # 3×3 taps, pads 1, 6 positions per axis: 2+3+3+3+3+2 = 16 taps hit the input per axis
    assert op.nnz == 3 * 2 * 16 * 16


def test_empty_node_names_are_synthesized() -> None:
    b = ModelBuilder((4,))
    b.node("Relu", [b.x], name="")
    b.node("Sigmoid", [b.last], name="")
    assert [op.name for op in load_onnx(b.build()).ops] == ["Relu_0", "Sigmoid_1"]


def test_sources_path_bytes_and_proto(tmp_path) -> None:
    model = om.mlp((4, 3))
    path = tmp_path / "m.onnx"
    path.write_bytes(model)
    x = om.random_input((4,))
    outs = [load_onnx(src).run(x) for src in (model, str(path), path, onnx.load_from_string(model))]
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_static_batch_reshape() -> None:
    b = ModelBuilder(CHW, batch=1)
    b.node("Reshape", [b.x, b.const([1, -1], dtype=np.int64)])
    assert load_onnx(b.build()).output_shape == (72,)


# ---- errors -------------------------------------------------------------------------------


def _unsupported(model: bytes) -> UnsupportedOperatorError:
    with pytest.raises(UnsupportedOperatorError) as info:
        load_onnx(model)
    return info.value


def test_unsupported_operator_names_op_and_node() -> None:
    b = ModelBuilder((4,))
    b.node("Relu", [b.x], name="")
    b.node("Exp", [b.last], name="")
    err = _unsupported(b.build())
    assert err.op_type == "Exp" and err.node_name == "Exp_1"
    assert "'Exp'" in str(err) and "'Exp_1'" in str(err) and "Conv" in str(err)


def test_a_group_that_does_not_divide_the_channels_is_refused() -> None:
    with pytest.raises(CompileError, match="group=2 does not divide the 4 input channels and the 3 output"):
        load_onnx(single_node("Conv", (4, 5, 5), [_w(3, 2, 3, 3)], group=2, name="c"))


@pytest.mark.parametrize(
    "model, op_type, words",
    [
        (
            single_node("Conv", CHW, [_w(2, 2, 3, 3)], dilations=[2, 2], name="c"),
            "Conv",
            "dilations",
        ),
        (
            single_node("MaxPool", CHW, kernel_shape=[2, 2], ceil_mode=1, name="c"),
            "MaxPool",
            "ceil_mode",
        ),
        (single_node("Pow", CHW, [np.float32(3.0)], name="c"), "Pow", "exponent"),
        (single_node("Div", CHW, [_w(1)], x_position=1, name="c"), "Div", "polynomial"),
        (single_node("Softmax", (4,), axis=0, name="c"), "Softmax", "batch axis"),
        (single_node("Pad", (4,), [np.array([1, 0, 0, 0])], name="c"), "Pad", "batch axis"),
        (
            single_node("Pad", CHW, [np.array([0, 0, 1, 1, 0, 0, 1, 1])], mode="reflect", name="c"),
            "Pad",
            "reflect",
        ),
        (single_node("MatMul", (4,), [_w(3, 1)], x_position=1, name="c"), "MatMul", "right"),
        (single_node("Flatten", CHW, axis=2, name="c"), "Flatten", "axis"),
    ],
    ids=[
        "conv_dilation",
        "maxpool_ceil",
        "pow3",
        "div_by_x",
        "softmax_batch",
        "pad_batch",
        "pad_reflect",
        "matmul_left_const",
        "flatten_axis2",
    ],
)
def test_unsupported_options(model: bytes, op_type: str, words: str) -> None:
    err = _unsupported(model)
    assert err.op_type == op_type and err.node_name == "c"
    assert words in str(err)


def test_non_constant_weight_is_refused() -> None:
    b = ModelBuilder((4,))
    b.node("MatMul", [b.x, b.x])
    with pytest.raises((UnsupportedOperatorError, CompileError)):
        load_onnx(b.build())


def test_several_outputs_are_refused() -> None:
    b = ModelBuilder((4,))
    r = b.node("Relu", [b.x])
    s = b.node("Sigmoid", [r])
    with pytest.raises(CompileError, match="2 outputs"):
        load_onnx(b.build([r, s]))


@pytest.mark.parametrize("data", [b"", b"not an onnx model", bytes(range(256)) * 4])
def test_malformed_bytes(data: bytes) -> None:
    with pytest.raises(CompileError):
        load_onnx(data)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(CompileError, match="cannot read"):
        load_onnx(tmp_path / "nope.onnx")


@pytest.mark.parametrize("opset", [11, 12, 22])
def test_wrong_opset(opset: int) -> None:
    b = ModelBuilder((4,), opset=opset)
    b.node("Relu", [b.x])
    with pytest.raises(CompileError, match=f"opset {opset}"):
        load_onnx(b.build())


def test_dynamic_feature_dimension_is_refused() -> None:
    b = ModelBuilder((4,))
    b.node("Relu", [b.x])
    model = b.proto()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "F"
    with pytest.raises(CompileError, match="static"):
        load_onnx(model)


def test_compiler_never_imports_the_native_module() -> None:
    """Import heinfer.compiler under a bare ``heinfer`` package (without its __init__, which
    loads the engine) and check that neither heinfer._native nor heinfer.ckks gets imported."""
    import pathlib
    import subprocess
    import sys

    import heinfer.compiler

    package = pathlib.Path(heinfer.compiler.__file__).parents[1]
    code = (
        "import sys, types\n"
        f"pkg = types.ModuleType('heinfer'); pkg.__path__ = [{str(package)!r}]\n"
        "sys.modules['heinfer'] = pkg\n"
        "import heinfer.compiler\n"
        "bad = [m for m in ('heinfer._native', 'heinfer.ckks') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_from_torch_without_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        from heinfer.compiler import from_torch

        with pytest.raises(CompileError, match=r"pip install .heinfer\[torch\]"):
            from_torch(object(), None)
    else:
        pytest.skip("torch is installed")


@pytest.mark.parametrize("axes", [[1], [1, 2, 3], [3]])
def test_a_reduce_mean_that_is_not_a_global_pool_is_refused(axes: list[int]) -> None:
    with pytest.raises(UnsupportedOperatorError, match="ReduceMean over axes"):
        load_onnx(single_node("ReduceMean", CHW, axes=axes))
