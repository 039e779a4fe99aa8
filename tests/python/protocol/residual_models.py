"""Small residual networks whose skip carries values of either sign (a MobileNetV2-style
linear bottleneck): ``x → Gemm → act → Gemm → + (the first Gemm's output) → act → Gemm``, with
``act`` ReLU or ``Clip(0, 3)``. Deterministic weights; ``reference`` runs them in float64."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def weights() -> dict:
    rng = np.random.default_rng(0)
    return {
        "w1": rng.normal(0, 0.5, (24, 16)), "b1": rng.normal(0, 0.5, 24),
        "w2": rng.normal(0, 0.3, (24, 24)), "b2": rng.normal(0, 0.3, 24),
        "w3": rng.normal(0, 0.3, (4, 24)), "b3": np.zeros(4),
    }  # fmt: skip


def residual_model(act: str) -> bytes:
    """The ONNX bytes of the network with ``act`` ``"relu"`` or ``"clip"``."""
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights().items()]
    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(3, np.float32), "hi")]

    def activation(i: str, o: str):
        return helper.make_node("Clip", [i, "lo", "hi"], [o]) if act == "clip" else helper.make_node("Relu", [i], [o])

    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), activation("h", "a"),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["u"], transB=1), helper.make_node("Add", ["u", "h"], ["r"]),
        activation("r", "a2"), helper.make_node("Gemm", ["a2", "w3", "b3"], ["y"], transB=1),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


def reference(act: str, x: np.ndarray, skip_activated: bool = False) -> np.ndarray:
    """The network in float64; ``skip_activated``: the skip passed through ``act`` as well
    (what a step that applied its function to the values it should keep would compute)."""
    w = weights()
    f = (lambda v: np.maximum(v, 0)) if act == "relu" else (lambda v: np.clip(v, 0, 3))
    h = x @ w["w1"].T + w["b1"]
    r = f(h) @ w["w2"].T + w["b2"] + (f(h) if skip_activated else h)
    return f(r) @ w["w3"].T + w["b3"]


def pooled_skip_model() -> bytes:
    """A convolution whose output ``h`` both goes through ReLU and 2×2 max-pooling and lives
    across that step (a second layer reads it after the step): ``y = W3·relu(W1·maxpool(relu(h))
    + W2·h)``, ``h = conv(x)`` on a 1×4×4 input, 2 channels."""
    rng = np.random.default_rng(3)
    conv_w = rng.normal(0, 0.5, (2, 1, 3, 3)).astype(np.float32)
    conv_b = rng.normal(0, 0.3, 2).astype(np.float32)
    w1, w2 = rng.normal(0, 0.4, (6, 8)).astype(np.float32), rng.normal(0, 0.3, (6, 32)).astype(np.float32)
    w3 = rng.normal(0, 0.4, (3, 6)).astype(np.float32)
    zero6, zero3 = np.zeros(6, np.float32), np.zeros(3, np.float32)
    inits = [numpy_helper.from_array(v, k) for k, v in {
        "cw": conv_w, "cb": conv_b, "w1": w1, "w2": w2, "w3": w3, "z6": zero6, "z3": zero3,
        "shape": np.array([-1, 32], np.int64), "shape8": np.array([-1, 8], np.int64),
    }.items()]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["h"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["m", "shape8"], ["mf"]),
        helper.make_node("Reshape", ["h", "shape"], ["hf"]),
        helper.make_node("Gemm", ["mf", "w1", "z6"], ["u"], transB=1),
        helper.make_node("Gemm", ["hf", "w2", "z6"], ["v"], transB=1),
        helper.make_node("Add", ["u", "v"], ["r"]),
        helper.make_node("Relu", ["r"], ["b"]),
        helper.make_node("Gemm", ["b", "w3", "z3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "pooled_skip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()
