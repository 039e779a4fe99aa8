"""heinfer.ckks — the RNS-CKKS engine, from Python.

Approximate homomorphic encryption over ``N/2`` complex slots (Cheon–Kim–Kim–Song, full-RNS
variant with hybrid key switching). The engine is Rust (``crates/heinfer-ckks``); these
classes are typed, documented wrappers around the private native module. Every operation
releases the GIL and runs on the pool sized by :func:`heinfer.set_num_threads`.

Typical flow::

    params = ckks.PN14_QP438()                     # 128-bit security, 8192 slots, L = 7
    kg = ckks.KeyGenerator(params)                 # client: secret key
    enc, ev = ckks.Encoder(params), ckks.Evaluator(params)
    ct = ckks.Encryptor(params, kg.public_key()).encrypt(enc.encode(x))
    ct = ev.rescale(ev.mul_relin(ct, ct, kg.relin_key()))       # server: x², level L−1
    x2 = enc.decode(ckks.Decryptor(params, kg.secret_key).decrypt(ct))
"""

from heinfer.ckks.encoder import Encoder
from heinfer.ckks.evaluator import Evaluator
from heinfer.ckks.keys import Decryptor, Encryptor, KeyGenerator
from heinfer.ckks.objects import (
    DEFAULT_MAX_BYTES,
    Ciphertext,
    ExtendedCiphertext,
    GaloisKeys,
    Plaintext,
    PublicKey,
    RelinKey,
    SecretKey,
)
from heinfer.ckks.params import (
    INSECURE_LOGN10,
    INSECURE_LOGN12,
    PN13_QP218,
    PN14_QP438,
    PN15_QP881,
    CkksParameters,
)

__all__ = [
    "CkksParameters",
    "PN13_QP218",
    "PN14_QP438",
    "PN15_QP881",
    "INSECURE_LOGN10",
    "INSECURE_LOGN12",
    "KeyGenerator",
    "Encryptor",
    "Decryptor",
    "Encoder",
    "Evaluator",
    "Plaintext",
    "Ciphertext",
    "ExtendedCiphertext",
    "SecretKey",
    "PublicKey",
    "RelinKey",
    "GaloisKeys",
    "DEFAULT_MAX_BYTES",
]
