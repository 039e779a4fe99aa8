"""Deterministic ONNX builders for the generated networks (``cifar.py``, ``mobilenet.py``).

:class:`Builder` collects nodes and initializers (He-initialised convolutions, grouped and
depthwise ones included; BatchNormalization; dense layers); :func:`calibrate_bns` sets every
BatchNormalization's statistics to those of its input over random inputs, in topological
order, so activations keep realistic ranges (the compiler folds BN into the convolution).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Collects nodes and initializers; conv/BN/ReLU helpers name their tensors uniquely."""

    def __init__(self, seed: int, input_shape: tuple[int, ...], classes: int = 10):
        self.input_shape, self.classes = tuple(input_shape), classes
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.bns: list[str] = []  # BN node names, in topological order
        self.n = 0

    def _name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    def conv(self, x: str, c_in: int, c_out: int, k: int, stride: int = 1, pad: int = 0, gain: float = 2.0, group: int = 1) -> str:
        name = self._name("conv")
        w = self.rng.normal(0.0, np.sqrt(gain / (c_in // group * k * k)), (c_out, c_in // group, k, k))
        b = np.zeros(c_out)
        self.inits += [numpy_helper.from_array(w.astype(np.float32), f"{name}_w"),
                       numpy_helper.from_array(b.astype(np.float32), f"{name}_b")]
        self.nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name], name=name,
                                           kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4, group=group))
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
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *self.input_shape])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", self.classes])],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                              producer_name="heinfer models/builder.py",
                              doc_string=f"{name}: deterministic random weights")
        onnx.checker.check_model(m, full_check=True)
        return m


    def relu6(self, x: str) -> str:
        """``Clip(x, 0, 6)`` (ReLU6), with its bounds as initializers (opset ≥ 11)."""
        if not any(t.name == "relu6_min" for t in self.inits):
            self.inits += [numpy_helper.from_array(np.array(0.0, np.float32), "relu6_min"),
                           numpy_helper.from_array(np.array(6.0, np.float32), "relu6_max")]
        return self.op("Clip", [x, "relu6_min", "relu6_max"])


def calibrate_bns(model: onnx.ModelProto, bns: list[str], input_shape: tuple[int, ...], n: int = 64, seed: int = 0) -> None:
    """Sets each BN's mean/var to its input's statistics over random inputs, in order."""
    import onnxruntime as ort

    x = np.random.default_rng(seed).uniform(0.0, 1.0, (n, *input_shape)).astype(np.float32)
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
