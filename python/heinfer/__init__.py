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

from heinfer import _native, ckks
from heinfer.errors import (
    CompileError,
    EncodingError,
    HeinferError,
    LevelError,
    MissingKeyError,
    NotSupportedYetError,
    OperandError,
    OutOfRangeWarning,
    ParameterError,
    ProtocolError,
    RangeError,
    ScaleError,
    SerializationError,
    ServiceError,
    UnsupportedOperatorError,
)
from heinfer.explain import explain
from heinfer.inference import Client, InferenceResult, Options, Server, compile, infer
from heinfer.program import Program, PublicProgram
from heinfer.program import load as load_program
from heinfer.threads import get_num_threads, set_num_threads

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "ckks",
    "compile",
    "infer",
    "explain",
    "InferenceResult",
    "Options",
    "Program",
    "PublicProgram",
    "OutOfRangeWarning",
    "load_program",
    "Client",
    "Server",
    "NotSupportedYetError",
    "set_num_threads",
    "get_num_threads",
    "HeinferError",
    "ServiceError",
    "ParameterError",
    "LevelError",
    "ScaleError",
    "MissingKeyError",
    "SerializationError",
    "EncodingError",
    "OperandError",
    "UnsupportedOperatorError",
    "CompileError",
    "ProtocolError",
    "RangeError",
]
