"""The measured cost table is cached per build of the native module: a rebuilt engine gets
its costs measured again, and the tables of other builds are dropped from the cache."""

from __future__ import annotations

import json

from heinfer.compiler.cost import BATCH_KINDS, KINDS, SIZES
from heinfer.runtime import costs

PARAMS = {"log_n": 10, "log_q": [30, 30], "log_p": [30], "security": None}


def test_a_rebuilt_engine_is_measured_again(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HEINFER_CACHE_DIR", str(tmp_path))
    calls = []

    def fake_measure(params, reps):
        calls.append(params)
        return {k: [float(len(calls))] * len(params["log_q"]) for k in KINDS + BATCH_KINDS + SIZES}

    monkeypatch.setattr(costs, "_measure", fake_measure)
    monkeypatch.setattr(costs, "_build", lambda: "build-A")
    first = costs.measure_costs(PARAMS)
    assert costs.measure_costs(PARAMS) == first and len(calls) == 1  # cached
    monkeypatch.setattr(costs, "_build", lambda: "build-B")
    second = costs.measure_costs(PARAMS)
    assert len(calls) == 2 and second != first  # measured again for the new build
    keys = json.loads((tmp_path / "latency-costs.json").read_text())
    assert len(keys) == 1 and "build-B" in next(iter(keys))  # build A's table dropped


def test_the_build_is_the_native_modules_file() -> None:
    b = costs._build()
    assert b != "unknown" and b.count("-") == 1
