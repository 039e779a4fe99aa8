"""Batch-axis programs hold whole tensors: the executor predicts the ciphertext bytes of its
largest segment and refuses a program that cannot fit, before any query."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import heinfer
from heinfer.errors import NotSupportedYetError
from heinfer.runtime.batch import peak_ciphertext_bytes
from heinfer.runtime.executor import Executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402


@pytest.fixture(scope="module")
def program():
    model = om.mlp((16, 12, 4), act="relu")
    return heinfer.compile(model, mode="throughput", calibration=om.random_input((16,), 32, seed=3))


def test_the_peak_is_the_widest_layer_with_its_input(program) -> None:
    n = 1 << program.params["log_n"]
    seg = program.segments[0]
    # 16 inputs and 12 outputs at the input level, 2 polynomials each
    assert peak_ciphertext_bytes(seg, program.layers, program.params["log_n"]) == (16 + 12) * 2 * (seg.input_level + 1) * n * 8
    assert Executor(program).ciphertext_bytes == max(
        peak_ciphertext_bytes(s, program.layers, program.params["log_n"]) for s in program.segments
    )


def test_a_program_over_the_budget_is_refused_with_the_figures(program) -> None:
    need = Executor(program).ciphertext_bytes
    Executor(program, ciphertext_memory=need)  # exactly enough is enough
    with pytest.raises(NotSupportedYetError, match=r"segment 0 needs .* GB of ciphertexts.*mode='latency'"):
        Executor(program, ciphertext_memory=need - 1)
