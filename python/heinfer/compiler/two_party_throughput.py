"""Compiling a graph for GAZELLE's two-party protocol in throughput mode (batch-axis shares).

Layer: ``heinfer.compiler`` (pure numpy). The front end and the fixed-point plan are latency
mode's (:func:`~heinfer.compiler.latency.two_party.fixed_point_front`); the layout is
nGraph-HE2's batch axis: element ``e`` of a layer's input is one BFV ciphertext whose ``N``
slots hold up to ``N`` items, so a linear layer is a matrix of integer scalars applied by
multiply-accumulates over whole ciphertexts (``heinfer_kernels::linear``, exact) — no rotation,
no Galois key. Each circuit step runs one circuit per item and activation.

**Noise.** A ciphertext times an integer ``w`` carries ``w·e − r·k`` where ``r = Q mod p`` and
``|k| ≤ |w|`` (the carry of ``w·m`` past ``p``; no ``N`` factor as for a plaintext polynomial).
An input ``Enc(z) + ρ`` has ``|e| ≤ e_in = 2^5 + p`` (the fresh error and the carry of the
addition), so an output of row ``W_j`` has ``|e| ≤ ‖W_j‖₁·(e_in + p) + p`` (the bias adds one
more carry), and the server floods that with 40 statistical bits, as latency mode does. This
bound is far below latency mode's (no ``N·p/2`` factor), so flooding fits with room.

**Squares** (GAZELLE's AHE square protocol on the batch axis): with shares ``a`` (client) and
``b`` (server, one per item: a slot vector), the client encrypts ``a²`` and ``a``; the server
forms ``Enc(z²) = Enc(a²) + b² + Enc(a)·2b`` per element — one plaintext-polynomial product,
whose error is ``N·(p/2)·2^5 + N·p²/2`` (the factor times the fresh error, and ``Q mod p``
times the product's carry) — and runs the layer on it. Latency mode folds ``2b`` into the
layer's diagonals instead, since there the layer is a polynomial product too; here the layer
is scalars, so one polynomial product in all, and the flooding still fits (the compiler
checks it).

Not supported yet (a clear error): everything latency mode's two-party compiler refuses.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.latency.compile import LatencyOptions
from heinfer.compiler.latency.two_party import (
    DEFAULT_BFV,
    FRESH_BITS,
    check_flood,
    fixed_point_front,
    flood_bits_for,
    max_flood_bits,
    two_party_program,
    two_party_steps,
)
from heinfer.errors import CompileError
from heinfer.program.two_party import TwoPartyProgram, TwoPartySegment
from heinfer.program.weights import LinearStep

__all__ = ["DEFAULT_BATCH", "batch_noise_bits", "compile_two_party_throughput", "exact_l1_limit", "input_noise"]

#: Items per query when the caller does not choose, at most: the per-query ciphertext work is
#: then shared by 256 items ...
DEFAULT_BATCH = 256
#: ... and fewer when one query's circuits would read more than 2^18 values (about 1.2 GB of
#: garbled circuits on each side at 4.5 KB per ReLU input): CryptoNets-ReLU keeps 256 items,
#: MiniONN's MNIST net 25 (10,340 circuit inputs per item).
DEFAULT_CIRCUIT_INPUTS = 1 << 18
#: Most circuit instances of one step (``heinfer.twoparty.MAX_INSTANCES``, fixed by the engine).
MAX_STEP_INSTANCES = 1 << 20


def input_noise(p: int, log_n: int, squared: bool) -> float:
    """A bound on the error of a batch-axis layer's input ciphertext: a fresh encryption plus the
    server's share (``2^5 + p``), or after a square ``Enc(a²) + b² + Enc(a)·2b`` (module
    documentation)."""
    e = 2.0**FRESH_BITS + p
    if not squared:
        return e
    n = 2.0**log_n
    return e + n * (p / 2) * 2.0**FRESH_BITS + n * p * p / 2 + p


def batch_noise_bits(l1: float, p: int, e_in: float | None = None) -> int:
    """``⌈log2⌉`` of the error bound of a batch-axis layer's output (module documentation) for
    the largest row 1-norm ``l1`` of its integer weights and inputs whose error is below
    ``e_in`` (default: a fresh input plus the server's share), plus one bit."""
    e_in = 2.0**FRESH_BITS + p if e_in is None else e_in
    return math.ceil(math.log2(max(1.0, l1) * (e_in + p) + p)) + 1


def exact_l1_limit(log_q: list[int]) -> float:
    """The largest row 1-norm the exact f64 kernel takes with two digits per residue: every
    partial sum below ``2^53`` for digits of at most ``2^⌈b/2⌉`` (``b`` bits of the widest prime),
    as ``heinfer_kernels::linear::LinearLayer::digit_bound`` with margin."""
    return 2.0 ** (53 - math.ceil(max(log_q) / 2) - 1)


def _centered(w: sp.csr_matrix, p: int) -> sp.csr_matrix:
    """Integer weights reduced mod ``p`` into ``(−p/2, p/2]`` (the same layer mod ``p``, never
    larger)."""
    w = sp.csr_matrix(w, dtype=np.int64, copy=True)
    half = (p - 1) // 2
    w.data = (w.data + half) % p - half
    w.eliminate_zeros()
    return w


def compile_two_party_throughput(
    graph,
    calibration: np.ndarray | None = None,
    input_bound: float | None = None,
    options: LatencyOptions = LatencyOptions(),
    bfv: dict | None = None,
    batch: int | None = None,
) -> TwoPartyProgram:
    """Compiles ``graph`` for the two-party protocol with ``batch`` items per query at most
    (default :data:`DEFAULT_BATCH`, fewer when a query's circuits would read more than
    :data:`DEFAULT_CIRCUIT_INPUTS` values; at most ``N`` and at most what one step's circuit
    count allows). Raises :class:`NotSupportedYetError` for the shapes latency mode's two-party
    compiler refuses, :class:`CompileError` when a layer's weights do not fit the exact kernel,
    :class:`~heinfer.errors.FloodBudgetError` when its flooding does not fit the ciphertext
    modulus."""
    bfv = dict(bfv or DEFAULT_BFV)
    p, log_n = int(bfv["plain_modulus"]), int(bfv["log_n"])
    input_bound, pre, seg_ops, post, plan = fixed_point_front(graph, calibration, input_bound, options.headroom, p)
    l1_cap = exact_l1_limit(bfv["log_q"])
    segments, layers, plans, floods = [], [], {}, {}
    for k, (ops, fl) in enumerate(zip(seg_ops, plan.layers)):
        lin = ops[0]
        w = _centered(fl.weights, p)
        l1 = float(abs(w).sum(axis=1).max()) if w.nnz else 0.0
        if l1 >= l1_cap:
            raise CompileError(
                f"two-party protocol: layer {lin.name!r}: a row of its integer weights sums to {l1:.3g} in "
                f"absolute value, beyond the exact batch-axis kernel's {l1_cap:.3g} at {max(bfv['log_q'])}-bit primes"
            )
        squared = k > 0 and [f.kind for f in plan.layers[k - 1].step] == ["square"]
        b = floods[lin.name] = flood_bits_for(batch_noise_bits(l1, p, input_noise(p, log_n, squared)), log_n)
        bias = (np.asarray(fl.bias, dtype=np.int64) % p).astype(np.float64)
        layers.append(LinearStep(lin.name, sp.csr_matrix(w, dtype=np.float64), bias, 1.0, 2))
        plans[str(k)] = {"flood_bits": b, "in_frac": fl.in_frac, "weight_frac": fl.weight_frac, "l1": l1}
        segments.append(TwoPartySegment.batch_axis(w.shape[1], w.shape[0], b))
    check_flood(floods, max_flood_bits(bfv))
    steps = two_party_steps(plan, segments)
    most = max((st.instances for st in steps), default=1)
    inputs = sum(st.instances * st.window for st in steps)
    default = min(DEFAULT_BATCH, max(1, DEFAULT_CIRCUIT_INPUTS // max(1, inputs)))
    cap = min(1 << log_n, MAX_STEP_INSTANCES // most, default if batch is None else int(batch))
    if batch is not None and (int(batch) < 1 or cap < int(batch)):
        raise CompileError(
            f"two-party protocol: {batch} items per query; this network takes 1 to {min(1 << log_n, MAX_STEP_INSTANCES // most)} "
            f"({1 << log_n} slots, {most} circuits per item in its largest step)"
        )
    return two_party_program(
        graph, bfv, plan, float(input_bound) * options.headroom, segments, post, layers, plans, [], mode="throughput", batch_capacity=cap,
        pre=pre,
    )
