"""``heinfer.tune_precision``: the split of a throughput plan's bits that errs least, for free.

A throughput plan spends the bits of each segment's modulus on the input scale
(``input_bits``) and the weight scale (``weight_bits``); which of the two sets the error
depends on the network and the packing (in coefficient packing fresh noise is σ per item, so
the weights' rounding often dominates; in slots it is √N times larger). Moving ``d`` bits from
one to the other often leaves every segment's limbs as they were — the same parameters,
ciphertexts, work and bytes — and changes only the error. :func:`tune_precision` compiles the
splits ``(input_bits − d, weight_bits + d)`` for ``d`` in ``−shift..shift``, keeps those whose
parameters and every segment's input and output levels equal the requested plan's, and
measures each with :func:`heinfer.simulate` on the calibration inputs (the largest error over
the largest output, the mean over ``seeds`` draws); the requested split stays unless another
errs at least 5 % less.

**Cheaper plans within an error budget.** With ``max_error``, the search lowers the bits
instead: it compiles every ``(input_bits − a, weight_bits − c)`` for ``a, c`` in
``0..shift``, ranks them by the compiler's cost model (``meta["cost_ns_per_coeff"]``, client
and server, per ring coefficient), and simulates them cheapest first; the first cost that
has a split within the budget wins, the split of least simulated error at that cost. Fewer
bits lower the scales, and where that frees a prime every segment on it runs on a limb
fewer. The worst-case bound the compiler states (``meta["predicted_error"]``) adds every
rounding at its largest; the simulation draws them, and two bits off a scale often move it
far less than the bound says: CryptoNets at ``(22, 15)`` needs 5 primes instead of 6,
simulated error 1.2e-4 of the largest logit against 1.1e-4 at ``(24, 16)`` (encrypted runs:
1.2–1.5e-4 and 1.3e-4), its bound 1.09 against 0.38. Layer: top level (compiles).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from heinfer.compiler.simulate import simulate
from heinfer.compiler.throughput import Options
from heinfer.errors import CompileError

__all__ = ["tune_precision", "tuned_program"]


def tune_precision(
    model: Any, calibration: np.ndarray, shift: int = 4, seeds: int = 2, max_error: float | None = None, **options: Any
) -> tuple[dict, list[dict]]:
    """``(options, candidates)``: the throughput compile options (``options`` with the best
    ``input_bits`` and ``weight_bits``) and every split tried, each a dict with
    ``input_bits``, ``weight_bits``, ``same_limbs`` and ``simulated_error`` (``None`` when it
    does not compile or changes the limbs). ``options``: as for :func:`heinfer.compile` in
    throughput mode; ``calibration`` sizes the scales and is what the errors are measured on.

    ``max_error``: the cheapest plan whose simulated error (the largest over the largest
    output, as above) is at most this (see the module documentation); each candidate then
    also has ``cost`` (the cost model's, ``None`` when it does not compile) and
    ``simulated_error`` where it was simulated. Raises :class:`CompileError` when not even the
    requested bits are within it."""
    found, candidates, _ = tuned_program(model, calibration, shift, seeds, max_error, **options)
    return found, candidates


def tuned_program(
    model: Any, calibration: np.ndarray, shift: int = 4, seeds: int = 2, max_error: float | None = None, **options: Any
) -> tuple[dict, list[dict], Any]:
    """:func:`tune_precision` and the program it chose, compiled once (what
    ``heinfer compile --tune-precision`` writes). Only the requested split's program and the
    best one so far are kept while the others are tried (with ``max_error``, the programs of
    one cost at a time)."""
    from heinfer.compilation import compile as compile_program

    if not isinstance(shift, int) or shift < 0 or not isinstance(seeds, int) or seeds < 1:
        raise CompileError(f"tune_precision: shift must be an integer ≥ 0 and seeds ≥ 1, got {shift!r}, {seeds!r}")
    if max_error is not None and (isinstance(max_error, bool) or not (isinstance(max_error, (int, float)) and math.isfinite(max_error) and max_error > 0)):
        raise CompileError(f"tune_precision: max_error must be a positive number, got {max_error!r}")
    if options.pop("mode", "throughput") != "throughput" or options.pop("protocol", "client-aided") != "client-aided":
        raise CompileError("tune_precision tunes throughput-mode, client-aided plans only")
    calibration = np.asarray(calibration)
    defaults = Options()
    ib = int(options.pop("input_bits", defaults.input_bits))
    wb = int(options.pop("weight_bits", defaults.weight_bits))

    def build(i: int, w: int):
        return compile_program(model, mode="throughput", calibration=calibration, input_bits=i, weight_bits=w, **options)

    base = build(ib, wb)  # refuses (CompileError) what the requested options cannot compile
    shape = _limbs(base)
    # the plan without any rounding: the splits differ only in their scales, so one reference
    exact = simulate(base, calibration, errors=False)
    top = float(np.abs(exact).max()) or 1.0

    def error(prog) -> float:
        errs = [float(np.abs(simulate(prog, calibration, seed=s) - exact).max()) / top for s in range(seeds)]
        return float(np.mean(errs))

    if max_error is not None:
        found, candidates, prog = _cheapest_within(build, base, (ib, wb), shift, float(max_error), error)
        return {**options, **found}, candidates, prog
    candidates = []
    low, low_prog = None, None  # the least simulated error so far (ties: nearest the request)
    for d in range(-shift, shift + 1):
        i, w = ib - d, wb + d
        row: dict = {"input_bits": i, "weight_bits": w, "same_limbs": False, "simulated_error": None}
        candidates.append(row)
        if i < 1 or w < 1:
            continue
        try:
            prog = base if d == 0 else build(i, w)
        except CompileError:
            continue
        if _limbs(prog) != shape:
            continue
        row["same_limbs"] = True
        row["simulated_error"] = error(prog)
        if low is None or (row["simulated_error"], abs(d)) < (low["simulated_error"], abs(low["input_bits"] - ib)):
            low, low_prog = row, prog
    # the requested split unless another errs clearly less (5 %: draws of the same noise differ)
    best, best_prog = candidates[shift], base
    if low["simulated_error"] < 0.95 * best["simulated_error"]:
        best, best_prog = low, low_prog
    return {**options, "input_bits": best["input_bits"], "weight_bits": best["weight_bits"]}, candidates, best_prog


def _cheapest_within(build, base, bits: tuple[int, int], shift: int, budget: float, error) -> tuple[dict, list[dict], Any]:
    """The budget search of :func:`tuned_program`: ``build(i, w)`` compiles a split, ``base``
    is the requested one's program (``bits``), ``error(prog)`` simulates one. Every split is
    compiled once to price it and only the cost is kept; the splits of the cost being
    simulated are compiled again (compiling is deterministic and far cheaper than
    simulating), so at most one cost's programs are held at a time."""
    ib, wb = bits
    candidates = []
    for a in range(shift + 1):
        for c in range(shift + 1):
            i, w = ib - a, wb - c
            row: dict = {"input_bits": i, "weight_bits": w, "same_limbs": False, "simulated_error": None, "cost": None}
            candidates.append(row)
            if i < 1 or w < 1:
                continue
            try:
                prog = base if (a, c) == (0, 0) else build(i, w)
            except CompileError:
                continue
            row["same_limbs"] = _limbs(prog) == _limbs(base)
            row["cost"] = float(prog.meta["cost_ns_per_coeff"])
    priced = sorted((row for row in candidates if row["cost"] is not None), key=lambda r: r["cost"])
    while priced:
        # cheapest first; costs within 1e-9 of each other are the same plan shape
        cost = priced[0]["cost"]
        same = [row for row in priced if row["cost"] <= cost * (1 + 1e-9)]
        priced = priced[len(same):]
        programs = {}
        for row in same:
            key = (row["input_bits"], row["weight_bits"])
            programs[key] = base if key == bits else build(*key)
            row["simulated_error"] = error(programs[key])
        within = [row for row in same if row["simulated_error"] <= budget]
        if within:
            # the least error at this cost (ties: the most bits kept)
            best = min(within, key=lambda r: (r["simulated_error"], -(r["input_bits"] + r["weight_bits"])))
            key = (best["input_bits"], best["weight_bits"])
            return {"input_bits": key[0], "weight_bits": key[1]}, candidates, programs[key]
    requested = candidates[0]["simulated_error"]
    raise CompileError(
        f"tune_precision: no split within max_error={budget:.3g}: the requested input_bits={ib}, "
        f"weight_bits={wb} err {requested:.3g} of the largest output (simulated); raise the bits or the budget"
    )


def _limbs(program) -> tuple:
    """What fixes a plan's ciphertexts, work and bytes: its parameters and every segment's
    input and output levels."""
    p = program.params
    return (p["log_n"], tuple(p["log_q"]), tuple(p["log_p"]), tuple((s.input_level, s.output_level, s.layout.packing) for s in program.segments))
