"""Numpy building blocks for training the bundled models (no torch).

Two network shapes share the same convolution. With a hidden layer (CryptoNets, nGraph-HE2,
Appendix A.1):

    Conv(1->5, 5x5, stride 2, pad 1) -> act -> Flatten -> Gemm(845->100) -> act -> Gemm(100->10)

with ``act`` either ``x**2`` (CryptoNets, no biases) or ReLU (CryptoNets-ReLU, with biases).
Without it (LoLa-Small, LoLa paper, Section 3):

    Conv(1->5, 5x5, stride 2, pad 1) -> x**2 -> Flatten -> Gemm(845->10)

Parameters live in a dict with the ONNX layouts, so export is a plain copy:

    conv_w (5, 1, 5, 5)   conv_b (5,)
    fc1_w  (100, 845)     fc1_b  (100,)     # Gemm with transB=1: y = x @ W.T + b
    fc2_w  (10, 100)      fc2_b  (10,)
    fc_w   (10, 845)      fc_b   (10,)      # instead of fc1/fc2 when there is no hidden layer

The flattened conv output is channel-major ``(c, h, w)``, exactly what ONNX ``Flatten`` yields.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper

IN_HW = 28  # input height = width
K, STRIDE, PAD = 5, 2, 1  # conv kernel size, stride, padding (each side)
C_OUT = 5  # conv output channels
OUT_HW = (IN_HW + 2 * PAD - K) // STRIDE + 1  # 13
FLAT = C_OUT * OUT_HW * OUT_HW  # 845
HIDDEN, CLASSES = 100, 10


def im2col(x):
    """Patches of a batch ``x`` (N, 1, 28, 28) as an array (N, 169, 25).

    Row ``p = i*13 + j`` holds the 5x5 window (row-major ``kh, kw``) whose top-left corner
    is at ``(2i - 1, 2j - 1)`` in the unpadded image (zero padding outside).
    """
    xp = np.pad(x[:, 0], ((0, 0), (PAD, PAD), (PAD, PAD)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(1, 2))
    win = win[:, ::STRIDE, ::STRIDE]  # (N, 13, 13, 5, 5)
    return win.reshape(x.shape[0], OUT_HW * OUT_HW, K * K)


def activation(z, kind):
    """Applies the activation ``kind`` ("square" or "relu") to ``z``."""
    return z * z if kind == "square" else np.maximum(z, 0.0)


def activation_grad(z, kind):
    """Derivative of the activation ``kind`` at the pre-activation ``z``."""
    return 2.0 * z if kind == "square" else (z > 0).astype(z.dtype)


def init_params(rng, bias, act, hidden=True):
    """Random initial parameters; biases (zeros) only if ``bias``; the 100-unit hidden layer
    (``fc1``, ``fc2``) only if ``hidden``, else a single dense layer ``fc``.

    Weights are Gaussian with std ``gain / sqrt(fan_in)``. For ReLU ``gain = sqrt(2)`` (He).
    For x**2 a smaller gain keeps pre-activations O(1): squaring amplifies large values and
    would otherwise make the first steps explode.
    """
    gain = np.sqrt(2.0) if act == "relu" else 0.5
    if hidden:
        shapes = {"conv_w": (C_OUT, 1, K, K), "fc1_w": (HIDDEN, FLAT), "fc2_w": (CLASSES, HIDDEN)}
        fans = {"conv_w": K * K, "fc1_w": FLAT, "fc2_w": HIDDEN}
        biases = {"conv_b": C_OUT, "fc1_b": HIDDEN, "fc2_b": CLASSES}
    else:
        shapes = {"conv_w": (C_OUT, 1, K, K), "fc_w": (CLASSES, FLAT)}
        fans = {"conv_w": K * K, "fc_w": FLAT}
        biases = {"conv_b": C_OUT, "fc_b": CLASSES}
    p = {n: rng.normal(0.0, gain / np.sqrt(fans[n]), s) for n, s in shapes.items()}
    if bias:
        p.update({n: np.zeros(size) for n, size in biases.items()})
    return p


def forward(p, x, act):
    """Forward pass; returns ``(logits, cache)``.

    ``cache`` holds the im2col patches and every pre-activation: ``z1`` (N, 5, 13, 13) after
    the conv, ``z2`` (N, 100) after the first Gemm, plus the activations ``a1`` (N, 845) and
    ``a2`` (N, 100); without a hidden layer (no ``fc1_w`` in ``p``) only ``cols``, ``z1`` and
    ``a1``. Computation follows the dtype of ``x`` and ``p``.
    """
    n = x.shape[0]
    cols = im2col(x)
    z1 = cols @ p["conv_w"].reshape(C_OUT, K * K).T  # (N, 169, 5)
    z1 = z1.transpose(0, 2, 1).reshape(n, C_OUT, OUT_HW, OUT_HW)
    if "conv_b" in p:
        z1 = z1 + p["conv_b"][None, :, None, None]
    a1 = activation(z1, act).reshape(n, FLAT)
    if "fc1_w" not in p:
        logits = a1 @ p["fc_w"].T + p.get("fc_b", 0.0)
        return logits, {"cols": cols, "z1": z1, "a1": a1}
    z2 = a1 @ p["fc1_w"].T + p.get("fc1_b", 0.0)
    a2 = activation(z2, act)
    logits = a2 @ p["fc2_w"].T + p.get("fc2_b", 0.0)
    return logits, {"cols": cols, "z1": z1, "a1": a1, "z2": z2, "a2": a2}


def softmax_xent(logits, y):
    """Mean softmax cross-entropy of ``logits`` (N, 10) against labels ``y``; returns
    ``(loss, dlogits)``."""
    s = logits - logits.max(axis=1, keepdims=True)
    logp = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
    n = y.shape[0]
    grad = np.exp(logp)
    grad[np.arange(n), y] -= 1.0
    return -logp[np.arange(n), y].mean(), grad / n


def backward(p, cache, dlogits, act):
    """Gradients of the loss w.r.t. every parameter, given ``dlogits`` and the forward cache."""
    n = dlogits.shape[0]
    if "fc1_w" in p:
        g = {"fc2_w": dlogits.T @ cache["a2"]}
        dz2 = (dlogits @ p["fc2_w"]) * activation_grad(cache["z2"], act)
        g["fc1_w"] = dz2.T @ cache["a1"]
        da1 = dz2 @ p["fc1_w"]
    else:
        g = {"fc_w": dlogits.T @ cache["a1"]}
        da1 = dlogits @ p["fc_w"]
    dz1 = da1.reshape(cache["z1"].shape) * activation_grad(cache["z1"], act)
    dz1 = dz1.reshape(n, C_OUT, OUT_HW * OUT_HW)  # (N, 5, 169)
    g["conv_w"] = np.einsum("ncp,npk->ck", dz1, cache["cols"]).reshape(C_OUT, 1, K, K)
    if "conv_b" in p:
        g["conv_b"] = dz1.sum(axis=(0, 2))
        if "fc1_w" in p:
            g.update(fc1_b=dz2.sum(axis=0), fc2_b=dlogits.sum(axis=0))
        else:
            g["fc_b"] = dlogits.sum(axis=0)
    return g


class Adam:
    """Adam (Kingma & Ba) with optional clipping of the global gradient norm."""

    def __init__(self, params, lr, clip=None, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.clip, self.b1, self.b2, self.eps, self.t = lr, clip, b1, b2, eps, 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, params, grads):
        """Updates ``params`` in place from ``grads``."""
        if self.clip is not None:
            norm = np.sqrt(sum(float((g * g).sum()) for g in grads.values()))
            if norm > self.clip:
                grads = {k: g * (self.clip / norm) for k, g in grads.items()}
        self.t += 1
        c1, c2 = 1.0 - self.b1**self.t, 1.0 - self.b2**self.t
        for k, g in grads.items():
            self.m[k] = self.b1 * self.m[k] + (1.0 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1.0 - self.b2) * g * g
            params[k] -= self.lr * (self.m[k] / c1) / (np.sqrt(self.v[k] / c2) + self.eps)


def save_model(nodes, inits, name, path, producer, doc, in_shape=(1, IN_HW, IN_HW), out=("logits", CLASSES)):
    """Writes a digits model (input ``input`` (batch, *in_shape), by default (batch, 1, 28, 28);
    output ``out = (name, size)``, by default ``logits`` (batch, 10)) as an opset-17,
    IR-version-8 ONNX file, after the full ONNX checker."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", *in_shape])],
        [helper.make_tensor_value_info(out[0], TensorProto.FLOAT, ["batch", out[1]])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
        producer_name=producer,
        doc_string=doc,
    )
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
