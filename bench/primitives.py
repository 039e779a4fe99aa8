"""Side-by-side CKKS primitives: heinfer vs SEAL (tenseal.sealapi) vs OpenFHE vs SEAL + HEXL.

    python bench/primitives.py [--quick] [--reps N] [--logn 13 14 15] [--no-two-threads]

For each ring degree the same parameters go to every library — the same N, the same
log2(QP) budget, the same number of usable levels and the same scale 2^40, full slots —
each library choosing its own primes and key-switching digits within that, as its users would
(bench/compare/README.md). Every library runs single-threaded; heinfer also runs with two
threads. The runners execute back to back in this run (OpenFHE needs Python 3.10, hence
subprocesses), in interleaved rounds (heinfer, SEAL, OpenFHE, SEAL + HEXL, heinfer, …; three
by default, two with --quick); each library's time is the smallest of its per-round medians,
so a burst of load on this shared virtual machine (timings move by ±30% from one minute to
the next) favours no library.

The peers: the PyPI wheels of SEAL (tenseal) and OpenFHE, generic builds without AVX-512, and
SEAL 4.0 built from source with Intel HEXL (AVX-512 and IFMA NTTs and element-wise kernels;
bench/setup_compare.sh, from the sources crates.io's `seal_fhe` ships and Debian's
cpu_features), timed by a C++ runner. Prints a table of medians (µs), `ratio` = heinfer ÷ the
fastest peer, `ratio pip` = heinfer ÷ the faster of the two wheels (the ratio of earlier
runs), precision bits, serialized sizes (SEAL's also in its compressed default) and which
vector instructions each compared build contains (bench/compare/simd.py); the LAST line is one
JSON object:
{"logN=13": {OP: {"heinfer_us", "seal_us", "openfhe_us", "seal_hexl_us", "ratio", "ratio_pip",
 "heinfer_2t_us"}, ...}, "logN=14": {...}, "logN=15": {...}, "precision_bits": {...},
 "sizes": {...}, "meta": {...}}
--quick runs logN 13 and 14 with few repetitions (under 4 minutes here).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMPARE = os.path.join(ROOT, "bench", "compare")
sys.path.insert(0, COMPARE)
import simd  # noqa: E402  (bench/compare/simd.py)

sys.path.insert(0, os.path.join(ROOT, "bench"))
from machine import cpu_model, has_avx512, others_load  # noqa: E402
OPS = ("encode", "encrypt", "decrypt", "decode", "add", "mul_plain", "mul_const",
       "mul_relin", "rescale", "rotate", "rotate_steps", "rotate_hoisted", "conjugate")
SETS = {13: (3, 218), 14: (7, 438), 15: (16, 881)}
SCALE_BITS = 40
#: SEAL + Intel HEXL, built from source by bench/setup_compare.sh (seal_hexl_runner.py's default).
HEXL_BINARY = os.environ.get("SEAL_HEXL_RUNNER", os.path.join(ROOT, ".seal-hexl", "bin", "seal_hexl_runner"))


def log(*msg):
    print(*msg, file=sys.stderr, flush=True)


def run_runner(python: str, script: str, logn: int, reps: int, hoist: int, extra=()) -> dict:
    levels, budget = SETS[logn]
    cmd = [python, os.path.join(COMPARE, script), "--logn", str(logn), "--levels", str(levels),
           "--scale-bits", str(SCALE_BITS), "--max-logqp", str(budget), "--reps", str(reps),
           "--hoist", str(hoist), *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.time()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"unavailable": f"{script}: {e}"}
    lines = [ln for ln in out.stdout.splitlines() if ln.strip().startswith("{")]
    if out.returncode != 0 or not lines:
        tail = (out.stderr or "").strip().splitlines()[-3:]
        return {"unavailable": f"{script} exited {out.returncode}: {' | '.join(tail)}"}
    res = json.loads(lines[-1])
    log(f"  {script} logN={logn} {' '.join(extra)}: {time.time() - t0:.1f}s")
    return res


def merge_min(results: list[dict]) -> dict:
    """The first available result, with each timing replaced by the smallest of the rounds."""
    ok = [r for r in results if "timings_us" in r]
    if not ok:
        return results[0]
    out = dict(ok[0])
    out["timings_us"] = {
        op: (min(vs) if (vs := [r["timings_us"].get(op) for r in ok if r["timings_us"].get(op) is not None]) else None)
        for op in ok[0]["timings_us"]
    }
    return out


def fmt(v, width=10, digits=1):
    if v is None:
        return "—".rjust(width)
    return f"{v:,.{digits}f}".rjust(width)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="logN 13 and 14, few repetitions (< 3 min)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per op (median)")
    ap.add_argument("--logn", type=int, nargs="*", default=None, choices=sorted(SETS))
    ap.add_argument("--no-two-threads", action="store_true", help="skip heinfer's 2-thread run")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds per library (default 3, quick 2)")
    args = ap.parse_args(argv)
    logns = args.logn or ([13, 14] if args.quick else [13, 14, 15])
    main_py = sys.executable
    ofhe_py = os.path.join(ROOT, ".venv-openfhe", "bin", "python")
    have_ofhe = os.path.exists(ofhe_py)
    if not have_ofhe:
        log("OpenFHE: no .venv-openfhe (run `make bench-deps`): skipped")
    have_hexl = os.access(HEXL_BINARY, os.X_OK)
    if not have_hexl:
        log("SEAL + HEXL: no .seal-hexl/ runner (run `make bench-deps`): skipped")
    result: dict = {"precision_bits": {}, "sizes": {}}
    notes = []
    for logn in logns:
        reps = args.reps or (5 if args.quick else (20 if logn < 15 else 6))
        log(f"logN={logn}: reps={reps}")
        rounds = []
        for _ in range(args.rounds or (2 if args.quick else 3)):
            h = run_runner(main_py, "heinfer_runner.py", logn, reps, 16, ("--threads", "1"))
            s_ = run_runner(main_py, "seal_runner.py", logn, reps, 16)
            o = run_runner(ofhe_py, "openfhe_runner.py", logn, reps, 16) if have_ofhe else {"unavailable": "not installed"}
            x = run_runner(main_py, "seal_hexl_runner.py", logn, reps, 16) if have_hexl else {"unavailable": "not built"}
            rounds.append((h, s_, o, x))
        h1, seal, ofhe, hexl = (merge_min([r[i] for r in rounds]) for i in range(4))
        peers = (("seal", seal), ("openfhe", ofhe), ("seal-hexl", hexl))
        h2 = {} if args.no_two_threads else run_runner(main_py, "heinfer_runner.py", logn, reps, 16, ("--threads", "2"))
        if "unavailable" in h1:
            raise SystemExit(f"heinfer runner failed: {h1['unavailable']}")
        for name, r in peers:
            if "unavailable" in r:
                notes.append(f"logN={logn} {name}: {r['unavailable']}")
        table = {}
        for op in OPS:
            h = h1.get("timings_us", {}).get(op)
            s = seal.get("timings_us", {}).get(op)
            o = ofhe.get("timings_us", {}).get(op)
            x = hexl.get("timings_us", {}).get(op)
            pip = [v for v in (s, o) if v is not None]
            others = pip + ([x] if x is not None else [])
            ratio = round(h / min(others), 3) if h is not None and others else None
            ratio_pip = round(h / min(pip), 3) if h is not None and pip else None
            table[op] = {"heinfer_us": h, "seal_us": s, "openfhe_us": o, "seal_hexl_us": x, "ratio": ratio,
                         "ratio_pip": ratio_pip, "heinfer_2t_us": h2.get("timings_us", {}).get(op)}
        result[f"logN={logn}"] = table
        every = (("heinfer", h1), *peers)
        result["precision_bits"][f"logN={logn}"] = {lib: r.get("precision_bits") for lib, r in every if "precision_bits" in r}
        result["sizes"][f"logN={logn}"] = {lib: r.get("sizes") for lib, r in every if "sizes" in r}
        result.setdefault("params", {})[f"logN={logn}"] = {lib: r.get("params") for lib, r in every if "params" in r}
        versions = {lib: r.get("version") for lib, r in every if "version" in r}
        print(f"\n## logN={logn}: {SETS[logn][0]} levels, log2(QP) <= {SETS[logn][1]}, scale 2^{SCALE_BITS}, "
              f"single thread (heinfer also 2 threads)")
        print(f"{'op':<15}{'heinfer':>10}{'SEAL':>10}{'OpenFHE':>10}{'SEAL+HEXL':>11}{'ratio':>8}{'ratio pip':>10}"
              f"{'heinfer 2t':>12}{'bits h/S/O/X':>25}")
        prec = result["precision_bits"][f"logN={logn}"]
        for op in OPS:
            row = table[op]
            pkey = {"encode": "encode_decode", "decode": "encode_decode",
                    "encrypt": "encrypt_decrypt", "decrypt": "encrypt_decrypt"}.get(op, op)
            bits = "/".join(
                "—" if (prec.get(lib) or {}).get(pkey) is None else f"{prec[lib][pkey]:.1f}"
                for lib in ("heinfer", "seal", "openfhe", "seal-hexl"))
            print(f"{op:<15}{fmt(row['heinfer_us'])}{fmt(row['seal_us'])}{fmt(row['openfhe_us'])}{fmt(row['seal_hexl_us'], 11)}"
                  f"{fmt(row['ratio'], 8, 2)}{fmt(row['ratio_pip'], 10, 2)}{fmt(row['heinfer_2t_us'], 12)}{bits:>25}")
        hoisting = {}
        for lib, r in (("heinfer", h1), ("openfhe", ofhe)):
            t = r.get("timings_us", {})
            if t.get("rotate_hoisted") and t.get("rotate_steps") and t.get("rotate"):
                hoisting[lib] = {"vs_same_steps": round(t["rotate_steps"] / t["rotate_hoisted"], 2),
                                 "vs_one_step": round(t["rotate"] / t["rotate_hoisted"], 2)}
        result.setdefault("hoisting", {})[f"logN={logn}"] = hoisting
        for lib, v in hoisting.items():
            print(f"hoisting, {lib}: {v['vs_same_steps']:.2f}x cheaper per rotation than plain rotations "
                  f"by the same 16 steps (rotate_steps), {v['vs_one_step']:.2f}x than one step repeated (rotate)")
        sz = result["sizes"][f"logN={logn}"]
        for lib in ("heinfer", "seal", "openfhe", "seal-hexl"):
            if lib in sz and sz[lib]:
                s = sz[lib]
                extra = ""
                if s.get("ciphertext_bytes_seed_compressed"):
                    extra = f" (seed-compressed ciphertext {s['ciphertext_bytes_seed_compressed']} B)"
                if s.get("ciphertext_bytes_compressed"):
                    extra = (f" (SEAL's default save(), zstd: ciphertext {s['ciphertext_bytes_compressed']} B, "
                             f"Galois key {s.get('galois_key_bytes_compressed')} B)")
                print(f"  {lib:<9} ciphertext {s.get('ciphertext_bytes')} B, one Galois key "
                      f"{s.get('galois_key_bytes')} B{extra}  ({versions.get(lib)})")
    audit = simd.audit()
    print(f"\nbuilds compared (objdump, static): {simd.summary(audit)}")
    generic = [name for lib, name in (("seal", "SEAL"), ("openfhe", "OpenFHE"))
               if isinstance(audit.get(lib), dict) and audit[lib].get("zmm") == 0]
    if generic and has_avx512():
        print(f"note: {' and '.join(generic)} as their PyPI wheels ship contain no AVX-512 instruction "
              "while heinfer's kernels use AVX-512: `ratio pip` compares the builds a pip user gets; "
              "`ratio` includes SEAL + HEXL, an AVX-512 build, where it was built")
    elif generic:
        print("note: this CPU has no AVX-512: heinfer runs its AVX2 + FMA kernels (the AVX-512 "
              "instructions counted above are in its module but do not run here), SEAL's wheel its "
              "AVX2 code at most, OpenFHE's wheel SSE")
    result["meta"] = {
        "cpu": cpu_model(),
        "simd": audit,
        "build": "release, lto=fat, codegen-units=1 (Cargo.toml [profile.release])",
        "threads": "1 for every library (heinfer_2t_us: heinfer with 2)",
        "python": platform.python_version(),
        "quick": bool(args.quick),
        "rounds": args.rounds or (2 if args.quick else 3),
        "notes": notes,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "others_load": others_load(),
    }
    for n in notes:
        print(f"note: {n}")
    print(f"# other work on this machine during the run: {result['meta']['others_load']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
