"""Measured per-ciphertext costs of GAZELLE's two-party protocol on this machine.

Layer: ``heinfer.runtime``. The kinds of :data:`heinfer.compiler.two_party_cost.TWO_PARTY_KINDS`,
each the seconds of one ciphertext's share of the work as the protocol
(:mod:`heinfer.protocol.two_party`) does it: on every engine thread at once
(:func:`heinfer.threads.parallel_map` over :data:`CIPHERTEXTS` ciphertexts), median of ``reps``
runs. No cache: the four measurements take well under a second.
"""

from __future__ import annotations

import numpy as np

from heinfer import bfv, ckks
from heinfer.compiler.two_party_cost import TWO_PARTY_KINDS
from heinfer.runtime.costs import median_seconds
from heinfer.threads import parallel_map

__all__ = ["CIPHERTEXTS", "measure_two_party_costs"]

#: Ciphertexts per measurement: a multiple of the engine's threads on any machine here.
CIPHERTEXTS = 16


def measure_two_party_costs(bfv_params: dict, flood_bits: int, reps: int = 3) -> dict:
    """Seconds per ciphertext of each two-party kind for the BFV parameters ``bfv_params`` (a
    program's ``bfv`` dict), results flooded with ``2^flood_bits``."""
    b = bfv_params
    params = bfv.BfvParameters(b["log_n"], b["log_q"], b["log_p"], b["plain_modulus"], b["security"])
    raw, rlwe, n, p = params._raw, params.rlwe, params.n, int(b["plain_modulus"])
    kg = ckks.KeyGenerator(rlwe)
    enc, ev, dec = bfv.BatchEncoder(params), bfv.Evaluator(params), bfv.Decryptor(params, kg.secret_key)
    rr = bfv.Rerandomizer(params, kg.public_key())
    rows = list(np.random.default_rng(0).integers(0, p, (CIPHERTEXTS, n), dtype=np.int64))

    def client_input(r) -> bytes:
        return bytes(raw.ciphertext_to_bytes(kg.encrypt_symmetric(enc.encode(r))._raw))

    inputs = parallel_map(client_input, rows)

    def server_input(m_r) -> ckks.Ciphertext:
        c = ckks.Ciphertext._wrap(raw.ciphertext_from_bytes(m_r[0], 1 << 22), rlwe)
        return ev.add_plain(c, enc.encode(m_r[1]))

    cts = parallel_map(server_input, list(zip(inputs, rows)))

    def server_result(c_r) -> bytes:
        out = rr.rerandomize_compact(ev.add_plain(c_r[0], enc.encode(c_r[1])), flood_bits)
        return bytes(raw.result_to_bytes(out._raw, flood_bits))

    results = parallel_map(server_result, list(zip(cts, rows)))

    def client_result(m: bytes) -> np.ndarray:
        return dec.decrypt(ckks.Ciphertext._wrap(raw.result_from_bytes(m, 1 << 22, flood_bits), rlwe))

    runs = (
        lambda: parallel_map(client_input, rows),
        lambda: parallel_map(server_input, list(zip(inputs, rows))),
        lambda: parallel_map(server_result, list(zip(cts, rows))),
        lambda: parallel_map(client_result, results),
    )
    return {kind: median_seconds(run, reps) / CIPHERTEXTS for kind, run in zip(TWO_PARTY_KINDS, runs)}
