"""Choosing the two-party protocol's BFV parameters (``heinfer.compiler.two_party_params``) and
the bounds they rest on (``key_switch_bits``, ``max_flood_bits``)."""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import heinfer
import heinfer.compilation
from heinfer import bfv as hbfv
from heinfer.compiler import two_party_params as tpp
from heinfer.compiler.latency.two_party import DEFAULT_BFV, MAX_FLOOD_BITS, key_switch_bits, max_flood_bits
from heinfer.compiler.plan import max_log_qp
from heinfer.errors import FloodBudgetError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from protocol.residual_models import residual_model  # noqa: E402

X = np.random.default_rng(1).normal(0, 1, (64, 16))


def test_the_compiler_and_the_engine_agree_on_the_widest_flooding() -> None:
    assert MAX_FLOOD_BITS == hbfv.MAX_FLOOD_BITS == 189


def test_the_key_switch_bound_at_gazelle_sizes_and_beyond() -> None:
    """21 bits at N = 2^13 with three 50-bit primes and one special (the bound the protocol's
    benchmarks were flooded with), one more for twice the ring, and the digit-to-P gap when
    the special prime is smaller than a digit."""
    assert key_switch_bits(DEFAULT_BFV) == 21
    assert key_switch_bits({**DEFAULT_BFV, "log_n": 14}) == 22
    assert key_switch_bits({**DEFAULT_BFV, "log_q": [50] * 6}) == 22
    assert key_switch_bits({**DEFAULT_BFV, "log_p": [30]}) == 21 + 50 - 29 - 1


def test_ring_for_flood_picks_the_fewest_primes_in_the_smallest_secure_ring() -> None:
    p20, p30 = int(DEFAULT_BFV["plain_modulus"]), hbfv.plain_primes(15, 30)[0]
    # GAZELLE's p batches in N = 2^13 only; its own parameters hold up to 2^124
    assert tpp.ring_for_flood(p20, 124) == DEFAULT_BFV
    assert tpp.ring_for_flood(p20, 125) is None  # a fourth prime does not fit 218 bits
    # a 30-bit p and a 2^136 flood (MobileNetV2's at 30 bits): N = 2^14, four primes
    bfv = tpp.ring_for_flood(p30, 136)
    assert bfv is not None and (bfv["log_n"], bfv["log_q"], bfv["log_p"]) == (14, [50] * 4, [50])
    assert max_flood_bits(bfv) >= 136 > max_flood_bits({**bfv, "log_q": [50] * 3})
    params = hbfv.BfvParameters(bfv["log_n"], bfv["log_q"], bfv["log_p"], p30, 128)  # the engine agrees
    assert params.security == 128 and params.log_q >= 196
    # at 256-bit security the same flood needs a larger ring
    bfv256 = tpp.ring_for_flood(p30, 136, security=256)
    assert bfv256 is not None and (bfv256["log_n"], len(bfv256["log_q"])) == (15, 4)
    assert (len(bfv256["log_q"]) + 1) * 50 <= max_log_qp(15, 256) and 5 * 50 > max_log_qp(14, 256)
    assert tpp.ring_for_flood(p30, MAX_FLOOD_BITS + 1) is None


def test_choose_bfv_grows_the_modulus_until_the_flooding_fits() -> None:
    """The compile callback stands in for a network whose widest layer needs 2^(117 + log_n):
    the first attempt (GAZELLE's shape with a 28-bit p: 2^116) is refused; four primes at
    N = 2^13 do not fit the security table, so the next is N = 2^14, which holds it."""
    p = hbfv.plain_primes(15, 28)[0]
    seen = []

    def compile_with(bfv: dict) -> dict:
        seen.append(bfv)
        need = 117 + bfv["log_n"]  # a larger ring, a larger bound
        if need > max_flood_bits(bfv):
            raise FloodBudgetError("too wide", bits=need, limit=max_flood_bits(bfv))
        return bfv

    got = tpp.choose_bfv(compile_with, p)
    assert [b["log_n"] for b in seen] == [13, 14]
    assert got == seen[-1] and max_flood_bits(got) >= 131 and len(got["log_q"]) == 4

    def never(bfv: dict) -> dict:
        raise FloodBudgetError("too wide", bits=MAX_FLOOD_BITS + 5, limit=max_flood_bits(bfv))

    with pytest.raises(FloodBudgetError, match=r"no BFV ring up to N = 2\^15"):
        tpp.choose_bfv(never, p)


