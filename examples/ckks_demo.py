"""A short CKKS session at 128-bit security: encrypt two vectors, compute
``rot_k(x·y + 0.5·x)`` on ciphertexts, decrypt, and compare with numpy.

Run with ``make demo`` (or ``.venv/bin/python examples/ckks_demo.py``).
"""

from __future__ import annotations

import time

import heinfer
import numpy as np
from heinfer import ckks


def timed(label: str, fn, *args):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn(*args)
    print(f"  {label:<34} {1e3 * (time.perf_counter() - t0):9.2f} ms")
    return out


def main() -> None:
    params = ckks.PN14_QP438()
    print(f"heinfer {heinfer.__version__}, {heinfer.get_num_threads()} threads")
    print(f"{params}\n  {params.slots} slots, {params.security}-bit security\n")

    k = 3
    kg = timed("keygen (secret key)", ckks.KeyGenerator, params)
    pk = timed("public key", kg.public_key)
    rlk = timed("relinearization key", kg.relin_key)
    gks = timed(f"Galois key (rotation by {k})", kg.galois_keys, [k])
    enc, ev = ckks.Encoder(params), ckks.Evaluator(params)
    encryptor, decryptor = ckks.Encryptor(params, pk), ckks.Decryptor(params, kg.secret_key)

    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, params.slots)
    y = rng.uniform(-1, 1, params.slots)
    print()
    ctx = timed("encode + encrypt x", lambda: encryptor.encrypt(enc.encode(x)))
    cty = timed("encode + encrypt y", lambda: encryptor.encrypt(enc.encode(y)))

    # x·y: scale Δ², then rescale back to ≈ Δ at level L−1.
    xy = timed("x*y (mul + relinearize)", ev.mul_relin, ctx, cty, rlk)
    xy = timed("rescale", ev.rescale, xy)
    # 0.5·x: the constant encoded at Δ, so after the rescale both terms have scale Δ²/q_L.
    half_x = timed("0.5*x (mul_const)", ev.mul_const, ctx, 0.5)
    half_x = timed("rescale", ev.rescale, half_x)
    s = timed("add", ev.add, xy, half_x)
    out_ct = timed(f"rotate by {k}", ev.rotate, s, k, gks)
    out = timed("decrypt + decode", lambda: enc.decode(decryptor.decrypt(out_ct)))

    want = np.roll(x * y + 0.5 * x, -k)
    err = np.abs(out - want)
    print(f"\nresult level {out_ct.level}, ciphertext {len(out_ct.to_bytes()) / 2**20:.2f} MiB")
    print(f"first slots: {np.round(out[:4], 6)}  (numpy: {np.round(want[:4], 6)})")
    print(
        f"max error {err.max():.3e}  ->  precision {-np.log2(err.max()):.1f} bits "
        f"(mean {-np.log2(err.mean()):.1f} bits)"
    )
    assert err.max() < 1e-5, "precision below expectations"


if __name__ == "__main__":
    main()
