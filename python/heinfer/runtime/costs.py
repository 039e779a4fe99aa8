"""Micro-benchmarks of the primitives the latency cost model prices, cached per machine.

Layer: ``heinfer.runtime``. :func:`measure_costs` times every kind of
:data:`heinfer.compiler.latency.cost.KINDS` at every level of a parameter set (median of a
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
from heinfer.compiler.latency.cost import KINDS, CostTable

__all__ = ["measure_costs", "cpu_model"]

_VERSION = 3


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
            if isinstance(hit, dict) and all(isinstance(hit.get(k), list) and len(hit[k]) == len(params["log_q"]) for k in KINDS):
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
    enc, ev, dec = _native.Encoder(p), _native.Evaluator(p), _native.Decryptor(p, kg.secret_key())
    steps = list(range(1, DISTINCT + 1))
    gk = kg.galois_keys(steps, False)
    rlk = kg.relin_key()
    rng = np.random.default_rng()
    xs = [rng.uniform(-1, 1, p.slots) for _ in range(DISTINCT)]
    scale = float(2 ** params["log_scale"])
    table: CostTable = {k: [] for k in KINDS}
    table["source"] = f"measured on {cpu_model()}, {_native.get_num_threads()} threads"
    n = DISTINCT
    for lvl in range(p.max_level + 1):
        cts = [kg.encrypt_symmetric(enc.encode_real(x, scale, lvl, False)) for x in xs]
        ct = cts[0]
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
            "rescale": _median(lambda: ev.rescale(cts[next(k) % n]), reps) if lvl > 0 else 0.0,
            "encrypt": _median(lambda: kg.encrypt_symmetric(enc.encode_real(xs[next(k) % n], scale, lvl, False)), reps),
            "decrypt": _median(lambda: enc.decode(dec.decrypt(cts[next(k) % n])), reps),
        }
        for kind in KINDS:
            table[kind].append(row[kind])
    return table
