"""Golden tests of the throughput planner (``heinfer.compiler.plan`` and ``.throughput``).

The bundled networks pin the nGraph-HE2 optimizations: lazy rescaling (CryptoNets: one
rescale in the whole network, none before decryption), lazy relinearization, complex packing
when nothing squares, no special prime without a relinearization, and depth-aware encoding
(each segment's input is encrypted at the level the segment needs, not at the top).
Synthetic graphs check the planner's decisions against :func:`plan_segment` directly, and
:func:`split_segments` is tested on its own.
"""

from __future__ import annotations

import math
import time
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from heinfer.compiler import ClientFunction, Graph, Linear, Square, fold_linear, load_onnx
from heinfer.compiler.plan import GUARD_BITS, max_log_qp, plan_segment
from heinfer.compiler.ranges import tensor_bounds
from heinfer.compiler.throughput import COEFF_NOISE_BITS, Options, compile_graph, split_segments
from heinfer.errors import CompileError
from heinfer.program import ops as ops_

from . import onnx_models as om

MODELS_DIR = Path(__file__).resolve().parents[3] / "models"


@cache
def _digits() -> np.ndarray:
    return np.load(MODELS_DIR / "digits_test.npz")["x"]


@cache
def _bundled_graph(name: str) -> Graph:
    return load_onnx(str(MODELS_DIR / f"{name}.onnx"))


@cache
def _bundled(name: str, calibrated: bool = True, **options) -> object:
    kwargs = {"calibration": _digits()[:32]} if calibrated else {"input_bound": 1.0}
    return compile_graph(_bundled_graph(name), options=Options(**options), **kwargs)


def _instrs(seg) -> list[SimpleNamespace]:
    """A segment's typed ops as ``(op, arg)`` records: ``linear`` (arg: the layer),
    ``square``, ``relinearize``, ``rescale`` (arg: primes), ``drop`` (arg: level)."""
    out = []
    for op in seg.ops:
        if isinstance(op, ops_.Linear):
            out.append(SimpleNamespace(op="linear", arg=op.layer))
        elif isinstance(op, ops_.Rescale):
            out.append(SimpleNamespace(op="rescale", arg=op.primes))
        elif isinstance(op, ops_.DropTo):
            out.append(SimpleNamespace(op="drop", arg=op.level))
        else:
            out.append(SimpleNamespace(op=type(op).__name__.lower(), arg=None))
    return out


def _ops(seg) -> list:
    """Instructions as ``'linear'`` or ``('rescale', k)`` (the layer index is dropped)."""
    return [(i.op, i.arg) if i.op in ("rescale", "drop") else i.op for i in _instrs(seg)]


def _log_qp(prog) -> int:
    return sum(prog.params["log_q"]) + sum(prog.params["log_p"])


RNG = np.random.default_rng(12)


def _dense(name: str, rows: int, cols: int) -> Linear:
    return Linear(
        name,
        sp.csr_matrix(RNG.normal(0, 1 / np.sqrt(cols), (rows, cols))),
        RNG.normal(0, 0.1, rows),
        (cols,),
        (rows,),
    )


def _relu(name: str, n: int) -> ClientFunction:
    return ClientFunction(name, "relu", {}, (n,), (n,))


