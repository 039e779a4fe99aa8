"""Latency-mode kernels measured natively: GAZELLE's Tables 8 and 9, the packing-configurations
layer, and the accuracy of the cost model.

    .venv/bin/python bench/kernels.py [--quick] [--threads 1]

Every kernel is a lowered :class:`~heinfer.program.transform.Transform` run by the
engine through a one-op slot-layout :class:`~heinfer.program.model.Segment` and
:class:`~heinfer.runtime.slots.PreparedSlots` (the server's code path), at 128-bit
parameters with one level — those :func:`~heinfer.compiler.latency.compile.choose_parameters`
gives for depth 1 at N = 2^13. One secret key per run; for every kernel the Galois keys of
exactly ``transform.rotation_steps()``. Per kernel: online ms (the ciphertext operations:
rotations, products, rescale, fold — median of the repetitions), setup ms (encoding its
plaintexts), rotations and key switches counted by ``Transform.counts()``, the cost model's
prediction (``transform_cost``) and the largest error of the decrypted result against numpy.

The cost tables are ``measure_costs``'s, measured in this run: one at the start (element-wise
minimum of three measurements) drives the searches, as the compiler's cached table would;
another, the mean of two measured just before and just after each kernel, gives the
prediction the model's accuracy is judged by (the element-wise minimum of those two is
reported beside it: other processes only add time, so the smaller median is the less
disturbed one). On this shared two-core virtual machine other processes change every timing
by up to ±40% from one minute to the next (a neighbour on the sibling hyperthread slows CPU
time too), which a table measured minutes earlier cannot know.

* **Table 8** (GAZELLE §7.3): matrices ``n_o × n_i`` = 1×2048, 128×1024, 16×1024, 16×128
  (the paper labels them ``n_i × n_o``: "2048×1" has one output, see its naive row) with the
  naive method, diagonals with input rotations only (``M = S``) and with baby-step giant-step
  (``M ≈ √#diagonals``), GAZELLE's hybrid, and the kernel heinfer's search picks.
* **Table 9**: same-padded convolutions in GAZELLE's channel-blocked layout with input
  rotations (``M = S``) and output rotations (``M`` = the channel block); the stride-2 one
  also direct to a compact output, direct leaving data stride 2, and GAZELLE's polyphase
  decomposition (§6.1).
* **packing-configurations §V**: 5×5×3 input, 3×3 filter, stride 2, 4 output channels; its
  baseline (no batching: one value per ciphertext) against the kernel heinfer's search
  (``choose_kernel``) picks over the input layouts of ``conv_layouts``, and against a wider
  search over (input, output) layout pairs and moduli (``to_placement``); client encryption
  and decryption included, as in the paper's Table I.
* the cost model's mean absolute relative error over every measured kernel (also with the
  start table, and against process CPU time).

``--quick`` (about 2–3 minutes here) runs every case with fewer repetitions; no case needs
the full mode (the largest, 35 million non-zeros, peaks near 4.5 GB).

Prints tables; the LAST line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import math
import os
import platform
import resource
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import scipy.sparse as sp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

from heinfer import _native
from heinfer.compiler.ir import Linear
from heinfer.compiler.latency import conv_layouts as cl
from heinfer.compiler.latency import kernels
from heinfer.compiler.latency.compile import LatencyOptions, choose_parameters
from heinfer.compiler.cost import KINDS, transform_cost
from heinfer.compiler.latency.layout import Placement
from heinfer.compiler.latency.search import choose_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_bench import COST_REPS, COST_ROUNDS, GAZELLE_T8, GAZELLE_T9, LEVEL, LOG_N, OUT_BOUND, PAPER_PACKING, Bench, log  # noqa: E402
from machine import build_profile, cpu_model, others_load  # noqa: E402
from kernel_report import cost_model_summary, report  # noqa: E402


def weights(shape, taps: int, rng) -> np.ndarray:
    return rng.uniform(-1, 1, shape) / math.sqrt(max(taps, 1))


def choose(op: Linear, inp: Placement, costs) -> tuple:
    """heinfer's search for one layer: ``(step, output placement)`` (either signature)."""
    kw = {"clean": True} if "clean" in inspect.signature(choose_kernel).parameters else {}
    res = choose_kernel(op, inp, LEVEL, costs, None, **kw)
    return res[0], res[1]


