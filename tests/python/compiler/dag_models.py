"""Small graph-shaped ONNX models (branches, residual additions, concatenations), built with
``onnx.helper`` through :class:`~.onnx_models.ModelBuilder`. Each builder returns the
serialized model; :data:`DAG_MODELS` maps a name to ``(builder, per-item input shape)``."""

from __future__ import annotations

import numpy as np

from .onnx_models import ModelBuilder

__all__ = ["DAG_MODELS"]


def residual_block(seed: int = 3) -> bytes:
    """conv → relu → conv → add(skip = the input) → relu → GlobalAveragePool → Flatten → Gemm
    on 2×5×5: a skip across a client-aided step."""
    b = ModelBuilder((2, 5, 5), seed=seed)
    x = b.x
    b.node("Conv", [x, b.weight(2, 2, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("Conv", [b.last, b.weight(2, 2, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    b.node("Add", [b.last, x])
    b.node("Relu", [b.last])
    b.node("GlobalAveragePool", [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(4, 2), b.weight(4)], transB=1)
    return b.build()


def two_residual_blocks(seed: int = 4) -> bytes:
    """conv → relu → [conv → relu → conv → add(skip) → relu] → Flatten → Gemm on 1×4×4: the
    skip is a client step's output (it lives across the next client step)."""
    b = ModelBuilder((1, 4, 4), seed=seed)
    b.node("Conv", [b.x, b.weight(2, 1, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    skip = b.node("Relu", [b.last])
    b.node("Conv", [skip, b.weight(2, 2, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    b.node("Relu", [b.last])
    b.node("Conv", [b.last, b.weight(2, 2, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    b.node("Add", [skip, b.last])
    b.node("Relu", [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(5, 32), b.weight(5)], transB=1)
    return b.build()


def concat_branches(seed: int = 5) -> bytes:
    """Two convolutions of the input concatenated along channels → Relu → Flatten → Gemm."""
    b = ModelBuilder((2, 4, 4), seed=seed)
    a = b.node("Conv", [b.x, b.weight(2, 2, 3, 3), b.weight(2)], pads=[1, 1, 1, 1])
    c = b.node("Conv", [b.x, b.weight(3, 2, 1, 1), b.weight(3)])
    b.node("Concat", [a, c], axis=1)
    b.node("Relu", [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(4, 80), b.weight(4)], transB=1)
    return b.build()


def sub_branches(seed: int = 6) -> bytes:
    """relu(x W1) − clip(x W2, 0, 6) → Gemm: Sub of two branches that went through client steps
    (Clip(0, 6) is ReLU6)."""
    b = ModelBuilder((8,), seed=seed)
    r = b.node("Relu", [b.node("Gemm", [b.x, b.weight(6, 8), b.weight(6)], transB=1)])
    g = b.node("Gemm", [b.x, b.weight(6, 8), b.weight(6)], transB=1)
    c = b.node("Clip", [g, b.const(np.float32(0.0)), b.const(np.float32(6.0))])
    b.node("Sub", [r, c])
    b.node("Gemm", [b.last, b.weight(3, 6), b.weight(3)], transB=1)
    return b.build()


def linear_branches_meet(seed: int = 7) -> bytes:
    """x A + x B (two linear branches that meet: one Linear after folding) → Relu → Gemm."""
    b = ModelBuilder((6,), seed=seed)
    a = b.node("MatMul", [b.x, b.weight(6, 5)])
    c = b.node("MatMul", [b.x, b.weight(6, 5)])
    b.node("Add", [a, c])
    b.node("Relu", [b.last])
    b.node("Gemm", [b.last, b.weight(3, 5), b.weight(3)], transB=1)
    return b.build()


def inverted_residual(seed: int = 8) -> bytes:
    """MobileNetV2's block: 1×1 expand → Clip(0, 6) → depthwise 3×3 (group = 4) → 1×1 project →
    add(skip) → GlobalAveragePool → Flatten → Gemm, with an Identity on the skip."""
    b = ModelBuilder((2, 4, 4), seed=seed)
    skip = b.node("Identity", [b.x])
    b.node("Conv", [b.x, b.weight(4, 2, 1, 1), b.weight(4)])
    b.node("Clip", [b.last, b.const(np.float32(0.0)), b.const(np.float32(6.0))])
    b.node("Conv", [b.last, b.weight(4, 1, 3, 3), b.weight(4)], pads=[1, 1, 1, 1], group=4)
    b.node("Conv", [b.last, b.weight(2, 4, 1, 1), b.weight(2)])
    b.node("Add", [b.last, skip])
    b.node("GlobalAveragePool", [b.last])
    b.node("Reshape", [b.last, b.const([0, -1], dtype=np.int64)])
    b.node("Gemm", [b.last, b.weight(3, 2), b.weight(3)], transB=1)
    return b.build()


def transpose_net(seed: int = 9) -> bytes:
    """Conv → Transpose(0, 2, 3, 1) (channels last) → Flatten → Gemm."""
    b = ModelBuilder((2, 3, 4), seed=seed)
    b.node("Conv", [b.x, b.weight(3, 2, 1, 1), b.weight(3)])
    b.node("Transpose", [b.last], perm=[0, 2, 3, 1])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(4, 36), b.weight(4)], transB=1)
    return b.build()


def linear_and_square(seed: int = 10) -> bytes:
    """x W + x² (a tensor read by a Linear and a Square) → Gemm."""
    b = ModelBuilder((5,), seed=seed)
    a = b.node("MatMul", [b.x, b.weight(5, 5)])
    s = b.node("Mul", [b.x, b.x])
    b.node("Add", [a, s])
    b.node("Gemm", [b.last, b.weight(3, 5), b.weight(3)], transB=1)
    return b.build()


def square_then_skip(seed: int = 11) -> bytes:
    """Gemm → x² → [Gemm → Relu → Gemm] + skip(x²) → Gemm: a skip that starts after a square."""
    b = ModelBuilder((6,), seed=seed)
    b.node("Gemm", [b.x, b.weight(6, 6), b.weight(6)], transB=1)
    s = b.node("Mul", [b.last, b.last])
    b.node("Gemm", [s, b.weight(6, 6), b.weight(6)], transB=1)
    b.node("Relu", [b.last])
    b.node("Gemm", [b.last, b.weight(6, 6), b.weight(6)], transB=1)
    b.node("Add", [b.last, s])
    b.node("Gemm", [b.last, b.weight(3, 6), b.weight(3)], transB=1)
    return b.build()


#: name → (builder, per-item input shape)
def downsampling_block(seed: int = 12) -> bytes:
    """ResNet's downsampling block on 4×16×16: conv 3×3 stride 2 → relu → conv 3×3, plus the
    shortcut's 1×1 stride-2 projection of the input → add → relu → Flatten → Gemm. The strided
    layers are where latency mode's aligned grids pay (too many rows for LoLa's expanded input)."""
    b = ModelBuilder((4, 16, 16), seed=seed)
    x = b.x
    b.node("Conv", [x, b.weight(8, 4, 3, 3), b.weight(8)], pads=[1, 1, 1, 1], strides=[2, 2])
    b.node("Relu", [b.last])
    main = b.node("Conv", [b.last, b.weight(8, 8, 3, 3), b.weight(8)], pads=[1, 1, 1, 1])
    short = b.node("Conv", [x, b.weight(8, 4, 1, 1), b.weight(8)], strides=[2, 2])
    b.node("Add", [main, short])
    b.node("Relu", [b.last])
    b.node("Flatten", [b.last], axis=1)
    b.node("Gemm", [b.last, b.weight(5, 512), b.weight(5)], transB=1)
    return b.build()


DAG_MODELS = {
    "residual-block": (residual_block, (2, 5, 5)),
    "two-residual-blocks": (two_residual_blocks, (1, 4, 4)),
    "concat-branches": (concat_branches, (2, 4, 4)),
    "sub-branches": (sub_branches, (8,)),
    "linear-branches-meet": (linear_branches_meet, (6,)),
    "inverted-residual": (inverted_residual, (2, 4, 4)),
    "transpose": (transpose_net, (2, 3, 4)),
    "square-then-skip": (square_then_skip, (6,)),
    "linear-and-square": (linear_and_square, (5,)),
    "downsampling-block": (downsampling_block, (4, 16, 16)),
}
