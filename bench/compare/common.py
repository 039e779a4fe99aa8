"""Shared helpers for the SEAL / OpenFHE comparison runners.

Stdlib + numpy only: imported by seal_runner.py (main venv, Python 3.11) and by
openfhe_runner.py (.venv-openfhe, Python 3.10) through a sys.path insertion of
this directory. Nothing here may import heinfer.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np

# Every op the runners time, in output order.
TIMED_OPS = (
    "encode", "encrypt", "decrypt", "decode", "add", "mul_plain", "mul_const",
    "mul_relin", "rescale", "rotate", "rotate_steps", "rotate_hoisted", "conjugate",
)
# `rotate` repeats one step (its key stays in the caches); `rotate_steps` is the per-rotation
# time of plain rotations by each of 1..hoist, every one with its own key as in the hoisted
# call: the like-for-like baseline of `rotate_hoisted`.
# Every op the runners measure precision for, in output order.
PRECISION_OPS = (
    "encode_decode", "encrypt_decrypt", "add", "mul_plain", "mul_const",
    "mul_relin", "rescale", "rotate", "rotate_hoisted", "conjugate",
)

SEED = 20240611          # fixed numpy seed: identical inputs in both runners
MUL_CONST = 0.7          # the real scalar used by mul_const
WARMUP = 2               # untimed calls before the timed repetitions


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--logn", type=int, required=True, help="log2 of ring degree N")
    p.add_argument("--levels", type=int, required=True,
                   help="number of rescalings possible (L; L+1 ciphertext primes)")
    p.add_argument("--scale-bits", type=int, required=True, help="log2 of the CKKS scale")
    p.add_argument("--max-logqp", type=int, required=True,
                   help="upper bound for log2(Q*P) incl. special primes")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per op (median)")
    p.add_argument("--hoist", type=int, default=16,
                   help="rotations 1..hoist for the hoisted-rotation measurement")
    a = p.parse_args(argv)
    if a.reps < 1 or a.hoist < 1 or a.levels < 1:
        p.error("--reps, --hoist and --levels must be >= 1")
    return a


def log(*msg):
    print(*msg, file=sys.stderr, flush=True)


def inputs(n_slots: int):
    """Two full-slot real vectors, uniform in [-1, 1], fixed seed."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(-1.0, 1.0, n_slots)
    y = rng.uniform(-1.0, 1.0, n_slots)
    return x, y


def median_us(fn, reps: int, warmup: int = WARMUP) -> float:
    """Median wall time of fn() in microseconds (perf_counter_ns around each call)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - t0)
    return round(statistics.median(samples) / 1000.0, 2)


def precision_bits(got, expected) -> float:
    """-log2(max_i |got_i - expected_i|) over all slots (real parts)."""
    got = np.real(np.asarray(got, dtype=np.complex128))[: len(expected)]
    err = float(np.max(np.abs(got - np.asarray(expected, dtype=np.float64))))
    if err == 0.0:
        return float("inf")
    return round(-math.log2(err), 2)


def log2_prod(values) -> float:
    return sum(math.log2(v) for v in values)


def emit(result: dict) -> None:
    """Print the single JSON line on stdout (inf precision -> null)."""
    def clean(v):
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: clean(w) for k, w in v.items()}
        return v
    sys.stdout.write(json.dumps(clean(result)) + "\n")
    sys.stdout.flush()


def skeleton(library: str, version: str) -> dict:
    return {
        "library": library,
        "version": version,
        "params": {},
        "timings_us": {op: None for op in TIMED_OPS},
        "precision_bits": {op: None for op in PRECISION_OPS},
        "sizes": {"ciphertext_bytes": None, "galois_key_bytes": None},
    }
