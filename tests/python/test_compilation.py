"""``heinfer.compile`` (``heinfer.compilation``): the two-party protocol's precision check —
the program simulated exactly on the calibration inputs against the model in float64, a
:class:`~heinfer.errors.PrecisionWarning` when its fixed point is too coarse."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import heinfer
import heinfer.compilation as compilation
from heinfer.errors import PrecisionWarning
from protocol.residual_models import reference, residual_model

X = np.random.default_rng(1).normal(0, 1, (64, 16))


def test_a_fitting_fixed_point_compiles_quietly_and_records_its_simulated_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        prog = heinfer.compile(residual_model("relu"), mode="latency", protocol="two-party", calibration=X)
    rec = prog.meta["simulated_error"]
    assert rec["items"] == compilation.PRECISION_CHECK_ITEMS and rec["agreement"] == 1.0
    want = reference("relu", X[:16])
    got = heinfer.simulate(prog, X[:16])
    assert rec["rel_error"] == pytest.approx((np.abs(got - want).max(1) / np.abs(want).max(1)).max(), rel=1e-6)
    assert 0 < rec["rel_error"] < compilation.PRECISION_WARN_REL_ERROR
    text = heinfer.explain(prog, file=io.StringIO())
    assert f"simulated exactly on 16 calibration input(s): outputs off by up to {rec['rel_error']:.1%}" in text


def test_a_coarse_fixed_point_warns_with_its_error(monkeypatch) -> None:
    # the residual network at p = 65,537 (17 bits): a third of the largest output off, which a
    # lower threshold stands in for a network too deep for its plaintext modulus (MobileNetV2)
    monkeypatch.setattr(compilation, "PRECISION_WARN_REL_ERROR", 0.1)
    bfv = {"log_n": 13, "log_q": [50, 50, 50], "log_p": [50], "plain_modulus": 65537, "security": 128}
    with pytest.warns(PrecisionWarning, match=r"off by up to \d+% .* 17-bit plaintext modulus is too coarse"):
        prog = heinfer.compile(residual_model("relu"), mode="throughput", protocol="two-party", calibration=X, bfv=bfv, batch_size=4)
    assert prog.meta["simulated_error"]["rel_error"] > 0.1


def test_auto_checks_only_the_program_it_keeps(monkeypatch) -> None:
    """``mode="auto"`` compiles both modes but simulates (and warns about) only the one kept."""
    monkeypatch.setattr(compilation, "PRECISION_WARN_REL_ERROR", 0.001)
    calls = []
    check = compilation._check_two_party_precision
    monkeypatch.setattr(compilation, "_check_two_party_precision", lambda prog, *a: calls.append(prog) or check(prog, *a))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prog = heinfer.compile(residual_model("relu"), mode="auto", protocol="two-party", calibration=X, batch_size=4, measure_costs=False)
    assert calls == [prog] and "simulated_error" in prog.meta
    assert sum(issubclass(w.category, PrecisionWarning) for w in caught) == 1
