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

from builder import Builder, calibrate_bns

NAMES = ("lola_cifar", "minionn_cifar", "resnet20")
INPUT_SHAPE = (3, 32, 32)


def _lola_cifar(b: Builder) -> str:
    x = b.conv("input", 3, 83, 8, stride=2, gain=0.5)
    x = b.op("Mul", [x, x])
    x = b.conv(x, 83, 163, 6, stride=2, gain=0.5)
    x = b.op("Mul", [x, x])
    x = b.op("Flatten", [x], axis=1)
    return b.dense(x, 163 * 4 * 4, 10)


def _minionn_cifar(b: Builder) -> str:
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


def _resnet20(b: Builder) -> str:
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


def build(name: str) -> bytes:
    """The ONNX bytes of network ``name`` (one of :data:`NAMES`), deterministic."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown network {name!r}; choose from {NAMES}")
    fn, seed = _BUILDERS[name]
    b = Builder(seed, INPUT_SHAPE)
    model = b.model(fn(b), name)
    calibrate_bns(model, b.bns, INPUT_SHAPE)
    return model.SerializeToString()


def random_inputs(n: int, seed: int = 1) -> np.ndarray:
    """``n`` random CIFAR-shaped inputs, uniform in [0, 1], float32."""
    return np.random.default_rng(seed).uniform(0.0, 1.0, (n, *INPUT_SHAPE)).astype(np.float32)
