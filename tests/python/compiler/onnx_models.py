"""Small ONNX models for compiler tests, built with ``onnx.helper`` (no torch needed).

:class:`ModelBuilder` writes a model node by node; the functions below build the networks the
tests share (``conv_net``, ``mlp``, ``cryptonets``, ``single_node``). Every builder returns the
serialized model (``bytes``); weights are seeded, float32 and scaled by 1/sqrt(fan-in) so that
activations stay near 1 and float32 references agree with float64 to ~1e-6.
:func:`run_onnxruntime` is the reference executor; :func:`run_float64` is the reference for
plans more precise than float32 (onnx's own evaluator on a float64 copy of the model).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "ModelBuilder",
    "conv_net",
    "cryptonets",
    "mlp",
    "random_input",
    "run_float64",
    "run_onnxruntime",
    "single_node",
]


class ModelBuilder:
    """Builds a one-input, one-output ONNX model node by node.

    >>> b = ModelBuilder((4,))
    >>> y = b.node("Relu", [b.x])
    >>> isinstance(b.build(), bytes)
    True
    """

    def __init__(
        self,
        input_shape: Sequence[int],
        opset: int = 17,
        seed: int = 0,
        batch: int | str = "N",
        input_name: str = "x",
    ) -> None:
        self.input_shape = tuple(input_shape)
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.x = input_name
        self.last = input_name
        self._input = helper.make_tensor_value_info(
            input_name, TensorProto.FLOAT, [batch, *self.input_shape]
        )
        self._nodes: list[onnx.NodeProto] = []
        self._inits: list[onnx.TensorProto] = []
        self._count = 0

    def const(self, value: object, name: str | None = None, dtype: object = np.float32) -> str:
        """Add an initializer holding ``value``; returns its name."""
        self._count += 1
        name = name or f"c{self._count}"
        self._inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, *shape: int, fan_in: int | None = None) -> str:
        """Add a random N(0, 1/fan_in) initializer of ``shape`` (fan_in: product of shape[1:])."""
        fan_in = fan_in or int(np.prod(shape[1:])) or 1
        return self.const(self.rng.normal(0, 1 / np.sqrt(fan_in), shape))

    def node(
        self,
        op_type: str,
        inputs: Sequence[str],
        name: str | None = None,
        n_outputs: int = 1,
        domain: str = "",
        **attrs: object,
    ) -> str:
        """Add a node; returns its first output, which becomes :attr:`last`.

        ``name=None`` names it ``{op_type}{k}``; ``name=''`` leaves it unnamed.
        """
        self._count += 1
        outputs = [f"t{self._count}_{i}" for i in range(n_outputs)]
        name = f"{op_type}{self._count}" if name is None else name
        self._nodes.append(
            helper.make_node(op_type, list(inputs), outputs, name=name, domain=domain, **attrs)
        )
        self.last = outputs[0]
        return outputs[0]

    def proto(self, outputs: Sequence[str] | None = None) -> onnx.ModelProto:
        """The ModelProto with graph outputs ``outputs`` (default: the last node's output)."""
        outputs = list(outputs or [self.last])
        graph = helper.make_graph(
            self._nodes,
            "test",
            [self._input],
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
            self._inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = min(model.ir_version, 9)  # onnxruntime reads up to IR 10
        inferred = onnx.shape_inference.infer_shapes(model)
        by_name = {v.name: v for v in inferred.graph.value_info}
        for out in model.graph.output:  # give outputs their inferred types
            if out.name in by_name:
                out.type.CopyFrom(by_name[out.name].type)
            else:
                for o in inferred.graph.output:
                    if o.name == out.name:
                        out.type.CopyFrom(o.type)
        return model

    def build(self, outputs: Sequence[str] | None = None) -> bytes:
        """The serialized model (see :meth:`proto`)."""
        return self.proto(outputs).SerializeToString()


def single_node(
    op_type: str,
    input_shape: Sequence[int],
    consts: Sequence[object] = (),
    x_position: int = 0,
    opset: int = 17,
    name: str | None = None,
    **attrs: object,
) -> bytes:
    """A model of one node reading the input at ``x_position`` and constants ``consts``.

    Each entry of ``consts`` is an array (an initializer; float32 unless it is an int64 array),
    None (an omitted optional input) or the string ``'x'`` (the input again).
    """
    b = ModelBuilder(input_shape, opset=opset)
    inputs: list[str] = []
    for c in consts:
        if c is None:
            inputs.append("")
        elif isinstance(c, str):
            inputs.append(b.x)
        else:
            arr = np.asarray(c)
            inputs.append(b.const(arr, dtype=np.int64 if arr.dtype == np.int64 else np.float32))
    inputs.insert(x_position, b.x)
    while inputs and inputs[-1] == "":
        inputs.pop()
    b.node(op_type, inputs, name=name, **attrs)
    return b.build()


def _activation(b: ModelBuilder, act: str | None) -> None:
    if act == "relu":
        b.node("Relu", [b.last])
    elif act == "square":
        b.node("Mul", [b.last, b.last])
    elif act == "pow":
        b.node("Pow", [b.last, b.const(2.0)])
    elif act is not None:
        b.node(act, [b.last])


def conv_net(
    in_shape: Sequence[int] = (1, 8, 8),
    channels: int = 4,
    kernel: int = 3,
    stride: int = 1,
    pads: int = 1,
    batchnorm: bool = False,
    act: str | None = "relu",
    pool: str | None = None,
    classes: int = 10,
    seed: int = 0,
    opset: int = 17,
) -> bytes:
    """Conv → [BatchNorm] → [act] → [pool] → Flatten → Gemm(transB=1).

    ``act``: 'relu', 'square', 'pow', another ONNX op type or None; ``pool``: 'avg' (2×2,
    stride 2), 'max' (3×3, stride 2, pads 1: overlapping), 'global' or None.
    """
    b = ModelBuilder(in_shape, opset=opset, seed=seed)
    c_in, h, w = in_shape
    b.node(
        "Conv",
        [b.x, b.weight(channels, c_in, kernel, kernel), b.weight(channels)],
        strides=[stride, stride],
        pads=[pads] * 4,
    )
    h, w = (h + 2 * pads - kernel) // stride + 1, (w + 2 * pads - kernel) // stride + 1
    if batchnorm:
        r = b.rng
        b.node(
            "BatchNormalization",
            [
                b.last,
                b.const(r.uniform(0.5, 1.5, channels)),
                b.const(r.normal(0, 0.1, channels)),
                b.const(r.normal(0, 0.1, channels)),
                b.const(r.uniform(0.5, 1.5, channels)),
            ],
            epsilon=1e-3,
        )
    _activation(b, act)
    if pool == "avg":
        b.node("AveragePool", [b.last], kernel_shape=[2, 2], strides=[2, 2])
        h, w = h // 2, w // 2
    elif pool == "max":
        b.node("MaxPool", [b.last], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        h, w = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    elif pool == "global":
        b.node("GlobalAveragePool", [b.last])
        h = w = 1
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(classes, channels * h * w), b.weight(classes)], transB=1)
    return b.build()


def mlp(
    sizes: Sequence[int] = (16, 8, 4),
    act: str | None = "relu",
    trans_b: int = 1,
    matmul: bool = False,
    softmax: bool = False,
    seed: int = 0,
    opset: int = 17,
) -> bytes:
    """Dense layers ``sizes[0] → … → sizes[-1]`` with ``act`` between them.

    Each layer is Gemm (``transB=trans_b``, alpha 0.9, beta 1.1) or, with ``matmul=True``,
    MatMul followed by Add of the bias; an optional Softmax ends the network.
    """
    b = ModelBuilder((sizes[0],), opset=opset, seed=seed)
    for i, (k, m) in enumerate(itertools.pairwise(sizes)):
        if i:
            _activation(b, act)
        if matmul:
            b.node("MatMul", [b.last, b.weight(k, m, fan_in=k)])
            b.node("Add", [b.last, b.weight(m, fan_in=k)])
        else:
            w = b.weight(m, k) if trans_b else b.weight(k, m, fan_in=k)
            b.node("Gemm", [b.last, w, b.weight(m, fan_in=k)], transB=trans_b, alpha=0.9, beta=1.1)
    if softmax:
        b.node("Softmax", [b.last])
    return b.build()


def cryptonets(in_shape: Sequence[int] = (1, 12, 12), seed: int = 0, opset: int = 17) -> bytes:
    """CryptoNets-like: Conv(5×5, stride 2) → x*x → Flatten → Gemm → Pow 2 → Gemm."""
    b = ModelBuilder(in_shape, opset=opset, seed=seed)
    c, h, w = in_shape
    b.node("Conv", [b.x, b.weight(5, c, 5, 5), b.weight(5)], strides=[2, 2], pads=[1, 1, 1, 1])
    h, w = (h + 2 - 5) // 2 + 1, (w + 2 - 5) // 2 + 1
    _activation(b, "square")
    b.node("Flatten", [b.last])
    b.node("Gemm", [b.last, b.weight(20, 5 * h * w), b.weight(20)], transB=1)
    _activation(b, "pow")
    b.node("Gemm", [b.last, b.weight(20, 10, fan_in=20), b.weight(10)])
    return b.build()


def random_input(shape: Sequence[int], batch: int = 3, seed: int = 1) -> np.ndarray:
    """A seeded float32 batch of shape ``(batch, *shape)`` with entries in [-1, 1]."""
    return np.random.default_rng(seed).uniform(-1, 1, (batch, *shape)).astype(np.float32)


def run_onnxruntime(model: bytes, x: np.ndarray) -> np.ndarray:
    """The model's output on ``x`` according to onnxruntime (single-threaded CPU)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    (name,) = [i.name for i in session.get_inputs()]
    return session.run(None, {name: x})[0]


def run_float64(model: bytes, x: np.ndarray) -> np.ndarray:
    """The model's output on ``x`` computed in float64 by onnx's reference evaluator, on a copy
    of the model whose float32 tensors (initializers, constants, inputs, outputs, ``Cast``
    targets) are float64 — the same weights, exactly, with no float32 rounding on the way.

    onnxruntime's float32 result is itself off by a few units in the last place of its outputs
    (5.1e-7 on ``conv_net`` outputs near 2.7): a plan compiled with ``precision_bits=30``
    promises less error than that, so its check needs this reference, not onnxruntime's."""
    from onnx.reference import ReferenceEvaluator

    m = onnx.load_from_string(model)
    g = m.graph

    def widened(t: onnx.TensorProto) -> onnx.TensorProto:
        return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)

    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(widened(t))
    for v in [*g.input, *g.output, *g.value_info]:
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in g.node:
        for a in node.attribute:
            if a.name == "to" and node.op_type == "Cast" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.DOUBLE
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(widened(a.t))
    (name,) = [i.name for i in g.input if i.name not in {t.name for t in g.initializer}]
    return ReferenceEvaluator(m).run(None, {name: np.asarray(x, dtype=np.float64)})[0]


