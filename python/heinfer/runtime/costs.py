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

_VERSION = 2


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


def _measure(params: dict, reps: int) -> CostTable:
    p = _native.Params(int(params["log_n"]), list(params["log_q"]), list(params["log_p"]), int(params["log_scale"]), None, int(params["security"]))
    kg = _native.KeyGenerator(p)
    enc, ev, dec = _native.Encoder(p), _native.Evaluator(p), _native.Decryptor(p, kg.secret_key())
    gk = kg.galois_keys([1, 2, 3, 4], False)
    rlk = kg.relin_key()
    rng = np.random.default_rng()
    x = rng.uniform(-1, 1, p.slots)
    scale = float(2 ** params["log_scale"])
    table: CostTable = {k: [] for k in KINDS}
    table["source"] = f"measured on {cpu_model()}, {_native.get_num_threads()} threads"
    for lvl in range(p.max_level + 1):
        ct = kg.encrypt_symmetric(enc.encode_real(x, scale, lvl, False))
        ct = ev.drop_to_level(ct, lvl) if ct.level != lvl else ct
        pt = enc.encode_real(x, float(p.q[lvl]), lvl, False)
        pte = enc.encode_real(x, float(p.q[lvl]), lvl, True)
        e = ev.rotate_hoisted_extended(ct, [1], gk)[0]
        d1 = _median(lambda: ev.dot_plain_extended([e], [pte]), reps)
        d9 = _median(lambda: ev.dot_plain_extended([e] * 9, [pte] * 9), reps)
        p1 = _median(lambda: ev.dot_plain([ct], [pt]), reps)
        p9 = _median(lambda: ev.dot_plain([ct] * 9, [pt] * 9), reps)
        t1 = _median(lambda: ev.rotate_hoisted_extended(ct, [1], gk), reps)
        t4 = _median(lambda: ev.rotate_hoisted_extended(ct, [1, 2, 3, 4], gk), reps)
        t01 = _median(lambda: ev.rotate_hoisted_extended(ct, [0, 1], gk), reps)
        ext = max((t4 - t1) / 3, 0.0)
        row = {
            "rotate_ext": ext,
            "decompose": max(t1 - ext, 0.0),
            "times_p": max(t01 - t1, 0.0),
            "mul_plain_ext": max((d9 - d1) / 8, 0.0),
            "mod_down": max(d1 - (d9 - d1) / 8, 0.0),
            "mul_plain": max((p9 - p1) / 8, 0.0),
            "dot": max(p1 - (p9 - p1) / 8, 0.0),
            "rotate": _median(lambda: ev.rotate(ct, 1, gk), reps),
            "add": _median(lambda: ev.add(ct, ct), reps),
            "square_relin": _median(lambda: ev.relinearize(ev.square(ct), rlk), reps),
            "rescale": _median(lambda: ev.rescale(ct), reps) if lvl > 0 else 0.0,
            "encrypt": _median(lambda: kg.encrypt_symmetric(enc.encode_real(x, scale, lvl, False)), reps),
            "decrypt": _median(lambda: enc.decode(dec.decrypt(ct)), reps),
        }
        for k in KINDS:
            table[k].append(row[k])
    return table
