"""The latency cost model: primitive costs per level, and the predicted time of a plan.

Layer: ``heinfer.compiler`` (pure Python). A :data:`CostTable` maps a primitive kind to its
time in seconds at every level ``ℓ`` (index ``ℓ``; ``ℓ + 1`` limbs of ``Q`` plus the special
primes). :func:`heinfer.runtime.costs.measure_costs` micro-benchmarks the table on the machine
at hand for the chosen parameters and caches it (packing-configurations §IV-C);
:func:`analytic_costs` is a machine-independent stand-in counted in NTTs, used when no
measurement is available (tests, cross-compilation).
"""

from __future__ import annotations

import math

from heinfer.program.transform import OP_KINDS, Transform

__all__ = ["CostTable", "KINDS", "analytic_costs", "price", "transform_cost", "square_cost", "key_bytes"]

CostTable = dict
#: Every primitive a plan is costed in.
KINDS = (
    "decompose", "rotate_ext", "times_p", "mul_plain_ext", "mod_down", "mul_plain", "dot",
    "rotate", "add", "square_relin", "rescale", "encrypt", "decrypt",
)


def analytic_costs(log_n: int, levels: int, special: int) -> CostTable:
    """Costs counted in number-theoretic transforms of ``N`` points (≈ 5 ns·N·log N each on
    one AVX-512 core), for ``levels`` levels and ``special`` special primes."""
    n = 1 << log_n
    ntt = 5e-9 * n * log_n
    k = special
    table: CostTable = {kind: [] for kind in KINDS}
    for lvl in range(levels):
        L = lvl + 1
        dec = (L + L * (L + k - 1)) * ntt
        ext = 0.15 * L * (L + k) * ntt
        md = 2 * (k + L) * ntt
        row = {
            "decompose": dec, "rotate_ext": ext, "times_p": 0.1 * L * ntt,
            "mul_plain_ext": 0.12 * (L + k) * ntt, "mod_down": md, "mul_plain": 0.12 * L * ntt, "dot": 0.1 * L * ntt,
            "rotate": dec + ext + md, "add": 0.05 * L * ntt,
            "square_relin": 0.3 * L * ntt + dec + ext + md, "rescale": 2 * (L + 1) * ntt,
            "encrypt": (3 * L + 2) * ntt, "decrypt": (L + 2) * ntt,
        }
        for kind in KINDS:
            table[kind].append(row[kind])
    return table


def price(counts: dict, level: int, costs: CostTable, n_out: int, bias: bool) -> float:
    """Predicted seconds of a transform with operation ``counts`` at ``level``: its
    operations, one rescale per output ciphertext, then (one level down) its fold and bias."""
    s = sum(counts[k] * costs[k][level] for k in OP_KINDS)
    s += counts.get("replicate", 0) * (costs["rotate"][level] + costs["add"][level])
    s += n_out * costs["rescale"][level]
    if level > 0:
        s += counts["fold"] * (costs["rotate"][level - 1] + costs["add"][level - 1])
        s += n_out * costs["add"][level - 1] if bias else 0.0
    return s


def transform_cost(t: Transform, level: int, costs: CostTable) -> float:
    """Predicted seconds of a transform at ``level`` (see :func:`price`)."""
    return price(t.counts(), level, costs, t.n_out, t.bias is not None)


def square_cost(n_cts: int, level: int, costs: CostTable) -> float:
    """Predicted seconds of squaring, relinearizing and rescaling ``n_cts`` ciphertexts."""
    return n_cts * (costs["square_relin"][level] + costs["rescale"][level])


def key_bytes(log_n: int, log_q: list[int], log_p: list[int]) -> tuple[int, int]:
    """``(wire, memory)`` bytes of one key-switching key (rotation or relinearization) at
    the top level: ``β = ⌈L/α⌉`` digits (``α`` = number of special primes), each two
    polynomials over all ``L + k`` limbs. On the wire the uniform half is a seed and every
    residue takes its prime's bit width; in memory both halves take 8 bytes a residue."""
    n = 1 << log_n
    beta = math.ceil(len(log_q) / max(len(log_p), 1))
    wire = beta * n * sum(log_q + log_p) // 8
    memory = beta * 2 * n * (len(log_q) + len(log_p)) * 8
    return wire, memory
