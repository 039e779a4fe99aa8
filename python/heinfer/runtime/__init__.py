"""Executing compiled programs: the server side of every segment, with the native kernels.

Layer: ``heinfer.runtime`` (imports program and the native module; never protocol or
service). One :class:`Executor` for both layouts; one native call per op and layer: no
Python loop runs per element on the server.
"""

from heinfer.runtime.executor import Executor, native_params
from heinfer.runtime.linear import PreparedLinear

__all__ = ["Executor", "PreparedLinear", "native_params"]
