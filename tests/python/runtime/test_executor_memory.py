"""The executor refuses a program whose encoded plaintexts would not fit its memory budget,
before encoding anything (instead of exhausting the machine)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer.runtime.executor import Executor, available_memory
from heinfer.runtime.slots import plaintext_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402


@pytest.fixture(scope="module")
def program():
    model = om.mlp((16, 12, 4), act="relu")
    return heinfer.compile(model, mode="latency", calibration=om.random_input((16,), 32, seed=3), measure_costs=False)


def _need(prog) -> int:
    p = prog.params
    return sum(plaintext_bytes(int(p["log_n"]), len(p["log_p"]), s, prog.layers) for s in prog.segments if s.layout.kind == "slots")


def test_the_estimate_is_what_the_executor_records(program) -> None:
    need = _need(program)
    n = 1 << program.params["log_n"]
    assert need > 0 and need % (8 * n) == 0  # whole residue vectors
    ex = Executor(program, max_memory=need)  # exactly enough is enough
    assert ex.plaintext_bytes == need


def test_a_program_over_budget_is_refused_before_encoding(program) -> None:
    need = _need(program)
    with pytest.raises(heinfer.NotSupportedYetError, match="streaming execution.*not supported yet"):
        Executor(program, max_memory=need - 1)


def test_the_default_budget_is_a_share_of_available_memory(program) -> None:
    avail = available_memory()
    assert avail is None or avail > 0
    Executor(program)  # a small program fits any machine that runs the tests
    x = om.random_input((16,), 2, seed=4)
    np.testing.assert_array_equal(heinfer.infer(program, x).outputs.argmax(1), om.run_onnxruntime(om.mlp((16, 12, 4), act="relu"), x).argmax(1))
