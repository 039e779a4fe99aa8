"""The executor keeps its encoded plaintexts under a memory budget: over budget, the largest
segments encode lazily (group by group, during each query) and the answers do not change."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer.runtime import executor as ex
from heinfer.runtime.executor import Executor, available_memory, lazy_until_fits, plaintext_budget
from heinfer.runtime.slots import plaintext_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402


@pytest.fixture(scope="module")
def program():
    model = om.mlp((16, 12, 4), act="relu")
    return heinfer.compile(model, mode="latency", calibration=om.random_input((16,), 32, seed=3), measure_costs=False)


def _need(prog) -> int:
    p = prog.params
    return sum(plaintext_bytes(p, s, prog.layers) for s in prog.segments if s.layout.kind == "slots")


def test_the_estimate_is_what_the_executor_records(program) -> None:
    need = _need(program)
    n = 1 << program.params["log_n"]
    assert need > 0 and need % (8 * n) == 0  # whole residue vectors
    ex = Executor(program, max_memory=need)  # exactly enough is enough
    assert ex.plaintext_bytes == need


def test_over_budget_segments_encode_lazily_with_the_same_answers(program) -> None:
    need = _need(program)
    eager = Executor(program, max_memory=need)
    assert eager.lazy_segments == [] and eager.kept_plaintext_bytes == need
    lazy = Executor(program, max_memory=need - 1)
    assert lazy.lazy_segments and lazy.kept_plaintext_bytes < need
    none = Executor(program, max_memory=0)
    assert none.kept_plaintext_bytes == 0
    assert all(not s.plain for s in none.slots.values())
    x = om.random_input((16,), 3, seed=5)
    want = heinfer.infer(program, x).outputs
    client, server = heinfer.Client(program.public()), heinfer.Server(program, executor=none)
    session = server.open_session(client.keys_message())
    msg = server.begin(client.query_message(session, x[:1]))
    while heinfer.protocol.messages.peek_kind(msg) == "step":
        msg = server.resume(client.reply_message(msg))
    got = client.decode_result(msg)
    np.testing.assert_allclose(got, want[:1], atol=1e-3 * np.abs(want).max())


def test_the_default_budget_is_a_share_of_physical_memory_capped_by_what_is_available(program, monkeypatch) -> None:
    avail = available_memory()
    assert avail is None or avail > 0
    gb = 1 << 30
    info = {"MemTotal": 24 * gb, "MemAvailable": 21 * gb}
    monkeypatch.setattr(ex, "_meminfo", info.get)
    assert plaintext_budget() == 12 * gb  # half of physical memory, not of what is available
    info["MemAvailable"] = 10 * gb
    assert plaintext_budget() == 8 * gb  # a machine whose memory is in use: 0.8 of the rest
    info.clear()
    assert plaintext_budget() is None  # no /proc/meminfo: no limit
    monkeypatch.undo()
    assert Executor(program).lazy_segments == []  # a small program fits any machine running the tests
    x = om.random_input((16,), 2, seed=4)
    np.testing.assert_array_equal(heinfer.infer(program, x).outputs.argmax(1), om.run_onnxruntime(om.mlp((16, 12, 4), act="relu"), x).argmax(1))


def test_the_largest_are_made_lazy_until_the_rest_fits() -> None:
    needs = {0: 5, 1: 9, 2: 1, 3: 4}
    assert lazy_until_fits(needs, None) == set()
    assert lazy_until_fits(needs, 19) == set()
    assert lazy_until_fits(needs, 18) == {1}
    assert lazy_until_fits(needs, 5) == {1, 0}
    assert lazy_until_fits(needs, 0) == {0, 1, 2, 3}


def test_the_server_takes_a_budget(program) -> None:
    assert heinfer.Server(program, max_memory=0).executor.kept_plaintext_bytes == 0
    assert heinfer.Server(program, max_memory=_need(program)).executor.lazy_segments == []
    for bad in (-1, 1.5, True, "1 GB"):
        with pytest.raises(heinfer.ProtocolError, match="max_memory"):
            heinfer.Server(program, max_memory=bad)
    with pytest.raises(heinfer.ProtocolError, match="executor"):
        heinfer.Server(program, executor=Executor(program), max_memory=0)
