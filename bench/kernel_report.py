"""Printing and summarizing the results of bench/kernels.py."""

from __future__ import annotations

from __future__ import annotations
import os
import sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from kernel_bench import STREAM  # noqa: E402


def fmt(v, w=9, d=1) -> str:
    return ("—" if v is None else f"{v:,.{d}f}").rjust(w)


def print_case_header(first: str, width: int) -> None:
    print(
        f"{first:<{width}}{'in_rot':>7}{'out_rot':>8}{'keysw':>7}{'prod':>7}{'keys':>6}{'online':>9}{'setup':>9}"
        f"{'model':>9}{'err%':>7}{'model*':>9}{'err%':>7}{'max|e|':>9}"
    )


def print_case(name: str, r: dict, width: int, extra: str = "") -> None:
    print(
        f"{name:<{width}}{r['in_rot']:>7}{r['out_rot']:>8}{r['key_switches']:>7}{r['products']:>7}{r['keys']:>6}"
        f"{fmt(r['online_ms'])}{fmt(r['setup_ms'])}{fmt(r['predicted_ms'])}{100 * r['rel_error']:>7.1f}"
        f"{fmt(r['predicted_streaming_ms'])}{100 * r['rel_error_streaming']:>7.1f}{r['max_abs_error']:>9.1e}{extra}"
    )


def report(res: dict) -> None:
    print(
        "\n(online, setup: measured ms; model: measure_costs' table measured around the kernel; model*: the"
        " same with products and rotations measured on distinct operands and keys; err%: (model − online) /"
        " online; max|e|: largest error of the decrypted result against numpy)"
    )
    print(
        "\n## GAZELLE Table 8 — matrix-vector products (ms; GAZELLE: BFV n = 2048, 4 threads, online/setup)"
    )
    for label, t in res["table8"].items():
        print(f"\n{label} (matrix {t['shape'][0]}×{t['shape'][1]}):")
        print_case_header("method", 22)
        for name, r in t["cases"].items():
            g = t["gazelle"].get(name.split(" ")[0])
            extra = (
                f"   GAZELLE {g[3]}/{g[4]} ms ({g[0]} in, {g[1]} out rot)"
                if g and name != "search"
                else ""
            )
            if name == "search":
                extra = f"   [{r['choice']}]"
            print_case(name, r, 22, extra)
    print(
        "\n## GAZELLE Table 9 — convolutions, channel-blocked (I: input rotations M = S, O: output rotations M = block)"
    )
    for label, t in res["table9"].items():
        print(f"\n{label}: {t['nnz']:,} non-zeros")
        print_case_header("layout / algorithm", 34)
        for lname, cases in t["layouts"].items():
            for alg, r in cases.items():
                g = t["gazelle"][alg]
                print_case(
                    f"{lname} {alg} M={r['giant_modulus']}", r, 34, f"   GAZELLE {g[0]}/{g[1]} ms"
                )
    pk = res["packing"]
    print(f"\n## packing-configurations §V — {pk['layer']} (ms; online = server evaluation)")
    print(
        f"{'configuration':<44}{'cts in/out':>11}{'encrypt':>9}{'online':>9}{'decrypt':>9}{'total':>9}{'model':>9}  kernel"
    )

    def row(name, r):
        tot = r["encrypt_ms"] + r["online_ms"] + r["decrypt_ms"]
        mod = r["predicted_encrypt_ms"] + r["predicted_ms"] + r["predicted_decrypt_ms"]
        print(
            f"{name:<44}{str(r['in_cts']) + '/' + str(r['out_cts']):>11}{fmt(r['encrypt_ms'], d=2)}{fmt(r['online_ms'], d=2)}"
            f"{fmt(r['decrypt_ms'], d=2)}{fmt(tot, d=2)}{fmt(mod, d=2)}  {r.get('choice', '')}"
        )

    row("baseline: one value per ciphertext", pk["baseline"])
    for name, r in pk["search"].items():
        row(("* " if name == pk["search_choice"] else "  ") + "search from " + name, r)
    row("wide search (layout pairs × M)", pk["wide_search"])
    print(
        f"baseline / search choice: ×{pk['ratio_total']:.1f} end to end, ×{pk['ratio_online']:.1f} online;"
        f" wide search ×{pk['ratio_total_wide']:.1f} (paper: 4.2185 s → 0.0982 s, ×43)"
    )
    print(
        "\nprimitives at the kernels' level, µs: measure_costs (one operand, one key) / distinct operands and keys"
    )
    print(
        "   "
        + ", ".join(
            f"{k} {v['measure_costs']:.0f}/{v['distinct_operands']:.0f}"
            for k, v in res["primitives_us"].items()
        )
    )
    cm = res["cost_model"]
    print(
        f"\n## cost model: mean |predicted − measured| / measured over {cm['cases']} kernels (online), "
        f"costs measured just before and after each kernel: {100 * cm['mean_abs_rel_error']:.1f}% "
        f"(target ≤ 10%, paper 4.87%)\n   Table 8 {100 * cm['table8']:.1f}%, Table 9 {100 * cm['table9']:.1f}%, "
        f"packing {100 * cm['packing']:.1f}%; median {100 * cm['median_abs_rel_error']:.1f}%, "
        f"max {100 * cm['max_abs_rel_error']:.1f}%, mean signed {100 * cm['mean_signed_rel_error']:+.1f}%\n"
        f"   with the element-wise minimum of the two tables instead of their mean (other processes "
        f"only add time): {100 * cm['mean_abs_rel_error_quietest']:.1f}%; "
        f"with the table measured once at the start (the compiler's cached view): "
        f"{100 * cm['mean_abs_rel_error_start_table']:.1f}%; against process CPU time instead of wall "
        f"clock: {100 * cm['mean_abs_rel_error_cpu']:.1f}%\n"
        f"   with products and rotations measured on {STREAM} distinct operands and keys (as kernels "
        f"have them; measure_costs reuses one): {100 * cm['mean_abs_rel_error_streaming_products']:.1f}% "
        f"(mean signed {100 * cm['mean_signed_rel_error_streaming_products']:+.1f}%)"
    )


def cost_model_summary(res: dict) -> dict:
    t8 = [r for t in res["table8"].values() for r in t["cases"].values()]
    t9 = [
        r for t in res["table9"].values() for cases in t["layouts"].values() for r in cases.values()
    ]
    pk = [
        res["packing"]["baseline"],
        *res["packing"]["search"].values(),
        res["packing"]["wide_search"],
    ]

    def mean(cases, key="rel_error"):
        return float(np.mean([abs(r[key]) for r in cases]))

    every = t8 + t9 + pk
    errs = [abs(r["rel_error"]) for r in every]
    return {
        "cases": len(every),
        "mean_abs_rel_error": mean(every),
        "mean_abs_rel_error_cpu": mean(every, "rel_error_cpu"),
        "mean_abs_rel_error_start_table": mean(every, "rel_error_start"),
        "mean_abs_rel_error_quietest": mean(every, "rel_error_quiet"),
        "mean_abs_rel_error_streaming_products": mean(every, "rel_error_streaming"),
        "mean_signed_rel_error_streaming_products": float(
            np.mean([r["rel_error_streaming"] for r in every])
        ),
        "median_abs_rel_error": float(np.median(errs)),
        "max_abs_rel_error": float(np.max(errs)),
        "mean_signed_rel_error": float(np.mean([r["rel_error"] for r in every])),
        "table8": mean(t8),
        "table9": mean(t9),
        "packing": mean(pk),
    }