# ------------------------------------------------------------------------------- Table 8
def table8(b: Bench, quick: bool) -> dict:
    S = b.slots
    rng = np.random.default_rng(1)
    out = {}
    for (n_o, n_i), ref in GAZELLE_T8.items():
        label = f"{n_i}x{n_o}"
        A = sp.csr_matrix(weights((n_o, n_i), n_i, rng))
        inp = Placement.dense(n_i, S)
        cases = {}
        built = _table8_kernels(A, inp, b.costs)
        reps = 3 if quick else 7
        for name, kernel in built.items():
            if kernel is None:
                log(f"  {label} {name}: does not apply")
                continue
            t, o = kernel[0], kernel[1]
            r = b.run(t, inp, o, A, reps)
            if name == "search":
                r["choice"] = kernel[2]
            cases[name] = r
            log(
                f"  table 8 {label} {name}: {r['online_ms']:.1f} ms online, {r['setup_ms']:.0f} ms setup"
            )
        out[label] = {"shape": [n_o, n_i], "cases": cases, "gazelle": ref}
    return out


def _table8_kernels(A, inp: Placement, costs) -> dict:
    """``{method: (transform, output placement[, choice]) or None}`` for one matrix."""
    S = inp.slots
    t_diag, o_diag = kernels.diagonal(A, None, inp, S)
    m = 1 << max(0, round(math.log2(max(math.sqrt(len(t_diag.terms)), 1))))
    return {
        "naive": kernels.naive(A, None, inp),
        "diagonal": (t_diag, o_diag),
        f"bsgs (M={m})": kernels.diagonal(A, None, inp, m),
        "hybrid": kernels.hybrid(A, None, inp, S),
        "search": _search_step(A, inp, costs),
    }


def _search_step(A, inp: Placement, costs):
    op = Linear("fc", A, np.zeros(A.shape[0]), (A.shape[1],), (A.shape[0],))
    step, out = choose(op, inp, costs)
    plan = step.plan
    return (
        step.transform,
        out,
        f"{plan.get('method')} M={plan.get('giant_modulus')}"
        + (f" copies={plan['copies']}" if plan.get("copies", 1) != 1 else ""),
    )


