"""Executing compiled programs: the server side of every segment, with the native kernels.

One native call per instruction and layer (``heinfer._native``): no Python loop runs per
ciphertext or per element on the server.
"""

from heinfer.runtime.linear import PreparedLinear
from heinfer.runtime.segment import run_segment

__all__ = ["PreparedLinear", "run_segment"]