def test_the_plan_error_falls_with_the_plaintext_modulus() -> None:
    graph = heinfer.compilation._load_graph(residual_model("relu"), None)
    errors = [tpp.plan_error(graph, X, None, 4.0, p) for p in (DEFAULT_BFV["plain_modulus"], hbfv.plain_primes(15, 28)[0])]
    assert errors[0][1] == errors[1][1] == 1.0
    assert 0 < errors[1][0] < errors[0][0] / 8  # 8 more bits: about 2^-8 of the rounding
    assert tpp.plan_error(graph, X, None, 4.0, 5) == (math.inf, 0.0)  # fits no plan


def test_a_network_too_fine_for_20_bits_gets_a_wider_plaintext_modulus(monkeypatch) -> None:
    """The residual network against a stricter bar (a quarter of its 20-bit error) stands in for
    a network too deep for 20 bits: the compiler picks the smallest wider size that meets it,
    the program runs the protocol on it, and its encrypted outputs are the exact simulation's."""
    graph = heinfer.compilation._load_graph(residual_model("relu"), None)
    rel20, _ = tpp.plan_error(graph, X, None, 4.0, DEFAULT_BFV["plain_modulus"])
    monkeypatch.setattr(tpp, "MAX_REL_ERROR", rel20 / 4)
    prog = heinfer.compile(residual_model("relu"), mode="latency", protocol="two-party", calibration=X)
    choice = prog.meta["bfv_choice"]
    assert choice["plain_bits"] == 24 and set(choice["simulated"]) == {"20", "24"}
    assert prog.plain_modulus == hbfv.plain_primes(15, 24)[0] and prog.plain_modulus.bit_length() == 24
    assert prog.meta["simulated_error"]["rel_error"] < rel20
    assert "BFV parameters chosen: a 24-bit plaintext modulus (worst error / agreement on 16 calibration inputs: 20 bits" in (
        heinfer.explain(prog, file=io.StringIO())
    )
    got = heinfer.infer(prog, X[:2]).outputs
    np.testing.assert_array_equal(got, heinfer.simulate(prog, X[:2]))


def test_without_calibration_the_compiler_keeps_gazelles_parameters() -> None:
    prog = heinfer.compile(residual_model("relu"), mode="throughput", protocol="two-party", input_bound=4.0, batch_size=4)
    assert prog.bfv == DEFAULT_BFV and prog.meta["bfv_choice"]["plain_bits"] == 20


def test_higher_security_levels_get_a_ring_from_their_table() -> None:
    """At 192 bits GAZELLE's N = 2^13 with 200 bits of modulus is insecure (the table allows
    152): the compiler starts from a ring that holds as much flooding, the engine accepts the
    parameters, and the protocol's outputs are the exact simulation's."""
    prog = heinfer.compile(residual_model("relu"), mode="latency", protocol="two-party", calibration=X, security=192)
    bfv = prog.bfv
    assert bfv["security"] == 192 and (len(bfv["log_q"]) + 1) * 50 <= max_log_qp(bfv["log_n"], 192)
    assert hbfv.BfvParameters(bfv["log_n"], bfv["log_q"], bfv["log_p"], bfv["plain_modulus"], 192).security == 192
    np.testing.assert_array_equal(heinfer.infer(prog, X[:1]).outputs, heinfer.simulate(prog, X[:1]))


@pytest.mark.parametrize(("log_n", "log_q", "bits"), [(13, [50] * 3, 20), (14, [50] * 4, 36), (14, [50], 36), (14, [50] * 2, 20), (14, [55] * 5, 28)])
def test_the_compiler_never_floods_beyond_what_the_engine_takes(log_n: int, log_q: list, bits: int) -> None:
    """The compiler's flooding limit, from the primes' sizes alone, is at most the engine's
    re-randomizer's on the actual primes (so a compiled program's flooding is never refused at
    run time), and at most two bits under it."""
    from heinfer import ckks

    p = DEFAULT_BFV["plain_modulus"] if (log_n, bits) == (13, 20) else hbfv.plain_primes(15, bits)[0]
    params = hbfv.BfvParameters(log_n, log_q, [max(log_q)], p)
    engine = hbfv.Rerandomizer(params, ckks.KeyGenerator(params.rlwe).public_key()).max_flood_bits
    ours = max_flood_bits({"log_q": log_q, "plain_modulus": p})
    assert engine - 2 <= ours <= engine


