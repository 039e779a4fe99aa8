"""Predicted time of a two-party program: ``mode="auto"`` with ``protocol="two-party"``.

Layer: ``heinfer.compiler`` (pure Python). Both modes of GAZELLE's protocol run the same
garbled circuits per item (one instance per activation or pooling window of each item, the same
oblivious transfers): what differs is the ciphertext work. Latency mode encrypts, transforms
and returns a few ciphertexts per item; throughput mode encrypts one ciphertext per input
element and returns one per output element for a whole query of up to ``batch_capacity`` items,
and runs each layer as multiply-accumulates of integer weights over whole ciphertexts. So the
choice between them is made on that part, priced per query: the protocol's own steps per
ciphertext (:data:`TWO_PARTY_KINDS`: the client's encryptions and decryptions, the server's
parsing of the client's ciphertexts and the re-randomization of each result), the linear
layers from the engine's cost table for the ring and primes of the BFV parameters (BFV and
CKKS share the RNS arithmetic, transforms, key switching and the batch-axis kernel), and every
ciphertext on the wire at the link's ``bandwidth`` (the client's seed-compressed, the server's
results switched down to one prime and rounded). The circuits and the session's set-up
(latency mode's rotation keys, base OTs) are not priced.
"""

from __future__ import annotations

import math

from heinfer.compiler.cost import CostTable, analytic_costs, transform_cost

__all__ = ["NTT_SECONDS_8192", "TWO_PARTY_KINDS", "analytic_two_party_costs", "ciphertext_bytes", "cost_params",
           "ntt_seconds", "predict_two_party_seconds", "query_ciphertexts", "result_bytes"]

#: Seconds per ciphertext of the protocol's own steps (one number each, not per level): the
#: client encoding, encrypting (secret key, seed-compressed) and serializing an input; the
#: server parsing it and adding its share; the server adding a result's masks,
#: re-randomizing and flooding it, switching it down and serializing it rounded; the client
#: parsing and decrypting a result. Measured by
#: :func:`heinfer.runtime.two_party_costs.measure_two_party_costs`.
TWO_PARTY_KINDS = ("tp_client_input", "tp_server_input", "tp_server_result", "tp_client_result")

#: Seconds of one number-theoretic transform at ``N = 2^13`` on one core, as the engine runs
#: it (measured: 15–20 µs with tfhe-ntt's IFMA path on an AMD EPYC, 25–35 µs with the FMA
#: transform on an Intel Xeon); other ring degrees scale by ``N·log N``.
NTT_SECONDS_8192 = 25e-6


def ntt_seconds(log_n: int) -> float:
    """:data:`NTT_SECONDS_8192` scaled to a ring of degree ``2^log_n``."""
    return NTT_SECONDS_8192 * (1 << log_n) * log_n / (8192 * 13)


def analytic_two_party_costs(bfv: dict) -> CostTable:
    """The analytic cost table of :func:`cost_params` in real seconds (transforms at
    :func:`ntt_seconds`): what the layout search prices with, and the stand-in for a measured
    table; :data:`TWO_PARTY_KINDS` priced as the nearest CKKS kinds (an encryption, a parse
    and an addition; an encryption and a serialization; a decryption at one prime)."""
    costs = analytic_costs(int(bfv["log_n"]), len(bfv["log_q"]), len(bfv["log_p"]), ntt_seconds(int(bfv["log_n"])))
    return {**costs, **_protocol_kinds(costs)}


def _protocol_kinds(costs: CostTable) -> dict:
    """:data:`TWO_PARTY_KINDS` from a table's CKKS kinds (see :func:`analytic_two_party_costs`)."""
    top = len(costs["encrypt"]) - 1
    return {
        "tp_client_input": costs["encrypt"][top],
        "tp_server_input": costs["ct_in"][top] + costs["add"][top],
        "tp_server_result": costs["encrypt"][top] + costs["ct_out"][0],
        "tp_client_result": costs["decrypt"][0],
    }


