"""Generic numpy layers for the sequential networks of GAZELLE's evaluation (§8, Tables 11–12).

``layers.py`` holds the fixed CryptoNets shape; this module is its general sibling: a network is
a list of layers, each with ``forward(x)`` (keeping what its backward pass needs) and
``backward(grad) -> grad of its input``, parameters in ONNX layouts (``Conv`` weights
``(c_out, c_in, k, k)``, ``Gemm`` weights ``(out, in)`` with ``transB=1``), and ``onnx(...)``
returning its node(s). Used by ``models/twoparty.py`` for the networks A and D.
"""

import numpy as np
from onnx import helper


class Conv:
    """2-D convolution, square kernel, zero padding, with bias; im2col forward and backward."""

    def __init__(self, rng, c_in, c_out, k, stride=1, pad=0, gain=np.sqrt(2.0)):
        self.k, self.stride, self.pad = k, stride, pad
        fan_in = c_in * k * k
        self.params = {
            "w": rng.normal(0.0, gain / np.sqrt(fan_in), (c_out, c_in, k, k)),
            "b": np.zeros(c_out),
        }

    def _cols(self, x):
        """Patches ``(N, Ho*Wo, C*k*k)`` of ``x`` (N, C, H, W), channel-major per patch."""
        p, k, s = self.pad, self.k, self.stride
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s]
        n, c, ho, wo = win.shape[:4]
        self.geom = (x.shape, xp.shape, ho, wo)
        return win.transpose(0, 2, 3, 1, 4, 5).reshape(n, ho * wo, c * k * k)

    def forward(self, x):
        """``(N, C_in, H, W) -> (N, C_out, Ho, Wo)``."""
        self.cols = self._cols(x)
        w = self.params["w"]
        _, _, ho, wo = self.geom
        out = self.cols @ w.reshape(w.shape[0], -1).T + self.params["b"]
        return out.transpose(0, 2, 1).reshape(x.shape[0], w.shape[0], ho, wo)

    def backward(self, grad):
        """Accumulates ``self.grads``; returns the gradient of the input (col2im)."""
        w = self.params["w"]
        n, c_out = grad.shape[:2]
        g = grad.reshape(n, c_out, -1)  # (N, C_out, Ho*Wo)
        self.grads = {
            "w": np.einsum("ncp,npk->ck", g, self.cols).reshape(w.shape),
            "b": g.sum(axis=(0, 2)),
        }
        dcols = np.einsum("ncp,ck->npk", g, w.reshape(c_out, -1))
        x_shape, xp_shape, ho, wo = self.geom
        c_in, k, s, p = w.shape[1], self.k, self.stride, self.pad
        dcols = dcols.reshape(n, ho, wo, c_in, k, k)
        dxp = np.zeros(xp_shape)
        for i in range(k):
            for j in range(k):
                dxp[:, :, i : i + s * ho : s, j : j + s * wo : s] += dcols[:, :, :, :, i, j].transpose(
                    0, 3, 1, 2
                )
        return dxp[:, :, p : p + x_shape[2], p : p + x_shape[3]]

    def onnx(self, name, src, dst):
        """The ``Conv`` node; its initializers are ``{name}_w`` and ``{name}_b``."""
        return [
            helper.make_node(
                "Conv",
                [src, f"{name}_w", f"{name}_b"],
                [dst],
                name=name,
                kernel_shape=[self.k] * 2,
                strides=[self.stride] * 2,
                pads=[self.pad] * 4,
            )
        ]


class Dense:
    """``y = x @ W.T + b`` on ``(N, in)``; exported as ``Gemm`` with ``transB=1``."""

    def __init__(self, rng, n_in, n_out, gain=np.sqrt(2.0)):
        self.params = {"w": rng.normal(0.0, gain / np.sqrt(n_in), (n_out, n_in)), "b": np.zeros(n_out)}

    def forward(self, x):
        self.x = x
        return x @ self.params["w"].T + self.params["b"]

    def backward(self, grad):
        self.grads = {"w": grad.T @ self.x, "b": grad.sum(axis=0)}
        return grad @ self.params["w"]

    def onnx(self, name, src, dst):
        return [helper.make_node("Gemm", [src, f"{name}_w", f"{name}_b"], [dst], name=name, transB=1)]


class Relu:
    """``max(x, 0)``."""

    params: dict = {}

    def forward(self, x):
        self.mask = x > 0
        return x * self.mask

    def backward(self, grad):
        return grad * self.mask

    def onnx(self, name, src, dst):
        return [helper.make_node("Relu", [src], [dst], name=name)]


class Square:
    """``x * x``, exported as ``Mul`` of a tensor with itself."""

    params: dict = {}

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, grad):
        return 2.0 * self.x * grad

    def onnx(self, name, src, dst):
        return [helper.make_node("Mul", [src, src], [dst], name=name)]


class MaxPool:
    """Non-overlapping ``k × k`` max-pooling (stride ``k``); H and W must be multiples of k."""

    params: dict = {}

    def __init__(self, k=2):
        self.k = k

    def forward(self, x):
        n, c, h, w = x.shape
        k = self.k
        win = x.reshape(n, c, h // k, k, w // k, k).transpose(0, 1, 2, 4, 3, 5)
        win = win.reshape(n, c, h // k, w // k, k * k)
        self.arg = win.argmax(axis=-1)
        self.shape = x.shape
        return win.max(axis=-1)

    def backward(self, grad):
        n, c, h, w = self.shape
        k = self.k
        dwin = np.zeros((n, c, h // k, w // k, k * k))
        np.put_along_axis(dwin, self.arg[..., None], grad[..., None], axis=-1)
        dwin = dwin.reshape(n, c, h // k, w // k, k, k).transpose(0, 1, 2, 4, 3, 5)
        return dwin.reshape(self.shape)

    def onnx(self, name, src, dst):
        k = self.k
        return [
            helper.make_node("MaxPool", [src], [dst], name=name, kernel_shape=[k, k], strides=[k, k])
        ]


class Flatten:
    """``(N, …) -> (N, prod(…))``, channel-major like ONNX ``Flatten``."""

    params: dict = {}

    def forward(self, x):
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, grad):
        return grad.reshape(self.shape)

    def onnx(self, name, src, dst):
        return [helper.make_node("Flatten", [src], [dst], name=name, axis=1)]


def forward(net, x):
    """Runs every layer of ``net`` on ``x``; returns the logits."""
    for layer in net:
        x = layer.forward(x)
    return x


def backward(net, grad):
    """Back-propagates ``grad`` of the logits; leaves ``layer.grads`` on parametrised layers."""
    for layer in reversed(net):
        grad = layer.backward(grad)


def named_params(net, names):
    """``{f"{name}_{key}": array}`` over the parametrised layers, with their ONNX names."""
    return {f"{n}_{k}": v for n, layer in zip(names, net) for k, v in layer.params.items()}


def named_grads(net, names):
    """The gradients, keyed like :func:`named_params`."""
    return {f"{n}_{k}": v for n, layer in zip(names, net) if layer.params for k, v in layer.grads.items()}