@pytest.fixture(scope="module")
def wide() -> heinfer.Program:
    """The residual network at the widest size the compiler picks: a 36-bit plaintext modulus,
    N = 2^14 and four 50-bit primes (floods beyond 2^125)."""
    p = hbfv.plain_primes(15, 36)[0]
    bfv = {"log_n": 14, "log_q": [50] * 4, "log_p": [50], "plain_modulus": p, "security": 128}
    return heinfer.compile(residual_model("clip"), mode="latency", protocol="two-party", calibration=X, bfv=bfv)


def test_a_36_bit_plaintext_modulus_runs_the_protocol_with_floods_beyond_128_bits(wide) -> None:
    """GAZELLE's protocol at the widest size the compiler picks: 36-bit shares in the circuits,
    exact 36-bit products in the simulation, and layers flooded with more than 2^125 (the
    engine's two-part draw): the encrypted outputs are the exact simulation's."""
    assert max(seg.flood_bits for seg in wide.segments) > 125
    np.testing.assert_array_equal(heinfer.infer(wide, X[:1]).outputs, heinfer.simulate(wide, X[:1]))


def test_at_36_bits_the_bound_holds_the_noise_and_the_flood_hides_it(wide) -> None:
    """Playing the client at the larger parameters: the first layer's error, measured on a real
    run before flooding, stays below the bound the compiler floods for (``noise_bits``, with
    this ring's key-switching term); before flooding its noise budget is bits below a fresh
    encryption's, after the server's flooding the two agree to a fraction of a bit, so the
    noise no longer tells the client what ran."""
    from heinfer.compiler.latency.two_party import noise_bits
    from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer

    client = TwoPartyInferenceClient(wide.public())
    server = TwoPartyInferenceServer(wide, client.keys_message())
    p, log_q = server.params.plain_modulus, server.params.log_q
    seg = wide.segments[0]
    values = np.random.default_rng(3).integers(-(p // 4), p // 4, seg.in_size)
    fresh = server._load(client._encrypt(0, values[None]), seg.n_input_cts, "test")
    out = server.layers[0].run(server._ev, fresh, server._galois)
    worst = max(log_q - np.log2(p) - client._dec.noise_budget(c) - 1 for c in out)
    assert worst < noise_bits(wide.layers[0], wide.bfv), worst

    def budgets(cts: list) -> np.ndarray:
        return np.array([client._dec.noise_budget(c) for c in cts])

    def flooded(cts: list) -> list:
        return [server._rr.rerandomize_compact(c, seg.flood_bits) for c in cts]

    raw_gap = budgets(fresh).mean() - budgets(out).mean()
    flooded_gap = abs(budgets(flooded(fresh)).mean() - budgets(flooded(out)).mean())
    assert raw_gap > 2.0 and flooded_gap < 0.5, (raw_gap, flooded_gap)


def test_parameters_passed_by_the_caller_are_refused_when_a_layer_s_flooding_does_not_fit() -> None:
    """With ``bfv=`` the compiler does not grow the modulus: two 30-bit primes cannot hold the
    residual network's flooding, and the error names the widest layer and both sizes; a single
    prime is refused outright (no flooding fits one)."""
    with pytest.raises(heinfer.CompileError, match="at least two ciphertext primes"):
        heinfer.compile(residual_model("relu"), mode="latency", protocol="two-party", calibration=X, bfv={**DEFAULT_BFV, "log_q": [50]})
    bfv = {**DEFAULT_BFV, "log_q": [30, 30], "log_p": [50]}
    with pytest.raises(FloodBudgetError, match=r"needs 2\^\d+ of flooding, more than the BFV parameters hold \(2\^\d+\)") as e:
        heinfer.compile(residual_model("relu"), mode="latency", protocol="two-party", calibration=X, bfv=bfv)
    assert e.value.bits > e.value.limit == max_flood_bits(bfv)
    assert isinstance(e.value, heinfer.CompileError)
