"""CIFAR-10-shaped networks with deterministic random weights (no CIFAR data offline).

Builds, as ONNX models (opset 17, input ``input`` float32 ``[batch, 3, 32, 32]``, output
``logits`` ``[batch, 10]``):

- ``lola_cifar``: LoLa's CIFAR network as collapsed for inference (LoLa §4): Conv 3→83 8×8
  stride 2 → x² → Conv 83→163 6×6 stride 2 → x² → Flatten → Gemm 2608→10.
- ``minionn_cifar``: GAZELLE/MiniONN's CIFAR net: Conv 3×3 64 (pad 1) ×2 with ReLU, mean-pool
  2×2, Conv 3×3 64 ×2 with ReLU, mean-pool 2×2, Conv 3×3 64, Conv 1×1 64, Conv 1×1 16 (ReLU
  after each), Flatten → Gemm 1024→10.
- ``resnet20``: ResNet-20 for CIFAR (He et al. 2016 §4.2): Conv 3×3 16 + BN + ReLU, three
  stages of three basic blocks (16, 32, 64 channels; stride 2 and a 1×1 Conv + BN projection
  at the first block of stages 2 and 3), GlobalAveragePool, Gemm 64→10.

Weights are He-initialised from a fixed seed. Every BatchNormalization gets the statistics of
its input over random inputs (uniform in [0, 1]), so activations have realistic ranges; the
compiler folds BN into the convolution. ``build(name)`` returns the model bytes; nothing is
written to disk (the models are small to generate and large to ship).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NAMES = ("lola_cifar", "minionn_cifar", "resnet20")
INPUT_SHAPE = (3, 32, 32)


class _Builder:
    """Collects nodes and initializers; conv/BN/ReLU helpers name their tensors uniquely."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.bns: list[str] = []  # BN node names, in topological order
        self.n = 0

    def _name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, pad: int = 0, gain: float = 2.0) -> str:
        name = self._name("conv")
        w = self.rng.normal(0.0, np.sqrt(gain / (c_in * k * k)), (c_out, c_in, k, k))
        b = np.zeros(c_out)
        self.inits += [numpy_helper.from_array(w.astype(np.float32), f"{name}_w"),
                       numpy_helper.from_array(b.astype(np.float32), f"{name}_b")]
        self.nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name], name=name,
                                           kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4))
        return name

    def bn(self, x: str, c: int) -> str:
        name = self._name("bn")
        for suffix, value in (("scale", 1.0), ("bias", 0.0), ("mean", 0.0), ("var", 1.0)):
            self.inits.append(numpy_helper.from_array(np.full(c, value, np.float32), f"{name}_{suffix}"))
        self.nodes.append(helper.make_node(
            "BatchNormalization", [x] + [f"{name}_{s}" for s in ("scale", "bias", "mean", "var")],
            [name], name=name, epsilon=1e-5))
        self.bns.append(name)
        return name

    def op(self, kind: str, inputs: list[str], **attrs) -> str:
        name = self._name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def dense(self, x: str, n_in: int, n_out: int) -> str:
        name = self._name("fc")
        w = self.rng.normal(0.0, np.sqrt(1.0 / n_in), (n_out, n_in))
        self.inits += [numpy_helper.from_array(w.astype(np.float32), f"{name}_w"),
                       numpy_helper.from_array(np.zeros(n_out, np.float32), f"{name}_b")]
        self.nodes.append(helper.make_node("Gemm", [x, f"{name}_w", f"{name}_b"], [name], name=name, transB=1))
        return name

    def model(self, out: str, name: str) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("Identity", [out], ["logits"], name="output"))
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *INPUT_SHAPE])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="heinfer models/cifar.py",
                              doc_string=f"{name}: CIFAR-10-shaped, deterministic random weights")
        onnx.checker.check_model(m, full_check=True)
        return m


def _lola_cifar(b: _Builder) -> str:
    x = b.conv("input", 3, 83, 8, stride=2, gain=0.5)
    x = b.op("Mul", [x, x])
    x = b.conv(x, 83, 163, 6, stride=2, gain=0.5)
    x = b.op("Mul", [x, x])
    x = b.op("Flatten", [x], axis=1)
    return b.dense(x, 163 * 4 * 4, 10)


def _minionn_cifar(b: _Builder) -> str:
    x, c = "input", 3
    for stage in range(2):
        for _ in range(2):
            x = b.op("Relu", [b.conv(x, c, 64, 3, pad=1)])
            c = 64
        x = b.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.op("Relu", [b.conv(x, 64, 64, 3, pad=1)])
    x = b.op("Relu", [b.conv(x, 64, 64, 1)])
    x = b.op("Relu", [b.conv(x, 64, 16, 1)])
    x = b.op("Flatten", [x], axis=1)
    return b.dense(x, 16 * 8 * 8, 10)


def _resnet20(b: _Builder) -> str:
    x = b.op("Relu", [b.bn(b.conv("input", 3, 16, 3, pad=1), 16)])
    c = 16
    for stage, width in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            y = b.op("Relu", [b.bn(b.conv(x, c, width, 3, stride=stride, pad=1), width)])
            y = b.bn(b.conv(y, width, width, 3, pad=1), width)
            skip = x if stride == 1 and c == width else b.bn(b.conv(x, c, width, 1, stride=stride), width)
            x = b.op("Relu", [b.op("Add", [y, skip])])
            c = width
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    return b.dense(x, 64, 10)


_BUILDERS = {"lola_cifar": (_lola_cifar, 11), "minionn_cifar": (_minionn_cifar, 12), "resnet20": (_resnet20, 13)}


def _calibrate_bns(model: onnx.ModelProto, bns: list[str], n: int = 64, seed: int = 0) -> None:
    """Sets each BN's mean/var to its input's statistics over random inputs, in order."""
    import onnxruntime as ort

    x = np.random.default_rng(seed).uniform(0.0, 1.0, (n, *INPUT_SHAPE)).astype(np.float32)
    inits = {t.name: t for t in model.graph.initializer}
    inputs_of = {node.name: node.input[0] for node in model.graph.node}
    for name in bns:
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        probe.graph.output.append(helper.make_tensor_value_info(inputs_of[name], TensorProto.FLOAT, None))
        sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        v = sess.run([inputs_of[name]], {"input": x})[0]
        for suffix, value in (("mean", v.mean(axis=(0, 2, 3))), ("var", v.var(axis=(0, 2, 3)))):
            inits[f"{name}_{suffix}"].CopyFrom(numpy_helper.from_array(value.astype(np.float32), f"{name}_{suffix}"))


def build(name: str) -> bytes:
    """The ONNX bytes of network ``name`` (one of :data:`NAMES`), deterministic."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown network {name!r}; choose from {NAMES}")
    fn, seed = _BUILDERS[name]
    b = _Builder(seed)
    model = b.model(fn(b), name)
    _calibrate_bns(model, b.bns)
    return model.SerializeToString()


def random_inputs(n: int, seed: int = 1) -> np.ndarray:
    """``n`` random CIFAR-shaped inputs, uniform in [0, 1], float32."""
    return np.random.default_rng(seed).uniform(0.0, 1.0, (n, *INPUT_SHAPE)).astype(np.float32)
