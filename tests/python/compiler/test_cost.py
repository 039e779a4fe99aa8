"""The cost model: rotations the executor runs together (``rotate_many``), operands that fill
the cache (``_mem``), baby steps that spill out of it (``_spill``), and a compiled plan
re-priced from another table (``segment_seconds``)."""

from __future__ import annotations

import pytest
from heinfer.compiler.cost import (
    KINDS, analytic_costs, messages_cost, operand_sizes, plain_words, price, segment_seconds, spill_share, stream_share, together,
)
from heinfer.program.ops import Square
from heinfer.program.transform import EXTRA_KINDS, OP_KINDS


def _table(rotate: float = 1.0, many: float | None = 0.5) -> dict:
    """Every kind free at two levels except the plain rotations (``many`` None: an older
    table without ``rotate_many``)."""
    t = {k: [0.0, 0.0] for k in KINDS}
    t["rotate"] = [rotate, rotate]
    if many is None:
        del t["rotate_many"]
    else:
        t["rotate_many"] = [many, many]
    return t


def _counts(rotate: int = 0, fold: int = 0) -> dict:
    c = {k: 0 for k in OP_KINDS + EXTRA_KINDS}
    c["rotate"], c["fold"] = rotate, fold
    return c


def test_giant_steps_together_cost_rotate_many() -> None:
    costs = _table()
    assert price(_counts(rotate=1), 1, costs, 1, False) == pytest.approx(1.0)  # one alone
    assert price(_counts(rotate=6), 1, costs, 1, False) == pytest.approx(3.0)  # six together


def test_folds_run_together_over_several_outputs_only() -> None:
    costs = _table()
    assert price(_counts(fold=3), 1, costs, 1, False) == pytest.approx(3.0)  # one output: in turn
    assert price(_counts(fold=6), 1, costs, 2, False) == pytest.approx(3.0)  # two outputs: together


@pytest.mark.parametrize(("many", "factor"), [(None, 1.0), (0.5, 0.5), (2.0, 1.0)])
def test_together_is_at_most_one(many: float | None, factor: float) -> None:
    """An older table prices rotations alone; a table where running together measured slower
    (a one-core machine, noise) never makes them dearer than alone."""
    assert together(_table(many=many), 0) == factor
    assert price(_counts(rotate=4), 1, _table(many=many), 1, False) == pytest.approx(4.0 * factor)


def _sized(table: dict, llc: float, ext: float) -> dict:
    """``table`` with the sizes :func:`spill_share` reads (the same at both levels): one
    polynomial of an extended ciphertext is ``ext`` bytes; its plaintexts are compact (half)."""
    t = dict(table)
    t.update({"llc_bytes": [llc] * 2, "pt_bytes": [ext / 4] * 2, "pt_ext_bytes": [ext / 2] * 2, "ext_bytes": [ext] * 2, "ks_key_bytes": [0.0] * 2})
    return t


def _hoisted(babies: int, products: int) -> dict:
    c = _counts()
    c["rotate_ext"], c["mul_plain_ext"] = babies, products
    return c


def test_the_spill_share_is_the_cache_the_baby_steps_fill() -> None:
    costs = _sized(_table(), llc=100.0, ext=10.0)  # one extended ciphertext: 20 bytes
    assert spill_share(_hoisted(1, 1), 0, costs) == pytest.approx(0.2)
    assert spill_share(_hoisted(4, 8), 0, costs) == pytest.approx(0.8)
    assert spill_share(_hoisted(50, 50), 0, costs) == 1.0  # at most the whole cache
    single = _hoisted(4, 0)  # single hoisting: the products are outside the extended basis
    assert spill_share(single, 0, costs) == 0.0
    assert spill_share(_hoisted(4, 8), 0, _table()) == 0.0  # a table without sizes


def test_spilled_baby_steps_move_their_kinds_towards_the_spill_cost() -> None:
    costs = _sized(_table(), llc=80.0, ext=10.0)  # two baby steps: half the cache
    costs["rotate_ext"], costs["rotate_ext_spill"] = [1.0, 1.0], [3.0, 3.0]
    costs["mul_plain_ext"], costs["mul_plain_ext_spill"] = [1.0, 1.0], [2.0, 2.0]
    # share 0.5: rotations 1 + 0.5·2, products 1 + 0.5·1; one rescale, free here
    assert price(_hoisted(2, 4), 1, costs, 1, False) == pytest.approx(2 * 2.0 + 4 * 1.5)
    # full: the spill costs; a spill cost below the cached one never lowers the price
    costs["mul_plain_ext_spill"] = [0.5, 0.5]
    assert price(_hoisted(10, 4), 1, costs, 1, False) == pytest.approx(10 * 3.0 + 4 * 1.0)
    # an older table without the spill kinds prices the cached costs
    for k in ("rotate_ext_spill", "mul_plain_ext_spill"):
        del costs[k]
    assert price(_hoisted(10, 4), 1, costs, 1, False) == pytest.approx(14.0)