def squares_then_relu(seed: int = 5) -> bytes:
    """Gemm → x² → Gemm → x² → Gemm → x² → Gemm → Relu → Gemm on 8 inputs: a deep first
    segment (input at the top level; the second square relinearized first, so a
    relinearization key is needed — the third is an open tail) and a shallow second one
    (input at level 0)."""
    b = ModelBuilder((8,), seed=seed)
    for i, (k, m) in enumerate([(8, 8), (8, 8), (8, 8), (8, 8), (8, 4)]):
        if i in (1, 2, 3):
            b.node("Mul", [b.last, b.last])
        if i == 4:
            b.node("Relu", [b.last])
        b.node("Gemm", [b.last, b.weight(m, k), b.weight(m, fan_in=k)], transB=1)
    return b.build()


def relu_maxpool(in_shape: Sequence[int] = (2, 6, 6), channels: int = 3, classes: int = 6, seed: int = 4) -> bytes:
    """Conv(3×3, pad 1) → Relu → MaxPool(2×2, disjoint windows) → Gemm."""
    c_in, h, w = in_shape
    b = ModelBuilder(in_shape, seed=seed)
    b.node("Conv", [b.x, b.weight(channels, c_in, 3, 3), b.weight(channels)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("MaxPool", [b.last], kernel_shape=[2, 2], strides=[2, 2])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(classes, channels * (h // 2) * (w // 2)), b.weight(classes)], transB=1)
    return b.build()


def relu_avgpool_conv(seed: int = 7) -> bytes:
    """MiniONN CIFAR's pattern: Conv 3×3 → ReLU → AveragePool 2×2 → Conv 3×3 → ReLU → Gemm
    on (2, 8, 8) (the pool right after a client step: summed by the client, or on shares)."""
    b = ModelBuilder((2, 8, 8), seed=seed)
    b.node("Conv", [b.x, b.weight(4, 2, 3, 3), b.weight(4)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("AveragePool", [b.last], kernel_shape=[2, 2], strides=[2, 2])
    b.node("Conv", [b.last, b.weight(4, 4, 3, 3), b.weight(4)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(5, 64), b.weight(5)], transB=1)
    return b.build()