def cost_params(bfv: dict, log_scale: int = 40) -> dict:
    """The parameter dict whose cost table prices a BFV program: the same ring degree, prime
    sizes and security (``log_scale`` only sets the measurements' encoding scale)."""
    return {
        "log_n": int(bfv["log_n"]),
        "log_q": [int(b) for b in bfv["log_q"]],
        "log_p": [int(b) for b in bfv["log_p"]],
        "log_scale": min(int(log_scale), min(int(b) for b in bfv["log_q"]) - 2),
        "security": int(bfv.get("security", 128)),
    }


def ciphertext_bytes(bfv: dict) -> float:
    """Bytes of one BFV ciphertext on the wire: two polynomials, every residue at its prime's
    width (the client's fresh ones travel seed-compressed, at half of it)."""
    return 2 * (1 << int(bfv["log_n"])) * sum(bfv["log_q"]) / 8


def result_bytes(bfv: dict) -> float:
    """Bytes of one result on the wire: switched down to the first prime after flooding and
    rounded (``heinfer_bfv::rounding``: ``c_0`` without ``j_0 ≈ log2 Δ_0 − 4`` low bits,
    ``c_1`` without ``j_0 − log2 N``, at the largest flooding that first prime holds)."""
    q0, log_n = int(bfv["log_q"][0]), int(bfv["log_n"])
    j0 = max(0, math.floor(q0 - 1 - math.log2(bfv["plain_modulus"]) - 3))
    j1 = max(0, j0 - log_n)
    return (1 << log_n) * (2 * q0 - j0 - j1) / 8


def predict_two_party_seconds(program, costs: CostTable, items: int = 1, bandwidth: float = 125e6) -> float:
    """Predicted seconds of the ciphertext work and ciphertext traffic (module documentation)
    to answer ``items`` items with a :class:`~heinfer.program.two_party.TwoPartyProgram` that
    holds its layers (the server's program), ``costs`` a table for :func:`cost_params` of its
    parameters with :data:`TWO_PARTY_KINDS` (:func:`analytic_two_party_costs`, or a measured
    table and the measured kinds) and ``bandwidth`` the link in bytes/s."""
    if program.layers is None:
        raise ValueError("pricing a two-party program needs its layers (the server's program)")
    if not bandwidth > 0:
        raise ValueError(f"bandwidth must be positive bytes per second, got {bandwidth!r}")
    top = len(program.bfv["log_q"]) - 1
    fresh, result = ciphertext_bytes(program.bfv) / 2, result_bytes(program.bfv)
    per_in = costs["tp_client_input"] + costs["tp_server_input"] + fresh / bandwidth
    per_out = costs["tp_server_result"] + costs["tp_client_result"] + result / bandwidth
    total = 0.0
    for k, ((n_in, n_out), layer) in enumerate(zip(query_ciphertexts(program), program.layers)):
        total += n_in * per_in + n_out * per_out
        if program.batch_axis:
            total += layer.matrix.nnz * layer.digits * costs["gemm_mac"][top]
            if program.squared_input(k):  # Enc(a)·2b, one plaintext product per element
                total += program.segments[k].in_size * (costs["mul_plain"][top] + costs["add"][top])
        else:
            total += transform_cost(layer, top, costs)
    return -(-int(items) // program.batch_capacity) * total


def query_ciphertexts(program) -> list[tuple[int, int]]:
    """Per linear layer of a two-party program (public or not), the ciphertexts of one query:
    ``(inputs the client sends, results the server returns)`` — on the wire each input takes
    ``ciphertext_bytes / 2`` (seed-compressed) and each result :func:`result_bytes`."""
    out = []
    for k, seg in enumerate(program.segments):
        n_out = seg.out_size if program.batch_axis else seg.output.n_cts
        out.append((seg.n_input_cts * program.input_lists(k), n_out))
    return out
