"""heinfer: neural-network inference on homomorphically encrypted data.

Layers (see ARCHITECTURE.md): ``heinfer.ckks`` is the RNS-CKKS engine (Rust, through the
private native module ``heinfer._native``); ``heinfer.errors`` holds every exception class.

>>> import numpy as np
>>> from heinfer import ckks
>>> params = ckks.INSECURE_LOGN10()          # tests only: no security
>>> kg = ckks.KeyGenerator(params)
>>> enc = ckks.Encoder(params)
>>> ct = ckks.Encryptor(params, kg.public_key()).encrypt(enc.encode(np.arange(4.0)))
>>> out = enc.decode(ckks.Decryptor(params, kg.secret_key).decrypt(ct + ct))
>>> bool(np.allclose(out[:4], [0, 2, 4, 6], atol=1e-4))
True
"""

from __future__ import annotations

import importlib

from heinfer.errors import (
    ClusterError,
    CompileError,
    FloodBudgetError,
    EncodingError,
    HeinferError,
    InternalError,
    LevelError,
    MissingKeyError,
    NotSupportedYetError,
    OperandError,
    OutOfRangeWarning,
    PrecisionWarning,
    ParameterError,
    ProtocolError,
    RangeError,
    ScaleError,
    SerializationError,
    ServiceError,
    UnsupportedOperatorError,
)

# The package root is the facade: it loads what a name needs when the name is first used
# (PEP 562), so that importing a lower layer (``heinfer.compiler``, ``heinfer.runtime``) does
# not load the layers above it, nor the native module (ARCHITECTURE.md's layering).
_LAZY = {
    "ckks": ("heinfer.ckks", None),
    "protocol": ("heinfer.protocol", None),
    "program": ("heinfer.program", None),
    "features": ("heinfer.features", None),
    "FeatureExtractor": ("heinfer.features", "FeatureExtractor"),
    "explain": ("heinfer.explanation", "explain"),
    "simulate": ("heinfer.compiler.simulate", "simulate"),
    "tune_precision": ("heinfer.precision", "tune_precision"),
    "compile": ("heinfer.compilation", "compile"),
    "infer": ("heinfer.inference", "infer"),
    "Client": ("heinfer.inference", "Client"),
    "Server": ("heinfer.inference", "Server"),
    "InferenceResult": ("heinfer.inference", "InferenceResult"),
    "Options": ("heinfer.inference", "Options"),
    "Program": ("heinfer.program", "Program"),
    "PublicProgram": ("heinfer.program", "PublicProgram"),
    "load_program": ("heinfer.program", "load"),
    "get_num_threads": ("heinfer.threads", "get_num_threads"),
    "set_num_threads": ("heinfer.threads", "set_num_threads"),
    "__version__": ("heinfer._native", "__version__"),
}


def __getattr__(name: str):
    """Loads a public name of the package on first use (see ``_LAZY``)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'heinfer' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "ckks",
    "compile",
    "infer",
    "explain",
    "simulate",
    "tune_precision",
    "InferenceResult",
    "Options",
    "Program",
    "PublicProgram",
    "OutOfRangeWarning",
    "PrecisionWarning",
    "load_program",
    "FeatureExtractor",
    "Client",
    "Server",
    "NotSupportedYetError",
    "set_num_threads",
    "get_num_threads",
    "HeinferError",
    "InternalError",
    "ServiceError",
    "ClusterError",
    "ParameterError",
    "LevelError",
    "ScaleError",
    "MissingKeyError",
    "SerializationError",
    "EncodingError",
    "OperandError",
    "UnsupportedOperatorError",
    "CompileError",
    "FloodBudgetError",
    "ProtocolError",
    "RangeError",
]