def _maxpool(name: str, n: int) -> ClientFunction:
    groups = np.arange(n).reshape(n // 2, 2)
    return ClientFunction(name, "maxpool", {}, (n,), (n // 2,), groups)


def _softmax(name: str, n: int) -> ClientFunction:
    return ClientFunction(name, "softmax", {}, (n,), (n,), np.arange(n).reshape(1, n))


def _graph(ops: list, n_in: int = 8) -> Graph:
    size = math.prod(ops[-1].out_shape)
    return Graph("x", (n_in,), "y", (size,), ops)


CAL8 = np.random.default_rng(1).uniform(-1, 1, (32, 8))


# ---------------------------------------------------------------------------------- CryptoNets
@pytest.mark.parametrize("calibrated", [True, False])
def test_cryptonets_is_one_segment_with_one_lazy_rescale(calibrated: bool) -> None:
    prog = _bundled("cryptonets", calibrated)
    assert len(prog.segments) == 1 and prog.steps == [] and prog.pre == [] and prog.post == []
    (seg,) = prog.segments
    ops = _ops(seg)
    # an open tail: the second square squares the first one's three parts (five parts to the
    # client), so nothing relinearizes and the parameters need no special prime
    assert [op if isinstance(op, str) else op[0] for op in ops] == [
        "linear",
        "square",
        "linear",
        "rescale",
        "square",
        "linear",
    ]
    assert seg.output_parts == 5
    k = ops[3][1]
    assert k >= 1
    assert seg.input_level - k == seg.output_level  # no drop, one rescale of k primes
    assert not prog.needs_relin_key and prog.params["log_p"] == []
    assert prog.packing == "real"  # squares need real packing
    assert prog.security == 128
    assert _log_qp(prog) <= max_log_qp(prog.params["log_n"], 128)
    assert len(prog.layers) == 3


def test_cryptonets_parameters_golden() -> None:
    prog = _bundled("cryptonets")
    p = prog.params
    assert p["log_n"] == 13
    assert p["log_q"] == [30] * 6 and p["log_p"] == []
    assert _log_qp(prog) == 180 <= max_log_qp(13, 128) == 218
    assert prog.segments[0].input_level == 5 == len(p["log_q"]) - 1
    assert _ops(prog.segments[0])[3] == ("rescale", 2)


def test_cryptonets_relu_is_three_segments_without_rescale() -> None:
    prog = _bundled("cryptonets_relu")
    assert len(prog.segments) == 3 and len(prog.steps) == 2
    for seg in prog.segments:
        assert _ops(seg) == ["linear"]
        assert seg.input_level == seg.output_level == 0
    assert [[f.kind for f in st.functions] for st in prog.steps] == [["relu"], ["relu"]]
    assert prog.packing == "coeff"
    assert prog.params["log_p"] == [] and not prog.needs_relin_key
    assert prog.params["log_n"] == 11 and len(prog.params["log_q"]) == 1
    assert _log_qp(prog) <= max_log_qp(11, 128)
    assert prog.batch_capacity == 2048


@pytest.mark.parametrize("name", ["cryptonets", "cryptonets_relu"])
def test_baseline_rescales_after_every_linear_and_square(name: str) -> None:
    prog = _bundled(name, lazy=False)
    assert prog.packing == "real"
    assert prog.meta["lazy"] is False
    for seg in prog.segments:
        ops = _ops(seg)
        for i, op in enumerate(ops):
            if op in ("linear", "square"):
                assert i + 1 < len(ops) and ops[i + 1] == ("rescale", 1), ops
        assert sum(op == ("rescale", 1) for op in ops) == sum(
            op in ("linear", "square") for op in ops
        )
    lazy = _bundled(name)
    assert _log_qp(prog) >= _log_qp(lazy)  # the optimizations never cost modulus


def test_baseline_cryptonets_golden() -> None:
    prog = _bundled("cryptonets", lazy=False)
    assert _ops(prog.segments[0]) == [
        "linear",
        ("rescale", 1),
        "square",
        ("rescale", 1),
        "linear",
        ("rescale", 1),
        "relinearize",
        "square",
        ("rescale", 1),
        "linear",
        ("rescale", 1),
    ]


@pytest.mark.parametrize("name", ["cryptonets", "cryptonets_relu"])
@pytest.mark.parametrize("security", [192, 256])
def test_higher_security_needs_a_larger_ring(name: str, security: int) -> None:
    base = _bundled(name)
    prog = _bundled(name, security=security)
    assert prog.security == security == prog.params["security"]
    assert prog.params["log_n"] >= base.params["log_n"]
    assert prog.params["log_n"] > base.params["log_n"] or _log_qp(prog) < _log_qp(base)
    assert _log_qp(prog) <= max_log_qp(prog.params["log_n"], security)
    # same circuit: the instructions do not depend on the security level
    assert [_ops(s) for s in prog.segments] == [_ops(s) for s in base.segments]


def test_256_bit_security_can_be_out_of_reach() -> None:
    """7 squares: 550 bits of modulus fit N = 2^15 at 128 bits but nothing at 256 bits."""
    ops: list = [_dense("l0", 8, 8)]
    for i in range(7):
        ops += [Square(f"s{i}", (8,)), _dense(f"l{i + 1}", 8, 8)]
    g = _graph(ops)
    with pytest.raises(CompileError, match="256-bit"):
        compile_graph(g, calibration=CAL8, options=Options(security=256))


@pytest.mark.parametrize("security", [0, 80, 100, 127, 512])
def test_unsupported_security_level_is_a_compile_error(security: int) -> None:
    with pytest.raises(CompileError, match="security"):
        compile_graph(
            _graph([_dense("a", 4, 8)]), calibration=CAL8, options=Options(security=security)
        )


@pytest.mark.parametrize(
    ("security", "log_n"), [(s, n) for s in (128, 192, 256) for n in range(11, 17)]
)
def test_table_matches_the_engine(security: int, log_n: int) -> None:
    """The planner's HomomorphicEncryption.org table is the engine's: the bound is accepted,
    one bit more is refused."""
    from heinfer import _native
    from heinfer.errors import ParameterError

    bound = max_log_qp(log_n, security)
    if bound is None:
        assert security > 128 and log_n == 16
        return

    def params(total: int):
        k = -(-total // 55)
        q = [total // k + (1 if i < total % k else 0) for i in range(k)]
        main, special = (q[:-1], q[-1:]) if k > 1 else (q, [])
        return _native.Params(log_n, main, special, min(q) - 1, None, security)

    assert abs(params(bound).log_qp - bound) < 0.01  # nominal bits; the primes are a bit smaller
    with pytest.raises(ParameterError, match="insecure"):
        params(bound + 1)


# ---------------------------------------------------------------------------------- invariants
ZOO = {
    "cryptonets": lambda: _bundled("cryptonets"),
    "cryptonets-relu": lambda: _bundled("cryptonets_relu"),
    "cryptonets-baseline": lambda: _bundled("cryptonets", lazy=False),
    "conv-square-avg": lambda: compile_graph(
        load_onnx(om.conv_net(act="square", pool="avg")), calibration=om.random_input((1, 8, 8), 32)
    ),
    "conv-relu-maxpool": lambda: compile_graph(
        load_onnx(om.conv_net(act="relu", pool="max", stride=2)),
        calibration=om.random_input((1, 8, 8), 32),
    ),
    "mlp-square-3": lambda: compile_graph(
        load_onnx(om.mlp((8, 8, 8, 8, 4), act="square")), calibration=CAL8
    ),
    "square-square-relu": lambda: compile_graph(
        _graph(
            [
                _dense("a", 8, 8),
                Square("s", (8,)),
                _dense("b", 8, 8),
                Square("t", (8,)),
                _dense("c", 8, 8),
                _relu("r", 8),
                _dense("d", 4, 8),
            ]
        ),
        calibration=CAL8,
    ),
}


@pytest.mark.parametrize("name", list(ZOO))
def test_program_invariants(name: str) -> None:
    """Levels and scales walked through every segment: rescales never go below level 0 nor
    below the input scale, the output fits its limbs, relinearization only before a
    second square (or none, for an open tail: five parts, nothing but linear layers after
    the square, never rescaled), and the key manifest and packing follow from the instructions."""
    prog = ZOO[name]()
    b = prog.meta["prime_bits"]
    assert set(prog.params["log_q"]) == {b}
    top = len(prog.params["log_q"]) - 1
    lazy = prog.meta["lazy"]
    any_relin = any_square = False
    for seg in prog.segments:
        level, parts = seg.input_level, 2
        assert 0 <= level <= top
        s_in = s = math.log2(seg.input_scale)
        for ins in _instrs(seg):
            if ins.op == "linear":
                s += math.log2(prog.layers[ins.arg].weight_scale)
            elif ins.op == "square":
                any_square = True
                assert parts in (2, 3), "squaring a 5-part ciphertext"
                s, parts = 2 * s, 2 * parts - 1
            elif ins.op == "relinearize":
                any_relin = True
                assert parts == 3
                parts = 2
            elif ins.op == "rescale":
                assert parts <= 3, "rescaling an open tail (its rounding would come back ×s⁴)"
                assert ins.arg >= 1
                level -= ins.arg
                s -= ins.arg * b
                if lazy:  # the baseline lets the scale shrink (Δ²/q < Δ)
                    assert s >= s_in - 1.0 - 1e-9
            elif ins.op == "drop":
                assert ins.arg < level
                level = ins.arg
            assert level >= 0
            # the value fits the remaining limbs
            assert s <= (level + 1) * b
        assert level == seg.output_level and parts == seg.output_parts
        if parts == 5:  # an open tail: linear layers alone after its square
            last = max(i for i, ins in enumerate(_instrs(seg)) if ins.op == "square")
            assert {ins.op for ins in _instrs(seg)[last + 1 :]} <= {"linear"}
        assert s + math.log2(seg.output_bound) + GUARD_BITS <= (seg.output_level + 1) * b + 1e-9
        if lazy:
            assert _instrs(seg)[-1].op != "rescale", "a rescale right before a decryption"
    assert prog.needs_relin_key == any_relin == bool(prog.params["log_p"])
    assert (prog.packing == "coeff") == (lazy and not any_square)
    assert _log_qp(prog) <= max_log_qp(prog.params["log_n"], prog.security)
    for k, st in enumerate(prog.steps):
        assert (
            st.in_size == prog.segments[k].out_size and st.out_size == prog.segments[k + 1].in_size
        )


# ---------------------------------------------------------------------------------- planner vs program
@pytest.mark.parametrize(
    "ops",
    [
        pytest.param([_dense("a", 8, 8), Square("s", (8,)), _dense("b", 4, 8)], id="L-S-L"),
        pytest.param(
            [
                _dense("a", 8, 8),
                Square("s", (8,)),
                _dense("b", 8, 8),
                Square("t", (8,)),
                _dense("c", 8, 8),
                Square("u", (8,)),
                _dense("d", 4, 8),
            ],
            id="L-S-L-S-L-S-L",
        ),
        pytest.param([_dense("a", 4, 8)], id="L"),
        pytest.param([Square("s", (8,)), Square("t", (8,))], id="S-S"),
    ],
)
@pytest.mark.parametrize("lazy", [True, False])
def test_single_segment_follows_plan_segment(ops: list, lazy: bool) -> None:
    """compile_graph lowers exactly the plan that plan_segment picks for the chosen prime:
    the client encrypts at the plan's first limb count (depth-aware), rescales where it says."""
    opts = Options(lazy=lazy)
    g = _graph(ops)
    prog = compile_graph(g, calibration=CAL8, options=opts)
    b = prog.meta["prime_bits"]
    folded = fold_linear(g)
    bounds = tensor_bounds(folded, CAL8, float(np.abs(CAL8).max()), opts.headroom)
    input_bits = opts.input_bits - (COEFF_NOISE_BITS if prog.packing == "coeff" else 0)
    s_in = input_bits - math.ceil(math.log2(bounds[0])) if lazy else b - 2
    plan = plan_segment(
        folded.ops, bounds[1:], s_in, b, opts.weight_bits, [1.0] * len(folded.ops), lazy
    )
    (seg,) = prog.segments
    assert seg.input_scale == 2.0**s_in
    assert seg.input_level == plan.top_limbs - 1
    assert seg.output_level == plan.end_limbs - 1 - plan.rescales[-1]
    assert plan.rescales[-1] == (0 if lazy else 1)
    assert len(prog.params["log_q"]) == plan.top_limbs
    assert [i.arg for i in _instrs(seg) if i.op == "rescale"] == [k for k in plan.rescales if k]
    assert sum(i.op == "relinearize" for i in _instrs(seg)) == sum(plan.relin_before)
    layers = [lp for lp in plan.layers if lp is not None]
    assert [lay.weight_scale for lay in prog.layers] == [2.0**lp.exponent for lp in layers]
    assert [lay.digits for lay in prog.layers] == [lp.digits for lp in layers]


def test_golden_square_chain() -> None:
    """Lazy rescaling on L-S-L-S-L-S-L: rescales only where the scale would outgrow the
    modulus, lazy relinearization right before the second square, none before the third (an
    open tail: five parts to the end, no rescale after it)."""
    ops = [
        _dense("a", 8, 8),
        Square("s", (8,)),
        _dense("b", 8, 8),
        Square("t", (8,)),
        _dense("c", 8, 8),
        Square("u", (8,)),
        _dense("d", 4, 8),
    ]
    prog = compile_graph(_graph(ops), calibration=CAL8)
    kinds = [op if isinstance(op, str) else op[0] for op in _ops(prog.segments[0])]
    assert [k for k in kinds if k in ("linear", "square")] == ["linear", "square"] * 3 + ["linear"]
    assert kinds.count("relinearize") == 1
    for i, k in enumerate(kinds):
        if k == "relinearize":
            assert kinds[i + 1] == "square"
    last = len(kinds) - 1 - kinds[::-1].index("square")
    assert kinds[last + 1 :] == ["linear"] and prog.segments[0].output_parts == 5
    assert kinds.count("rescale") < 7  # far fewer than one per multiplication


def test_depth_aware_encoding_across_segments() -> None:
    """A deep first segment (two squares) and a shallow second one: the client encrypts the
    second segment's input at level 0, not at the top of the chain."""
    ops = [
        _dense("a", 8, 8),
        Square("s", (8,)),
        _dense("b", 8, 8),
        Square("t", (8,)),
        _dense("c", 8, 8),
        _relu("r", 8),
        _dense("d", 4, 8),
    ]
    prog = compile_graph(_graph(ops), calibration=CAL8)
    top = len(prog.params["log_q"]) - 1
    first, second = prog.segments
    assert first.input_level == top >= 2
    assert second.input_level == 0 < top
    assert _ops(second) == ["linear"]


def test_client_encrypts_at_each_segments_input_level() -> None:
    """End to end: the client's query and its reply to the client step carry ciphertexts at
    the planned input levels (and the server accepts them)."""
    from heinfer import _native
    from heinfer.protocol import Client, Server
    from heinfer.protocol.messages import decode

    ops = [
        _dense("a", 8, 8),
        Square("s", (8,)),
        _dense("b", 8, 8),
        Square("t", (8,)),
        _dense("c", 8, 8),
        _relu("r", 8),
        _dense("d", 4, 8),
    ]
    from heinfer.runtime.scales import set_exact_scales

    g = _graph(ops)
    # heinfer.compile does this: the parties check the scales the primes really give
    prog = set_exact_scales(compile_graph(g, calibration=CAL8))
    client, server = Client(prog), Server(prog)
    session = server.open_session(client.keys_message())
    query = client.query_message(session, CAL8[:3])
    batch = _native.CiphertextBatch.from_bytes(
        client.params, decode(query)[1].ciphertexts, 1 << 30, 100
    )
    assert batch.level == prog.segments[0].input_level
    step = server.begin(query)
    reply = client.reply_message(step)
    batch = _native.CiphertextBatch.from_bytes(
        client.params, decode(reply)[1].ciphertexts, 1 << 30, 100
    )
    assert batch.level == prog.segments[1].input_level == 0
    got = client.decode_result(server.resume(reply))
    tol = (
        prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision
    )  # + the release's rounding
    np.testing.assert_allclose(got, g.run(CAL8[:3]), atol=tol)


# ---------------------------------------------------------------------------------- plan_segment units
def test_plan_segment_plans_a_60_op_segment_in_well_under_a_second() -> None:
    """The rescale search is polynomial: 60 ops (2^59 schedules) plan in milliseconds."""
    ops: list = []
    for i in range(30):
        ops += [_dense(f"l{i}", 16, 16), Square(f"s{i}", (16,))]
    start = time.perf_counter()
    plan = plan_segment(ops, [4.0] * 60, 20, 50, 16, [1.0] * 60)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, f"{elapsed:.3f} s"
    assert len(plan.rescales) == 60 and plan.rescales[-1] == 0
    assert sum(k > 0 for k in plan.rescales) >= 20  # the scale doubles at every square


def _tail_ops(after: int) -> list:
    return [_dense("a", 8, 8), Square("s", (8,)), _dense("b", 8, 8), Square("t", (8,))] + [
        _dense(f"c{i}", 8, 8) for i in range(after)
    ]


@pytest.mark.parametrize("prime_bits", [30, 40, 50])
def test_the_last_square_of_a_square_stays_open_when_it_is_cheaper(prime_bits: int) -> None:
    """An open tail: the second square squares the first one's three parts into five, which
    one linear layer follows — no relinearization, and no rescale from the square on."""
    ops = _tail_ops(1)
    plan = plan_segment(ops, [4.0] * len(ops), 20, prime_bits, 16, [1.0] * len(ops))
    assert plan.end_parts == 5 and not plan.needs_relin
    assert plan.rescales[3:] == (0, 0)


def test_an_open_tail_that_needs_more_limbs_is_not_taken() -> None:
    """Three layers after the last square at 50-bit primes: left open, the scale would grow
    to the end unrescaled and need more limbs, so the square is relinearized first."""
    ops = _tail_ops(3)
    plan = plan_segment(ops, [4.0] * len(ops), 20, 50, 16, [1.0] * len(ops))
    assert plan.end_parts == 3 and plan.relin_before == (False, False, False, True, False, False, False)


def test_an_open_tail_is_the_last_square_of_a_square_alone() -> None:
    from heinfer.compiler.plan import _open_tail

    assert _open_tail(_tail_ops(1)) == 3
    assert _open_tail([Square("s", (8,)), Square("t", (8,))]) == 1
    # the third square squares the second one's three parts (relinearized before it)
    assert _open_tail([_dense("a", 8, 8), Square("s", (8,)), Square("t", (8,)), Square("u", (8,))]) == 3
    # a square of two parts, or none
    assert _open_tail([_dense("a", 8, 8), Square("s", (8,)), _dense("b", 8, 8)]) is None
    assert _open_tail([_dense("a", 8, 8)]) is None


def test_plan_segment_refuses_layers_too_wide_for_exact_products() -> None:
    """A row of 2^20 equal weights: ‖W‖₁ = 2^20·max|w| leaves fewer than 8 bits of weight
    precision for exact f64 products even with two digits."""
    n = 1 << 20
    wide = Linear("wide", sp.csr_matrix(np.ones((1, n))), np.zeros(1), (n,), (1,))
    with pytest.raises(CompileError, match="wide"):
        plan_segment([wide], [float(n)], 20, 50, 16, [1.0])


def test_plan_segment_scales_weights_by_magnitude() -> None:
    """The weight scale keeps ``weight_bits`` bits of the largest weight, whatever its size."""
    for magnitude in (1e-6, 1.0, 1e12):
        op = Linear("w", sp.csr_matrix(np.full((2, 8), magnitude)), np.zeros(2), (8,), (2,))
        (lp,) = plan_segment([op], [16 * magnitude], 20, 50, 16, [1.0]).layers
        assert 2.0**15 <= magnitude * 2.0**lp.exponent < 2.0**17


def test_plan_segment_lazy_without_rescale_for_one_linear() -> None:
    plan = plan_segment([_dense("a", 4, 8)], [4.0], 20, 50, 16, [1.0])
    assert plan.rescales == (0,) and plan.top_limbs == plan.end_limbs == 1
    assert not plan.needs_relin


def test_plan_segment_baseline_rescales_every_op() -> None:
    ops = [_dense("a", 8, 8), Square("s", (8,)), _dense("b", 4, 8)]
    plan = plan_segment(ops, [4.0, 16.0, 8.0], 28, 30, 16, [1.0] * 3, lazy=False)
    assert plan.rescales == (1, 1, 1)
    assert all(lp is None or lp.exponent == 30 for lp in plan.layers)


# ---------------------------------------------------------------------------------- split_segments
def test_split_segments_pre_steps_post() -> None:
    pre, a, r, m, b, post = (
        _relu("pre", 8),
        _dense("a", 8, 8),
        _relu("r", 8),
        _maxpool("m", 8),
        _dense("b", 4, 4),
        _softmax("sm", 4),
    )
    got_pre, segments, steps, got_post = split_segments([pre, a, r, m, b, post])
    assert got_pre == [pre] and got_post == [post]
    assert segments == [[a], [b]]
    assert steps == [[r, m]]


def test_split_segments_without_client_functions() -> None:
    a, s, b = _dense("a", 8, 8), Square("s", (8,)), _dense("b", 4, 8)
    assert split_segments([a, s, b]) == ([], [[a, s, b]], [], [])


def test_split_segments_several_steps() -> None:
    ops = [
        _dense("a", 8, 8),
        _relu("r1", 8),
        _dense("b", 8, 8),
        Square("s", (8,)),
        _relu("r2", 8),
        _dense("c", 4, 8),
    ]
    pre, segments, steps, post = split_segments(ops)
    assert pre == [] and post == []
    assert segments == [[ops[0]], [ops[2], ops[3]], [ops[5]]]
    assert steps == [[ops[1]], [ops[4]]]


def test_split_segments_leading_and_trailing_runs() -> None:
    ops = [_relu("p1", 8), _relu("p2", 8), _dense("a", 8, 8), _relu("q1", 8), _softmax("q2", 8)]
    pre, segments, steps, post = split_segments(ops)
    assert pre == ops[:2] and segments == [[ops[2]]] and steps == [] and post == ops[3:]


@pytest.mark.parametrize(
    "middle",
    [
        pytest.param(lambda: [_maxpool("m1", 8), _maxpool("m2", 4)], id="maxpool-maxpool"),
        pytest.param(lambda: [_maxpool("m1", 8), _softmax("sm", 4)], id="maxpool-softmax"),
        pytest.param(
            lambda: [_softmax("sm", 8), _relu("r", 8), _maxpool("m", 8)], id="softmax-relu-maxpool"
        ),
    ],
)
def test_two_pooling_functions_in_one_step_are_allowed(middle) -> None:
    """No grouping travels on the wire any more: one step may hold several pooling or
    softmax functions, and the compiled program computes the graph's function."""
    import heinfer

    fns = middle()
    n_out = math.prod(fns[-1].out_shape)
    ops = [_dense("a", 8, 8), *fns, _dense("b", 2, n_out)]
    _, segments, steps, _ = split_segments(ops)
    assert len(segments) == 2 and [[f.name for f in st] for st in steps] == [[f.name for f in fns]]
    from heinfer.runtime.scales import set_exact_scales

    g = _graph(ops)
    prog = set_exact_scales(compile_graph(g, calibration=CAL8))
    assert [f.kind for f in prog.steps[0].functions] == [f.kind for f in fns]
    got = heinfer.infer(prog, CAL8[:3]).outputs
    tol = prog.meta["predicted_error"][-1] + 4 * prog.segments[-1].precision
    np.testing.assert_allclose(got, g.run(CAL8[:3]), atol=tol)


def test_two_pooling_functions_in_separate_steps_are_fine() -> None:
    ops = [
        _dense("a", 8, 8),
        _maxpool("m1", 8),
        _dense("b", 4, 4),
        _maxpool("m2", 4),
        _dense("c", 2, 2),
    ]
    _, segments, steps, _ = split_segments(ops)
    assert len(segments) == 3 and [len(s) for s in steps] == [1, 1]


def test_split_segments_needs_a_server_op() -> None:
    with pytest.raises(CompileError, match="no linear layer"):
        split_segments([_relu("r", 8), _softmax("sm", 8)])


def test_compile_refuses_a_graph_of_client_functions_only() -> None:
    with pytest.raises(CompileError):
        compile_graph(_graph([_relu("r", 8)]), calibration=CAL8)


def test_complex_packing_cannot_be_forced_with_squares() -> None:
    g = _graph([_dense("a", 8, 8), Square("s", (8,)), _dense("b", 4, 8)])
    with pytest.raises(CompileError, match="complex packing"):
        compile_graph(g, calibration=CAL8, options=Options(complex_packing=True))
    assert (
        compile_graph(
            _graph([_dense("a", 4, 8)]), calibration=CAL8, options=Options(complex_packing=False)
        ).packing
        == "real"
    )
