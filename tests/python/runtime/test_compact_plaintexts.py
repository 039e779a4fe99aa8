"""Compact plaintexts: a latency segment keeps each limb of its diagonals in 32-bit words where
the prime is below ``2^32`` (``Executor(compact=True)``, the default); the memory the executor
reports is what it holds, and every output ciphertext is the 64-bit one's, bit for bit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer import _native
from heinfer.compiler.cost import residue_bytes
from heinfer.protocol.trace import segment_inputs
from heinfer.runtime.executor import Executor, native_params
from heinfer.runtime.slots import plaintext_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
import onnx_models as om  # noqa: E402

MODEL = om.conv_net((2, 8, 8), channels=4, act="square", classes=5, seed=2)


@pytest.fixture(scope="module")
def program():
    """28-bit scale primes, a 34-bit ``q_0`` and special prime: limbs of both widths."""
    prog = heinfer.compile(
        MODEL, mode="latency", calibration=om.random_input((2, 8, 8), 16, seed=3), measure_costs=False, scale_bits=(28,)
    )
    assert max(prog.params["log_q"][1:]) <= 32 < prog.params["log_q"][0], prog.params
    return prog


def _held(ex: Executor) -> int:
    """Bytes of the plaintexts an executor's slot segments hold (diagonals and biases)."""
    n = 1 << ex.program.params["log_n"]
    total = 0
    for s in ex.slots.values():
        for pts in s.plain.values():
            total += sum(p.nbytes if isinstance(p, _native.CompactPlaintext) else 8 * n * (p.level + 1 + p.is_extended) for p in pts)
        for bias in s.bias.values():
            total += sum(8 * n * (b.level + 1) for b in bias or [])
    return total


def test_residue_bytes_narrow_the_primes_below_2_to_the_32() -> None:
    assert residue_bytes([34, 28, 28], [34], 2, False, True) == 8 + 4 + 4
    assert residue_bytes([34, 28, 28], [34], 1, True, True) == 8 + 4 + 8
    assert residue_bytes([32, 32], [60], 1, True, True) == 4 + 4 + 8
    assert residue_bytes([34, 28, 28], [34], 2, True, False) == 4 * 8


def _needs(program, compact: bool) -> int:
    return sum(plaintext_bytes(program.params, s, program.layers, compact) for s in program.segments if s.layout.kind == "slots")


def test_diagonals_are_kept_compact_as_estimated(program) -> None:
    wide, small = _needs(program, False), _needs(program, True)
    assert small < 0.8 * wide  # 0.76 here: q_0 and P stay in 64-bit words
    ex = Executor(program)
    assert ex.compact and ex.plaintext_bytes == ex.kept_plaintext_bytes == small == _held(ex)
    kinds = {type(p) for s in ex.slots.values() for pts in s.plain.values() for p in pts}
    assert kinds == {_native.CompactPlaintext}
    base = Executor(program, compact=False)
    assert base.plaintext_bytes == wide == _held(base)
    kinds = {type(p) for s in base.slots.values() for pts in s.plain.values() for p in pts}
    assert kinds == {_native.Plaintext}
    tight = Executor(program, max_memory=small - 1)
    assert tight.lazy_segments and tight.kept_plaintext_bytes < small


def test_compact_and_wide_outputs_are_the_same_bits(program) -> None:
    x = om.random_input((2, 8, 8), 1, seed=9)
    inputs = segment_inputs(program, x, keys=True)
    params = native_params(program.params)

    def outputs(compact: bool) -> list[bytes]:
        ex = Executor(program, compact=compact)
        got = []
        for k, (data, relin, galois) in enumerate(inputs):
            batch = _native.CiphertextBatch.from_bytes(params, data, len(data), 1 << 24)
            got.append(ex.run(k, batch, relin, galois).to_bytes())
        return got

    assert outputs(True) == outputs(False)
    # and the answer is the network's
    want = om.run_onnxruntime(MODEL, x)
    got = heinfer.infer(program, x).outputs
    np.testing.assert_allclose(got, want, atol=2e-2 * np.abs(want).max())


def test_a_grouped_sum_takes_one_kind_of_plaintext(program) -> None:
    """Wide and compact plaintexts in one call are refused with an error that says so."""
    params = native_params(program.params)
    enc, ev = _native.Encoder(params), _native.Evaluator(params)
    kg = _native.KeyGenerator(params)
    ct = _native.Encryptor(params, kg.public_key()).encrypt(enc.encode_real(np.ones(4), params.default_scale, 1, False))
    pt = enc.encode_real(np.ones(4), params.default_scale, 1, False)
    a = ev.dot_plain_groups([ct], [[0]], [[pt]])[0].to_bytes()
    b = ev.dot_plain_groups([ct], [[0]], [[pt.compact()]])[0].to_bytes()
    assert a == b
    with pytest.raises(TypeError, match="'CompactPlaintext' object is not an instance of 'Plaintext'"):
        ev.dot_plain_groups([ct], [[0, 0]], [[pt, pt.compact()]])


#: The measurement, run in a fresh interpreter: inside the test process the heap holds what
#: earlier tests freed (1.8 GB after the protocol tests), so new plaintexts partly reuse it and
#: the allocators return some of it meanwhile — the resident set then moved by 0.19× to 1.06×
#: and even −2.6× of the residues between consecutive rounds, and failed the check at 1.11–1.12×.
_MEASURE = """
import gc, json
import numpy as np
from heinfer import _native

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS in /proc/self/status")

p = _native.Params(13, [33, 30, 30, 30, 30, 30], [33], 30, None, 128)
enc = _native.Encoder(p)
rows = np.random.default_rng(5).uniform(-1, 1, (128, p.slots))
held = [enc.encode_real_many_compact(rows, float(p.q[5]), 5, True)]  # tables, pools, heaps
ratios = []  # nothing freed until the end: each count is of new memory
for _ in range(2):
    gc.collect()
    before, kept = rss(), []
    for _ in range(4):
        kept += enc.encode_real_many_compact(rows, float(p.q[5]), 5, True)
    grew = rss() - before
    residues = sum(pt.nbytes for pt in kept)
    assert residues == 4 * 128 * p.n * (2 * 8 + 5 * 4), residues
    ratios.append(grew / residues)
    held.append(kept)
print(json.dumps(ratios))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the resident set from /proc")
def test_compact_plaintexts_hold_their_residues_and_little_more() -> None:
    """The plaintexts of one call share one buffer (``encode_real_many_compact``): resident
    memory grows by their residues, not by the allocator's rounding of a block per limb or per
    plaintext (1.31× and 1.12–1.17× measured with those layouts at these sizes, every time).
    Measured in a fresh interpreter (see ``_MEASURE``), twice; the smaller count is checked (a
    thread of the interpreter or a heap warming up also counts as growth)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    ratios = json.loads(out.stdout.strip().splitlines()[-1])
    assert min(ratios) < 1.08, f"resident memory grew {', '.join(f'{r:.2f}×' for r in ratios)} the residues"