# ------------------------------------------------------------------------------- Table 9
def table9_layouts(H, W, C, k, Co, s, S):
    """``{layout name: (input placement, output placement, output-rotation modulus)}``."""
    Ho, Wo = cl.conv_output_shape(H, W, (k, k), s, k // 2)
    if s == 1:
        inp = cl.channel_blocked(C, H, W, S)
        return {"channel-blocked": (inp, cl.channel_blocked(Co, Ho, Wo, S), H * W)}
    blk = cl.channel_blocked(C, H, W, S)
    return {
        "direct, compact output": (blk, cl.channel_blocked(Co, Ho, Wo, S), Ho * Wo),
        "direct, data stride 2": (blk, cl.strided(Co, Ho, Wo, S, s, row=W, block=H * W), H * W),
        "polyphase (§6.1)": (
            cl.polyphase(C, H, W, S, s, pow2=True),
            cl.channel_blocked(Co, Ho, Wo, S, pow2=True),
            1 << math.ceil(math.log2(Ho * Wo)),
        ),
    }


def table9(b: Bench, quick: bool) -> dict:
    S = b.slots
    rng = np.random.default_rng(2)
    out = {}
    for (H, W, C, k, Co, s), ref in GAZELLE_T9.items():
        label = f"({H}x{W},{C})*({k}x{k},{Co})" + (f" s{s}" if s > 1 else "")
        t0 = time.perf_counter()
        A = cl.conv_matrix(weights((Co, C, k, k), C * k * k, rng), H, W, s, k // 2)
        mat_s = time.perf_counter() - t0
        big = A.nnz > 20_000_000
        reps = (2 if big else 3) if quick else (3 if big else 7)
        layouts = {}
        for lname, (inp, o, M_out) in table9_layouts(H, W, C, k, Co, s, S).items():
            t0 = time.perf_counter()
            diags = cl.diagonals(A, inp, o)
            diag_s = time.perf_counter() - t0
            cases = {}
            for alg, M in (("I", S), ("O", M_out)):
                t0 = time.perf_counter()
                t = diags.lower(M)
                build_s = diag_s + time.perf_counter() - t0
                r = b.run(t, inp, o, A, reps)
                r["giant_modulus"] = M
                r["build_ms"] = 1e3 * build_s
                cases[alg] = r
                log(
                    f"  table 9 {label} {lname} {alg} (M={M}): {r['online_ms']:.1f} ms online, "
                    f"{r['setup_ms']:.0f} ms setup, build {build_s:.1f} s"
                )
                del t
                gc.collect()
            layouts[lname] = cases
            del diags
        out[label] = {
            "nnz": int(A.nnz),
            "matrix_ms": 1e3 * mat_s,
            "layouts": layouts,
            "gazelle": ref,
        }
        del A
        gc.collect()
    return out


# ----------------------------------------------------------------- packing-configurations
def packing_layouts(S: int) -> dict:
    C, H, W = 3, 5, 5
    return {
        "channel-blocked": cl.channel_blocked(C, H, W, S),
        "channel-blocked pow2": cl.channel_blocked(C, H, W, S, pow2=True),
        "interleaved": cl.interleaved(C, H, W, S),
        "interleaved pow2": cl.interleaved(C, H, W, S, channels=4),
        "data stride 2": cl.strided(C, H, W, S, 2),
        "polyphase (split d=2)": cl.polyphase(C, H, W, S, 2),
        "polyphase pow2": cl.polyphase(C, H, W, S, 2, pow2=True),
        "split d=4": cl.split(C, H, W, S, 4),
        "split d=5 (full)": cl.split(C, H, W, S, 5),
        "one channel per ct": cl.channel_blocked(C, H, W, S, per_ct=1),
    }


def packing_outputs(S: int, name: str, inp: Placement) -> dict:
    """Output placements of the 2×2×4 result worth pairing with input layout ``name``."""
    Co, Ho, Wo = 4, 2, 2
    outs = {
        "dense": Placement.dense(Co * Ho * Wo, S),
        "channel-blocked pow2": cl.channel_blocked(Co, Ho, Wo, S, pow2=True),
        "interleaved": cl.interleaved(Co, Ho, Wo, S),
    }
    if name.startswith("channel-blocked") and "pow2" not in name:
        outs["data stride 2 (input grid)"] = cl.strided(Co, Ho, Wo, S, 2, row=5, block=25)
    if name.startswith("channel-blocked pow2"):
        outs["data stride 2 (input grid)"] = cl.strided(Co, Ho, Wo, S, 2, row=5, block=32)
    if name.startswith("polyphase"):
        blk = 16 if "pow2" in name else 9
        outs["sub-image grid"] = cl.channel_blocked(Co, Ho, Wo, S, row=3, block=blk)
    if name == "one channel per ct":
        outs["one channel per ct"] = cl.channel_blocked(Co, Ho, Wo, S, per_ct=1)
    return outs


def packing(b: Bench, quick: bool) -> dict:
    S = b.slots
    rng = np.random.default_rng(3)
    w = weights((4, 3, 3, 3), 27, rng)
    A = cl.conv_matrix(w, 5, 5, 2, 0)
    op = Linear("conv", A, np.zeros(A.shape[0]), (3, 5, 5), (4, 2, 2))
    reps = 10 if quick else 50

    def total(r):
        return r["encrypt_ms"] + r["online_ms"] + r["decrypt_ms"]

    def predicted_total(r):
        return r["predicted_encrypt_ms"] + r["predicted_ms"] + r["predicted_decrypt_ms"]

    res: dict = {"layer": "5x5x3 * 3x3 stride 2 -> 2x2x4 (valid)", "nnz": int(A.nnz)}
    base_in, base_out = cl.unbatched(3, 5, 5, S), cl.unbatched(4, 2, 2, S)
    r = b.run(cl.to_placement(A, None, base_in, base_out, 1), base_in, base_out, A, reps)
    res["baseline"] = r
    log(f"  packing baseline (one value per ciphertext): {total(r):.1f} ms")
    # heinfer's search (choose_kernel, dense output) from every input layout
    search = {}
    for name, inp in packing_layouts(S).items():
        step, o = choose(op, inp, b.costs)
        plan = step.plan
        r = b.run(step.transform, inp, o, A, reps)
        r["choice"] = f"{plan.get('method')} M={plan.get('giant_modulus')}" + (
            f" copies={plan['copies']}" if plan.get("copies", 1) != 1 else ""
        )
        r["search_predicted_total_ms"] = (
            1e3 * plan["predicted_s"] + sum(b.predict_client(inp.n_cts, o.n_cts)) * 1e3
        )
        search[name] = r
    best = min(search, key=lambda n: search[n]["search_predicted_total_ms"])
    res["search"] = search
    res["search_choice"] = best
    # a wider search: every (input, output) layout pair and giant-step modulus, via to_placement
    wide = []
    for name, inp in packing_layouts(S).items():
        for oname, o in packing_outputs(S, name, inp).items():
            d = cl.diagonals(A, inp, o)
            for M in [1 << i for i in range(int(math.log2(S)) + 1)]:
                t = d.lower(M)
                p = transform_cost(t, LEVEL, b.costs) + sum(b.predict_client(inp.n_cts, o.n_cts))
                wide.append((p, name, oname, M))
    wide.sort()
    p, name, oname, M = wide[0]
    inp = packing_layouts(S)[name]
    o = packing_outputs(S, name, inp)[oname]
    r = b.run(cl.to_placement(A, None, inp, o, M), inp, o, A, reps)
    r["choice"] = f"{name} -> {oname}, M={M}"
    res["wide_search"] = r
    res["wide_candidates"] = len(wide)
    chosen = search[best]
    res["ratio_total"] = total(res["baseline"]) / total(chosen)
    res["ratio_online"] = res["baseline"]["online_ms"] / chosen["online_ms"]
    res["ratio_total_wide"] = total(res["baseline"]) / total(r)
    res["paper"] = PAPER_PACKING
    res["predicted_total_rel_error"] = {
        k: (predicted_total(v) - total(v)) / total(v)
        for k, v in (("baseline", res["baseline"]), ("chosen", chosen), ("wide", r))
    }
    return res


# --------------------------------------------------------------------------------- report
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (< 5 minutes)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    _native.set_num_threads(args.threads)
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    params = choose_parameters(1, OUT_BOUND, LatencyOptions(log_n=LOG_N))
    b = Bench(params, args.threads)
    print(
        f"# heinfer latency kernels — CPU: {cpu_model()}, threads: {args.threads}, build: {build_profile()}"
    )
    print(
        f"# parameters: logN={params['log_n']} log_q={params['log_q']} log_p={params['log_p']} scale 2^{params['log_scale']}"
        f" ({params['security']}-bit; choose_parameters(depth=1) at N=2^{LOG_N}), {b.slots} slots; kernels at level {LEVEL}"
    )
    log(f"cost table measured in {b.cost_seconds:.1f} s")
    res = {"params": params}
    stream = b.streaming_costs()
    res["primitives_us"] = {
        k: {"measure_costs": 1e6 * b.costs[k][lvl], "distinct_operands": 1e6 * v[lvl], "level": lvl}
        for k, by_level in stream.items()
        for lvl, v in [(max(by_level), by_level)]
    }
    res["table8"] = table8(b, args.quick)
    res["table9"] = table9(b, args.quick)
    res["packing"] = packing(b, args.quick)
    res["cost_model"] = cost_model_summary(res)
    report(res)
    res["cost_table"] = {k: v for k, v in b.costs.items() if isinstance(v, list)}
    res["cost_table_rounds"] = [{k: r[k] for k in KINDS} for r in b.cost_rounds]
    res["meta"] = {
        "cpu": cpu_model(),
        "build": build_profile(),
        "threads": args.threads,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "quick": bool(args.quick),
        "seconds": time.perf_counter() - t_start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cost_source": b.costs.get("source"),
        "cost_table": f"element-wise minimum of {COST_ROUNDS} measure_costs(reps={COST_REPS}) tables",
        "timing": "online: median wall-clock of the repetitions (online_cpu_ms: median process CPU time)",
        "loadavg_start_end": [load_start[0], os.getloadavg()[0]],
        "others_load": others_load(),
    }
    print(
        f"\n({res['meta']['seconds']:.0f} s, peak RSS {res['meta']['peak_rss_mb']:.0f} MB, "
        f"1-minute load average {load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end)"
    )
    print(f"# other work on this machine during the run: {res['meta']['others_load']}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
