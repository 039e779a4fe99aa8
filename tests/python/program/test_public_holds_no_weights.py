"""The client's artifact holds no weights: the public program's bytes are searched for every
weight and bias of the server's program (an attack test for the README's claim)."""

from __future__ import annotations

import numpy as np
import pytest

import heinfer
from heinfer.program.transform import Transform

DIGITS = np.load("models/digits_test.npz")["x"]


def _secret_values(prog: heinfer.Program) -> np.ndarray:
    vals = []
    for lay in prog.layers:
        if isinstance(lay, Transform):
            vals += [lay.vectors.ravel(), lay.bias.ravel() if lay.bias is not None else np.zeros(0)]
        else:
            vals += [lay.matrix.data, lay.bias if lay.bias is not None else np.zeros(0)]
    v = np.concatenate(vals)
    return np.unique(v[np.abs(v) > 1e-6])  # zeros and tiny values say nothing


@pytest.mark.parametrize("mode", ["throughput", "latency"])
@pytest.mark.parametrize("model", ["models/cryptonets_relu.onnx", "models/cryptonets.onnx"])
def test_public_bytes_hold_no_weight(model: str, mode: str) -> None:
    prog = heinfer.compile(model, mode=mode, calibration=DIGITS[:64], **({"measure_costs": False} if mode == "latency" else {}))
    public = prog.public()
    assert type(public) is heinfer.PublicProgram and not hasattr(public, "layers")
    import zlib

    raw = zlib.decompress(public.to_bytes()[19:])  # the canonical body, uncompressed
    secrets = _secret_values(prog)
    assert len(secrets) > 100
    # every weight as float64 bytes (the format stores arrays so) and as decimal text (JSON)
    for v in secrets[:: max(1, len(secrets) // 2000)]:
        assert np.float64(v).tobytes() not in raw
        assert repr(float(v)).encode() not in raw
    # and a loaded public file is still public; the full file round-trips to a full program
    assert type(heinfer.load_program(public.to_bytes())) is heinfer.PublicProgram
    assert type(heinfer.load_program(prog.to_bytes())) is heinfer.Program
    with pytest.raises(heinfer.ProtocolError, match="full program"):
        heinfer.Server(heinfer.load_program(public.to_bytes()))
