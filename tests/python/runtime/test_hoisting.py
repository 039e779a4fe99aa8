"""Single and double hoisting (``Transform.hoisting``) run the same transforms: the packing
search prices both, the executor honours either, the codec keeps it, and single hoisting
holds plaintexts without the special primes (an unknown hoisting in a program file:
``tests/python/program/test_format.py``)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer.errors import CompileError
from heinfer.program.transform import Transform, single_hoisting
from heinfer.runtime.executor import Executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402

#: conv → x² → dense: the dense layer is a baby-step giant-step transform with rotated terms.
MODEL = om.conv_net((2, 8, 8), channels=4, act="square", classes=5, seed=2)


@pytest.fixture(scope="module")
def program():
    return heinfer.compile(MODEL, mode="latency", calibration=om.random_input((2, 8, 8), 16, seed=3))


def _with(program, hoisting: str):
    layers = [replace(t, hoisting=hoisting) if isinstance(t, Transform) else t for t in program.layers]
    return replace(program, layers=layers)


def _query(program, x: np.ndarray) -> np.ndarray:
    client, server = heinfer.Client(program.public()), heinfer.Server(program)
    session = server.open_session(client.keys_message())
    msg = server.begin(client.query_message(session, x))
    while heinfer.protocol.messages.peek_kind(msg) == "step":
        msg = server.resume(client.reply_message(msg))
    return client.decode_result(msg)


def test_both_hoistings_agree_with_onnxruntime(program) -> None:
    x = om.random_input((2, 8, 8), 1, seed=9)
    want = om.run_onnxruntime(MODEL, x)
    for hoisting in ("double", "single"):
        got = _query(_with(program, hoisting), x)
        np.testing.assert_allclose(got, want, atol=2e-3 * np.abs(want).max(), err_msg=hoisting)


def test_single_hoisting_keeps_no_special_primes(program) -> None:
    n, k = 1 << program.params["log_n"], len(program.params["log_p"])
    ext_terms = sum(replace(t, hoisting="double").counts()["mul_plain_ext"] for t in program.layers if isinstance(t, Transform))
    assert ext_terms > 0
    double, single = Executor(_with(program, "double")), Executor(_with(program, "single"))
    assert double.plaintext_bytes - single.plaintext_bytes == ext_terms * n * k * 8


def test_the_counts_move_every_product_out_of_the_extended_basis(program) -> None:
    t = next(t for t in program.layers if isinstance(t, Transform) and t.counts()["rotate_ext"])
    d, s = replace(t, hoisting="double").counts(), replace(t, hoisting="single").counts()
    assert s == single_hoisting(d)
    assert s["mul_plain"] == d["mul_plain"] + d["mul_plain_ext"] and s["mul_plain_ext"] == 0
    assert s["mod_down"] == d["rotate_ext"] and s["times_p"] == 0
    with pytest.raises(CompileError, match="hoisting"):
        replace(t, hoisting="triple")


def test_the_codec_keeps_the_hoisting(program) -> None:
    single = _with(program, "single")
    back = heinfer.Program.from_bytes(single.to_bytes())
    assert {t.hoisting for t in back.layers if isinstance(t, Transform)} == {"single"}
    assert back.id == single.id
