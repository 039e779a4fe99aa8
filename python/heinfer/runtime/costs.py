"""Micro-benchmarks of the primitives the latency cost model prices, cached per machine.

Layer: ``heinfer.runtime``. :func:`measure_costs` times every kind of
:data:`heinfer.compiler.cost.KINDS` at every level of a parameter set (median of a
few runs, with throwaway keys), and caches the table in a JSON file keyed by CPU model,
parameters and thread count (``$HEINFER_CACHE_DIR`` or ``~/.cache/heinfer``): the first
compile on a machine pays about a second per level, later ones nothing
(packing-configurations §IV-C: costs measured on the target, not assumed).
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

from heinfer import _native
from heinfer.compiler.cost import BATCH_KINDS, KINDS, CostTable, analytic_costs

__all__ = ["measure_costs", "cpu_model"]

_VERSION = 6


def cpu_model() -> str:
    """The CPU model name (``/proc/cpuinfo``), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cache_path() -> str:
    root = os.environ.get("HEINFER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "heinfer")
    return os.path.join(root, "latency-costs.json")


def _median(f, reps: int) -> float:
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def measure_costs(params: dict, reps: int = 5, use_cache: bool = True) -> CostTable:
    """The cost table of ``params`` (a program's parameter dict) on this machine."""
    key = json.dumps([_VERSION, cpu_model(), _native.get_num_threads(), params], sort_keys=True)
    path = _cache_path()
    cache: dict = {}
    if use_cache:
        try:
            with open(path) as f:
                cache = json.load(f)
            hit = cache.get(key)
            if isinstance(hit, dict) and all(isinstance(hit.get(k), list) and len(hit[k]) == len(params["log_q"]) for k in KINDS + BATCH_KINDS):
                return hit
        except (OSError, ValueError):
            cache = {}
    table = _measure(params, reps)
    if use_cache:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            cache[key] = table
            tmp = path + f".{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(cache, f)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home only costs a re-measurement
    return table


#: Distinct operands and keys per measurement: kernels stream different plaintexts,
#: ciphertexts and rotation keys, so timing one cached operand under-prices them by ~30%.
DISTINCT = 16


def _measure(params: dict, reps: int) -> CostTable:
    p = _native.Params(int(params["log_n"]), list(params["log_q"]), list(params["log_p"]), int(params["log_scale"]), None, int(params["security"]))
    kg = _native.KeyGenerator(p)
    if params["log_p"]:
        table = _measure_slots(p, kg, params, reps)
    else:  # no key switching: no rotation to price; the slot kinds keep their analytic values
        table = analytic_costs(int(params["log_n"]), len(params["log_q"]), 0)
    table.update(_measure_batch(p, kg, params, reps))
    table["source"] = f"measured on {cpu_model()}, {_native.get_num_threads()} threads"
    return table


def _measure_batch(p: _native.Params, kg: _native.KeyGenerator, params: dict, reps: int) -> dict:
    """The batch-axis kinds: the GEMM on a dense 64×64 layer (per weight), element-wise ops
    and coefficient-packed encryption/decryption on 16 ciphertexts (per ciphertext)."""
    dec = _native.Decryptor(p, kg.secret_key())
    rng = np.random.default_rng()
    rlk = kg.relin_key() if params["log_p"] else None
    scale = float(2 ** params["log_scale"])
    m, n = 64, 16
    w = rng.integers(-8, 9, (m, m)).astype(np.float64)
    # exact products need ‖W‖₁ (≤ 2^9 here) times a digit below 2^53: two digits for large primes
    digits = 1 if max(params["log_q"]) + 9 < 53 else 2
    layer = _native.LinearLayer(m, m, [(np.arange(m, dtype=np.uint32), np.arange(m, dtype=np.uint32), w)], 1.0, digits)
    out: dict = {k: [] for k in BATCH_KINDS}
    for lvl in range(p.max_level + 1):
        vals = rng.uniform(-1, 1, (m, 64))
        big = _native.encrypt_batch_coefficients(kg, vals, scale, lvl)
        small = big.take(list(range(n)))
        copy = _median(lambda: small.take(list(range(n))), reps)

        def timed(op) -> float:
            def run() -> None:
                op(small.take(list(range(n))))

            return max(_median(run, reps) - copy, 0.0) / n

        def squared_relin(b) -> None:
            _native.batch_square(b)
            _native.batch_relinearize(b, rlk)

        sq = timed(_native.batch_square)
        out["gemm_mac"].append(_median(lambda: layer.apply(big, None, "coeff", False), reps) / (m * m * digits))
        out["batch_square"].append(sq)
        out["batch_relin"].append(max(timed(squared_relin) - sq, 0.0) if rlk is not None else float("inf"))
        if lvl > 0:  # operands at a scale above the prime the rescale drops (see _measure_slots)
            r_small = _native.encrypt_batch_coefficients(kg, vals[:n], float(p.q[lvl]) * 2.0**20, lvl)
            r_copy = _median(lambda: r_small.take(list(range(n))), reps)
            r = _median(lambda: _native.batch_rescale(r_small.take(list(range(n))), 1), reps)
            out["batch_rescale"].append(max(r - r_copy, 0.0) / n)
        else:
            out["batch_rescale"].append(0.0)
        out["batch_encrypt"].append(_median(lambda: _native.encrypt_batch_coefficients(kg, vals[:n], scale, lvl), reps) / n)
        out["batch_decrypt"].append(_median(lambda: _native.decrypt_batch_coefficients(dec, small), reps) / n)
    return out


def _measure_slots(p: _native.Params, kg: _native.KeyGenerator, params: dict, reps: int) -> CostTable:
    """The slot-layout kinds (:data:`KINDS`), per level."""
    enc, ev, dec = _native.Encoder(p), _native.Evaluator(p), _native.Decryptor(p, kg.secret_key())
    steps = list(range(1, DISTINCT + 1))
    gk = kg.galois_keys(steps, False)
    rlk = kg.relin_key()
    rng = np.random.default_rng()
    xs = [rng.uniform(-1, 1, p.slots) for _ in range(DISTINCT)]
    scale = float(2 ** params["log_scale"])
    table: CostTable = {k: [] for k in KINDS}
    n = DISTINCT
    for lvl in range(p.max_level + 1):
        cts = [kg.encrypt_symmetric(enc.encode_real(x, scale, lvl, False)) for x in xs]
        ct = cts[0]
        # a rescale divides by q[lvl]: its operands need a scale above that prime (the program's
        # scale may be below it, e.g. a throughput plan whose weights carry the rest)
        r_scale = float(p.q[lvl]) * 2.0**20
        r_cts = [kg.encrypt_symmetric(enc.encode_real(x, r_scale, lvl, False)) for x in xs] if lvl > 0 else []
        pts = [enc.encode_real(x, float(p.q[lvl]), lvl, False) for x in xs]
        ptes = [enc.encode_real(x, float(p.q[lvl]), lvl, True) for x in xs]
        exts = ev.rotate_hoisted_extended(ct, steps, gk)
        # per-term and per-call parts of the dot products, from n terms against one
        d1 = _median(lambda: ev.dot_plain_extended(exts[:1], ptes[:1]), reps)
        dn = _median(lambda: ev.dot_plain_extended(exts, ptes), reps)
        p1 = _median(lambda: ev.dot_plain(cts[:1], pts[:1]), reps)
        pn = _median(lambda: ev.dot_plain(cts, pts), reps)
        t1 = _median(lambda: ev.rotate_hoisted_extended(ct, steps[:1], gk), reps)
        tn = _median(lambda: ev.rotate_hoisted_extended(ct, steps, gk), reps)
        t01 = _median(lambda: ev.rotate_hoisted_extended(ct, [0, 1], gk), reps)
        ext = max((tn - t1) / (n - 1), 0.0)
        term_e, term_p = max((dn - d1) / (n - 1), 0.0), max((pn - p1) / (n - 1), 0.0)
        k = iter(range(1 << 30))
        row = {
            "rotate_ext": ext,
            "decompose": max(t1 - ext, 0.0),
            "times_p": max(t01 - t1, 0.0),
            "mul_plain_ext": term_e,
            "mod_down": max(d1 - term_e, 0.0),
            "mul_plain": term_p,
            "dot": max(p1 - term_p, 0.0),
            "rotate": _median(lambda: ev.rotate(cts[next(k) % n], steps[next(k) % n], gk), reps),
            "add": _median(lambda: ev.add(cts[next(k) % n], cts[next(k) % n]), reps),
            "square_relin": _median(lambda: ev.relinearize(ev.square(cts[next(k) % n]), rlk), reps),
            "rescale": _median(lambda: ev.rescale(r_cts[next(k) % n]), reps) if lvl > 0 else 0.0,
            "encrypt": _median(lambda: kg.encrypt_symmetric(enc.encode_real(xs[next(k) % n], scale, lvl, False)), reps),
            "decrypt": _median(lambda: enc.decode(dec.decrypt(cts[next(k) % n])), reps),
            **_measure_messages(p, kg, ev, cts, xs, scale, lvl, reps),
        }
        for kind in KINDS:
            table[kind].append(row[kind])
    return table


def _measure_messages(p, kg, ev, cts, xs, scale: float, lvl: int, reps: int) -> dict:
    """``ct_in`` and ``ct_out`` at one level, per ciphertext: a batch as the client sends it
    (seed-compressed, :func:`heinfer.protocol.layouts.encrypt_rows`) parsed and validated as
    the server does, and a batch of evaluation results (both halves on the wire) serialized."""
    rows = np.ascontiguousarray(np.stack(xs).astype(np.complex128))
    sent = _native.encrypt_batch(kg, rows, scale, lvl).to_bytes()
    n = len(xs)
    results = _native.CiphertextBatch.from_list([ev.add(c, c) for c in cts])
    return {
        "ct_in": _median(lambda: _native.CiphertextBatch.from_bytes(p, sent, 2 * len(sent), n), reps) / n,
        "ct_out": _median(results.to_bytes, reps) / n,
    }
