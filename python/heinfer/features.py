"""Classifiers on deep features (LoLa §5): a public extractor on the client, a private classifier
on the server.

Layer: the API (beside :mod:`heinfer.inference`). A :class:`FeatureExtractor` is a public ONNX
model (e.g. the first layers of a network trained on public data) that the client runs in the
clear with onnxruntime; only its output — the features — is encrypted, and the server evaluates
its private classifier on them. ``heinfer.compile(classifier, features=extractor, calibration=
raw_inputs)`` sizes the classifier's scales on the extractor's features of the calibration
inputs and records the extractor's SHA-256 in the public program; ``heinfer.infer(program, x,
features=extractor)`` and ``heinfer predict --features extractor.onnx`` run it on raw inputs.
The server never sees the raw input, the features or the extractor.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import numpy as np

from heinfer.errors import CompileError, ProtocolError

__all__ = ["FeatureExtractor", "META_KEY"]

#: The public program's meta field naming the extractor (its SHA-256, hex).
META_KEY = "features_sha256"
#: Largest extractor accepted (bytes).
MAX_EXTRACTOR_BYTES = 1 << 28


class FeatureExtractor:
    """A public ONNX model run in the clear on the client: ``(batch, *in_shape) → (batch, n)``.

    Raises :class:`CompileError` for a model that is not a readable ONNX file with one input
    and one output, and when onnxruntime (``pip install 'heinfer[features]'``) is missing."""

    def __init__(self, model: Any) -> None:
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise CompileError(
                "a feature extractor runs on the client with onnxruntime: install "
                f"heinfer[features] (pip install 'heinfer[features]'); importing it failed: {e}"
            ) from None
        if isinstance(model, FeatureExtractor):
            model = model.data
        if isinstance(model, (str, os.PathLike)):
            with open(model, "rb") as f:
                model = f.read(MAX_EXTRACTOR_BYTES + 1)
        if not isinstance(model, (bytes, bytearray)) or len(model) > MAX_EXTRACTOR_BYTES:
            raise CompileError("a feature extractor is an ONNX file path or its bytes (at most 256 MiB)")
        self.data = bytes(model)
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        try:
            self._sess = ort.InferenceSession(self.data, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise CompileError(f"cannot load the feature extractor: {e}") from None
        ins, outs = self._sess.get_inputs(), self._sess.get_outputs()
        if len(ins) != 1 or len(outs) != 1:
            raise CompileError(f"a feature extractor has one input and one output, this one {len(ins)} and {len(outs)}")
        self._input = ins[0].name
        self.seconds = 0.0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The features of ``x`` as float64 ``(batch, n)``."""
        t0 = time.perf_counter()
        try:
            f = self._sess.run(None, {self._input: np.asarray(x, dtype=np.float32)})[0]
        except Exception as e:
            raise ProtocolError(f"the feature extractor cannot run on inputs of shape {np.shape(x)}: {e}") from None
        self.seconds += time.perf_counter() - t0
        return np.asarray(f, dtype=np.float64).reshape(len(f), -1)

    def check_program(self, meta: dict) -> None:
        """Refuses a program compiled for another extractor (or for none)."""
        want = meta.get(META_KEY)
        if want is None:
            raise ProtocolError("this program takes raw model inputs, not features: give no feature extractor")
        if want != self.sha256:
            raise ProtocolError(f"this program was compiled for the feature extractor {want[:16]}…, not {self.sha256[:16]}…")
