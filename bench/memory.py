"""What bounds set-up and the sums of plaintext products: first writes to fresh memory, how
much one pass over a transform's shared ciphertexts saves, and the rate at which latency
mode's sums stream their plaintexts.

    .venv/bin/python bench/memory.py [--gb 2] [--terms 29] [--groups 500]

* **first touch**: a child process writes ``--gb`` GB of fresh memory (numpy) twice and
  exits; a second child does the same right after. On a virtual machine whose host reclaims
  memory the guest has not used lately, the first child's first write is slow and the second
  child's is not (it gets the pages the first one freed); the second writes in each child are
  the rate of memory already mapped. The timer covers one ``ndarray`` fill.
* **grouped sums**: a transform's inner sums as the executor makes them — 256 groups of 18
  distinct plaintexts, each group over its own 18 of 36 shared ciphertexts (4 inputs × 9
  baby steps, as in ResNet-20's 16-channel layers) at logN 13, level 1 — one ``dot_plain``
  per group against ``dot_plain_groups`` (32 groups per call, one pass over the shared
  ciphertexts), interleaved, 1 and 2 engine threads, median of 5 rounds.
* **plaintext streaming**: ``dot_plain`` (``Σ_t ct_t · pt_t``, the inner sum of a transform)
  over ``--groups`` groups of ``--terms`` distinct plaintexts at logN 13, level 1 (ResNet-20's
  ring and level), at 1 and 2 engine threads; the timer covers the ``dot_plain`` calls, and
  GB/s counts the plaintext bytes they read.

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_TOUCH = """
import sys, time, numpy as np
n = int(float(sys.argv[1]) * 1e9 / 8)
t = time.perf_counter(); a = np.ones(n); t1 = time.perf_counter(); a[:] = 2.0; t2 = time.perf_counter()
print(t1 - t, t2 - t1)
"""


def first_touch(gb: float) -> list[dict]:
    """Two child processes in a row, each writing ``gb`` GB twice."""
    out = []
    for _ in range(2):
        first, second = map(float, subprocess.check_output([sys.executable, "-c", _TOUCH, str(gb)], text=True).split())
        out.append({"first_write_s": round(first, 3), "first_gb_s": round(gb / first, 2), "second_write_s": round(second, 3), "second_gb_s": round(gb / second, 2)})
    return out


def plaintext_streaming(terms: int, groups: int) -> dict:
    """GB/s of plaintexts read by ``dot_plain`` at 1 and 2 threads."""
    import heinfer
    from heinfer import _native as nat

    p = nat.Params(13, [48, 40], [48], 40, None, 128)
    kg, enc, ev = nat.KeyGenerator(p), nat.Encoder(p), nat.Evaluator(p)
    rng = np.random.default_rng(1)
    cts = [kg.encrypt_symmetric(enc.encode_real(rng.uniform(-1, 1, p.slots), 2.0**40, 1, False)) for _ in range(terms)]
    pts = enc.encode_real_many(rng.uniform(-1, 1, (terms * groups, p.slots)), 2.0**40, 1, False)
    pt_bytes = terms * groups * 2 * p.n * 8
    out = {}
    for threads in (1, 2, 1, 2):
        heinfer.set_num_threads(threads)
        t = time.perf_counter()
        for g in range(groups):
            ev.dot_plain(cts, pts[g * terms:(g + 1) * terms])
        rate = pt_bytes / (time.perf_counter() - t) / 1e9
        out[str(threads)] = max(out.get(str(threads), 0.0), round(rate, 2))  # best of two
    return {"terms": terms, "groups": groups, "plaintext_gb": round(pt_bytes / 1e9, 2), "gb_per_s": out}


def grouped_sums(terms: int, groups: int) -> dict:
    """Seconds of one ``dot_plain`` per group against ``dot_plain_groups`` (32 per call)."""
    import statistics

    import heinfer
    from heinfer import _native as nat

    p = nat.Params(13, [48, 40], [48], 40, None, 128)
    kg, enc, ev = nat.KeyGenerator(p), nat.Encoder(p), nat.Evaluator(p)
    rng = np.random.default_rng(2)
    xs = [kg.encrypt_symmetric(enc.encode_real(rng.uniform(-1, 1, p.slots), 2.0**40, 1, False)) for _ in range(36)]
    idx = [sorted(rng.choice(36, terms, replace=False).tolist()) for _ in range(groups)]
    pts = [enc.encode_real_many(rng.uniform(-1, 1, (terms, p.slots)), 2.0**40, 1, False) for _ in range(groups)]

    def per_group() -> None:
        for g in range(groups):
            ev.dot_plain([xs[i] for i in idx[g]], pts[g])

    def grouped() -> None:
        for s in range(0, groups, 32):
            ev.dot_plain_groups(xs, idx[s : s + 32], pts[s : s + 32])

    times: dict = {}
    for _ in range(5):
        for threads in (1, 2):
            heinfer.set_num_threads(threads)
            for name, run in (("per_group", per_group), ("grouped", grouped)):
                t = time.perf_counter()
                run()
                times.setdefault(f"{name}_{threads}t", []).append(time.perf_counter() - t)
    out = {k: round(statistics.median(v), 4) for k, v in times.items()}
    for t in (1, 2):
        out[f"gain_{t}t"] = round(out[f"per_group_{t}t"] / out[f"grouped_{t}t"], 2)
    return {"terms": terms, "groups": groups, **out}


def main() -> None:
    from machine import build_profile, cpu_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--terms", type=int, default=29)
    ap.add_argument("--groups", type=int, default=500)
    args = ap.parse_args()
    print(f"# heinfer memory — CPU: {cpu_model()}, build: {build_profile()}")
    touch = first_touch(args.gb)
    for i, r in enumerate(touch):
        print(f"process {i + 1}: first write {r['first_write_s']} s ({r['first_gb_s']} GB/s), second {r['second_write_s']} s ({r['second_gb_s']} GB/s)")
    grouped = grouped_sums(18, 256)
    print(f"grouped sums, 256 groups of 18 terms over 36 ciphertexts: one dot_plain per group {grouped['per_group_1t']} s / "
          f"{grouped['per_group_2t']} s, dot_plain_groups {grouped['grouped_1t']} s / {grouped['grouped_2t']} s (1 / 2 threads): "
          f"x{grouped['gain_1t']} / x{grouped['gain_2t']}")
    stream = plaintext_streaming(args.terms, args.groups)
    print(f"dot_plain, {args.terms} terms x {args.groups} groups ({stream['plaintext_gb']} GB of plaintexts): "
          + ", ".join(f"{k} thread(s) {v} GB/s" for k, v in stream["gb_per_s"].items()))
    print(json.dumps({"cpu": cpu_model(), "first_touch": touch, "grouped_sums": grouped, "dot_plain": stream}))


if __name__ == "__main__":
    main()
