"""MobileNetV2 (Sandler et al. 2018; the torchvision architecture) with deterministic random
weights, as ONNX: nGraph-HE2's headline network (Table 8), width 0.35 at 96–224 px.

Inverted residual blocks (1×1 expansion + BN + ReLU6, 3×3 depthwise + BN + ReLU6, 1×1
projection + BN; a residual addition when the stride is 1 and the widths agree), the
torchvision settings ``(t, c, n, s)`` with channel counts rounded by ``_make_divisible``, a
1×1 convolution to 1,280 channels, global average pooling and a dense layer to 1,000 classes.
ReLU6 is ``Clip(0, 6)``. He-initialised weights from a fixed seed; every BatchNormalization
gets its input's statistics over random inputs (``builder.calibrate_bns``), so activations
have realistic ranges. ``build(width, size)`` returns the model bytes (nothing is written).
"""

from __future__ import annotations

import numpy as np

from builder import Builder, calibrate_bns

#: torchvision's inverted residual settings: expansion t, channels c, repeats n, stride s.
SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
SIZES = (96, 128, 160, 192, 224)
CLASSES = 1000


def _make_divisible(v: float, divisor: int = 8) -> int:
    """torchvision's rounding of channel counts to a multiple of ``divisor`` (never below 90 %)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _conv_bn(b: Builder, x: str, c_in: int, c_out: int, k: int, stride: int = 1, group: int = 1, relu6: bool = True) -> str:
    y = b.bn(b.conv(x, c_in, c_out, k, stride=stride, pad=k // 2, group=group), c_out)
    return b.relu6(y) if relu6 else y


def _network(b: Builder, width: float) -> str:
    c = _make_divisible(32 * width)
    x = _conv_bn(b, "input", 3, c, 3, stride=2)
    for t, ch, n, s in SETTINGS:
        out = _make_divisible(ch * width)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = int(round(c * t))
            y = _conv_bn(b, x, c, hidden, 1) if t != 1 else x
            y = _conv_bn(b, y, hidden, hidden, 3, stride=stride, group=hidden)
            y = _conv_bn(b, y, hidden, out, 1, relu6=False)
            x = b.op("Add", [x, y]) if stride == 1 and c == out else y
            c = out
    last = _make_divisible(1280 * max(1.0, width))
    x = _conv_bn(b, x, c, last, 1)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    return b.dense(x, last, CLASSES)


def build(width: float = 0.35, size: int = 96, seed: int = 21) -> bytes:
    """The ONNX bytes of MobileNetV2 at ``width`` for ``size``×``size`` RGB inputs."""
    if size % 32:
        raise ValueError(f"input size {size} must be a multiple of 32")
    shape = (3, size, size)
    b = Builder(seed, shape, classes=CLASSES)
    model = b.model(_network(b, width), f"mobilenetv2_{int(round(width * 100)):03d}_{size}")
    calibrate_bns(model, b.bns, shape, n=16)
    return model.SerializeToString()


def random_inputs(n: int, size: int = 96, seed: int = 1) -> np.ndarray:
    """``n`` random RGB inputs, uniform in [0, 1], float32."""
    return np.random.default_rng(seed).uniform(0.0, 1.0, (n, 3, size, size)).astype(np.float32)
