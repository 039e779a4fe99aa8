"""heinfer.bfv — exact arithmetic mod ``p`` on encrypted vectors (BFV), from Python.

The packed additively homomorphic encryption of GAZELLE's two-party protocol (§3–4). BFV
runs on the engine's RLWE machinery: its parameters wrap a :class:`heinfer.ckks.CkksParameters`
(:attr:`BfvParameters.rlwe`) for the ring, the primes and the security table, so keys come
from :class:`heinfer.ckks.KeyGenerator`, public-key encryption from
:class:`heinfer.ckks.Encryptor`, and ciphertexts are :class:`heinfer.ckks.Ciphertext` objects at
the top level with scale 1. What BFV adds: a plaintext prime ``p ≡ 1 (mod 2N)`` with SIMD
batching over ``N`` slots (two rows of ``N/2``; rotations turn both rows, ``swap_rows``
exchanges them), the ``Δ = ⌊Q/p⌋`` encoding, exact decryption, and noise flooding.

Typical flow::

    params = bfv.PN13_PLAIN20()                         # N = 8192, p = 1,032,193, 128-bit
    kg = ckks.KeyGenerator(params.rlwe)                 # client
    enc, ev = bfv.BatchEncoder(params), bfv.Evaluator(params)
    ct = ckks.Encryptor(params.rlwe, kg.public_key()).encrypt(enc.encode(x))
    y = ev.mul_plain(ct, enc.encode_multiplier(w))      # server: x·w mod p, slot-wise
    y = bfv.Rerandomizer(params, pk).rerandomize(y, b)  # server: flood before sending
    bfv.Decryptor(params, kg.secret_key).decrypt(y)     # client: exact x·w mod p
"""

from heinfer.bfv.ops import BatchEncoder, Decryptor, Evaluator, Multiplier, Rerandomizer
from heinfer.bfv.params import INSECURE_LOGN10, MAX_FLOOD_BITS, PN13_PLAIN20, BfvParameters, flood_bits, plain_primes, uniform_mod

__all__ = [
    "BfvParameters",
    "PN13_PLAIN20",
    "INSECURE_LOGN10",
    "MAX_FLOOD_BITS",
    "flood_bits",
    "plain_primes",
    "uniform_mod",
    "BatchEncoder",
    "Multiplier",
    "Evaluator",
    "Decryptor",
    "Rerandomizer",
]