def test_operands_that_fill_the_cache_move_the_streamed_kinds_towards_memory() -> None:
    costs = _sized(_table(), llc=50.0, ext=10.0)  # one compact plaintext in Q: 2.5 bytes
    costs["mul_plain"], costs["mul_plain_mem"] = [1.0, 1.0], [3.0, 3.0]
    costs["add"] = [0.0, 0.0]
    c = _counts()
    c["mul_plain"], c["dot"] = 10, 1  # 25 bytes of plaintexts: half the cache
    assert stream_share(c, 1, costs) == pytest.approx(0.5)
    assert price(c, 1, costs, 1, False) == pytest.approx(10 * 2.0)
    c["mul_plain"] = 40  # 100 bytes: all of it from memory
    assert stream_share(c, 1, costs) == 1.0
    assert price(c, 1, costs, 1, False) == pytest.approx(40 * 3.0)
    assert stream_share(c, 1, _table()) == 0.0  # a table without sizes


def test_messages_are_priced_in_rounds_of_one_ciphertext_per_thread() -> None:
    """Parsing and serializing run a ciphertext per engine thread: with two threads, seven
    ciphertexts take four rounds (eight shares), one takes a whole round (two shares)."""
    costs = {"ct_in": [1.0], "ct_out": [10.0], "threads": 2}
    assert messages_cost(7, 0, 1, 0, costs) == pytest.approx(8 * 1.0 + 2 * 10.0)
    assert messages_cost(16, 0, 0, 0, costs) == pytest.approx(16.0)
    one_thread = {"ct_in": [1.0], "ct_out": [10.0]}  # an older table: no thread count
    assert messages_cost(7, 0, 1, 0, one_thread) == pytest.approx(7 * 1.0 + 10.0)
    assert messages_cost(7, 0, 1, 0, {}) == 0.0  # no message kinds at all


def _double(table: dict) -> dict:
    """``table`` with every primitive twice as dear (sizes and the thread count unchanged)."""
    return {k: ([2 * v for v in table[k]] if k in KINDS else table[k]) for k in table}


@pytest.mark.parametrize("act", ["relu", "square"])
def test_segment_seconds_reprices_the_plan_the_search_stored(act: str) -> None:
    import heinfer
    from compiler import onnx_models as om

    prog = heinfer.compile(
        om.conv_net(act=act, seed=2), mode="latency", calibration=om.random_input((1, 8, 8), 64, seed=11), measure_costs=False,
    )
    p = prog.params
    table = analytic_costs(p["log_n"], len(p["log_q"]), len(p["log_p"]))
    assert any(isinstance(op, Square) for s in prog.segments for op in s.ops) == (act == "square")
    for seg in prog.segments:
        # the table the search priced with gives back its figure; a dearer one a dearer figure
        assert segment_seconds(prog, seg, table) == pytest.approx(seg.predicted_s, rel=1e-12)
        assert segment_seconds(prog, seg, _double(table)) == pytest.approx(2 * seg.predicted_s, rel=1e-12)


def test_segment_seconds_refuses_a_batch_axis_segment() -> None:
    import heinfer
    from compiler import onnx_models as om

    prog = heinfer.compile(om.mlp((16, 4), act=None), mode="throughput", calibration=om.random_input((16,), 8))
    with pytest.raises(ValueError, match="slot-layout"):
        segment_seconds(prog, prog.segments[0], {})


def test_compact_plaintexts_are_sized_in_their_words_and_ciphertexts_in_64_bit_ones() -> None:
    """LoLa CIFAR's primes: ``q_0`` 33 bits, five of 30, ``P`` 33: at the top level a compact
    plaintext is 8 + 5·4 bytes per coefficient, an extended one 8 more, as is each polynomial
    of a key; the extended ciphertext's polynomial stays in 64-bit words."""
    words = plain_words([33] + [30] * 5, [33], compact=True)
    assert words == [8, 4, 4, 4, 4, 4, 8]
    assert plain_words([33] + [30] * 5, [33], compact=False) == [8] * 7
    s = operand_sizes(12, 6, 1, llc=1 << 20, words=words)
    n = 1 << 12
    assert s["pt_bytes"][5] == n * 28 and s["pt_ext_bytes"][5] == n * 36
    assert s["pt_bytes"][0] == n * 8 and s["pt_ext_bytes"][0] == n * 16
    assert s["ext_bytes"][5] == 8 * n * 7 and s["ks_key_bytes"][5] == n * 2 * 6 * 36  # keys compact too
    assert operand_sizes(12, 6, 1)["ks_key_bytes"][5] == 8 * n * 2 * 6 * 7
    assert operand_sizes(12, 6, 1)["pt_bytes"][5] == 8 * n * 6  # no words given: 64-bit
    with pytest.raises(ValueError, match="6 word sizes for 6 \\+ 1 primes"):
        operand_sizes(12, 6, 1, words=words[:6])
