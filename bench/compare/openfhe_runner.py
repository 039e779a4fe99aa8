"""OpenFHE (openfhe PyPI wheel) side of the CKKS comparison.

Runs under .venv-openfhe (Python 3.10; the wheel does not import under 3.11):
  .venv-openfhe/bin/python bench/compare/openfhe_runner.py --logn 14 --levels 7 \
      --scale-bits 40 --max-logqp 438 --reps 20 --hoist 16
Prints exactly one JSON line on stdout; diagnostics go to stderr. Never imports
heinfer. If openfhe cannot be imported it prints {"library": "openfhe",
"unavailable": "<reason>"} and exits 0.
"""

from __future__ import annotations

import os

# Single-threaded, and this must happen before openfhe (OpenMP) is loaded.
os.environ["OMP_NUM_THREADS"] = "1"

import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402

AUX_BITS = 60  # OpenFHE's special-prime size for HYBRID key switching (64-bit build)


def unavailable(reason: str):
    common.log(f"openfhe: unavailable: {reason}")
    sys.stdout.write(json.dumps({"library": "openfhe", "unavailable": reason}) + "\n")
    sys.exit(0)


# ---------------------------------------------------------------- parameters

def make_context(o, args, first_bits: int, dnum: int):
    n = 1 << args.logn
    p = o.CCParamsCKKSRNS()
    p.SetSecurityLevel(o.HEStd_NotSet)
    p.SetRingDim(n)
    p.SetBatchSize(n // 2)
    p.SetMultiplicativeDepth(args.levels)
    p.SetScalingModSize(args.scale_bits)
    p.SetFirstModSize(first_bits)
    p.SetScalingTechnique(o.FIXEDMANUAL)
    p.SetKeySwitchTechnique(o.HYBRID)
    p.SetNumLargeDigits(dnum)
    cc = o.GenCryptoContext(p)
    for feat in (o.PKE, o.KEYSWITCH, o.LEVELEDSHE):
        cc.Enable(feat)
    if cc.GetRingDimension() != n:
        raise RuntimeError(f"ring dimension {cc.GetRingDimension()} != {n}")
    return cc


def q_primes(o, cc):
    """The ciphertext primes, read from the context's JSON serialization."""
    j = json.loads(o.Serialize(cc, o.JSON))
    params = j["value0"]["ptr_wrapper"]["data"]["cc"]["ptr_wrapper"]["data"]
    while "elp" not in params:
        params = params["value0"]
    towers = params["elp"]["ptr_wrapper"]["data"]["p"]
    return [int(t["ptr_wrapper"]["data"]["value0"]["cm"]["v"]) for t in towers]


def num_special_primes(q, dnum):
    """Model of OpenFHE's HYBRID rule: digits of ceil(|Q|/dnum) consecutive
    primes; P (primes just below 2^60) must exceed the largest digit product
    times sqrt(dnum*|Q|): #P = floor((bits + log2(sqrt(dnum*|Q|))) / 60) + 1.
    Fitted to the keys openfhe 1.6.1 produces (the older ceil(bits/60) is often
    one short). None if dnum is invalid. Always checked against a real key."""
    a = math.ceil(len(q) / dnum)
    if len(q) - a * (dnum - 1) <= 0:
        return None
    max_bits = 0
    for j in range(dnum):
        prod = 1
        for v in q[j * a:(j + 1) * a]:
            prod *= v
        max_bits = max(max_bits, prod.bit_length())
    return int((max_bits + 0.5 * math.log2(dnum * len(q))) // AUX_BITS) + 1


def key_tower_count(o, cc, n, n_q, dnum):
    """#special primes actually used, from the size of one serialized key:
    dnum digits x 2 polynomials x (|Q| + |P|) towers x N words."""
    kp = cc.KeyGen()
    blob = o.Serialize(cc.EvalAutomorphismKeyGen(kp.secretKey, [cc.FindAutomorphismIndex(1)]),
                       o.BINARY)
    return round(len(blob) / (dnum * 2 * n * 8)) - n_q, blob


SURROGATE_LOGN = 11  # #P does not depend on N (checked for 2^11 and 2^14)


def choose_params(o, args):
    """Smallest dnum whose log2(QP) fits the budget, with firstModSize as large
    as fits (<= 60, and >= scale_bits + 2 so the last level still holds a
    scale-2^S value). #P is confirmed with a real key on a small surrogate ring
    (cheap). If nothing fits, the least-overshooting setting is used and flagged."""
    L, S, budget = args.levels, args.scale_bits, args.max_logqp
    min_first = min(60, S + 2)
    ref = q_primes(o, make_context(o, args, 60, L + 1))  # scaling primes at this N
    scaling = ref[1:]
    sur = argparse_like(args, SURROGATE_LOGN)
    best_over = None
    for dnum in range(1, L + 2):
        for first in range(60, min_first - 1, -1):
            q_est = [(1 << first) - 1] + scaling
            k = num_special_primes(q_est, dnum)
            if k is None:
                break
            est = common.log2_prod(q_est) + k * AUX_BITS  # special primes just below 2^60
            if best_over is None or est < best_over[0]:
                best_over = (est, dnum, first)
            if est > budget:
                continue
            cc_s = make_context(o, sur, first, dnum)
            k_s, _ = key_tower_count(o, cc_s, 1 << SURROGATE_LOGN, L + 1, dnum)
            if k_s != k:
                common.log(f"openfhe: note: dnum={dnum} first={first}: model #P={k}, key #P={k_s}")
            cc = make_context(o, args, first, dnum)
            q = q_primes(o, cc)
            if common.log2_prod(q) + k_s * AUX_BITS <= budget:
                return cc, q, dnum, first, False
    _, dnum, first = best_over
    common.log(f"openfhe: no (dnum, firstModSize >= {min_first}) fits log2(QP) <= {budget} "
               f"with {AUX_BITS}-bit special primes; using dnum={dnum}, firstModSize={first} "
               "(budget exceeded, see params.log_qp)")
    cc = make_context(o, args, first, dnum)
    return cc, q_primes(o, cc), dnum, first, True


def argparse_like(args, logn):
    sur = type(args)(**vars(args))
    sur.logn = logn
    return sur


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):  # deterministic for < 2^64
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def special_primes_from_key(blob: bytes, q, n: int, expected: int):
    """Recover the special primes P from a serialized (BINARY) evaluation key.

    The python binding exposes no accessor for P, but every tower of a key
    element is serialized with its modulus: the special primes are the
    NTT-friendly primes (= 1 mod 2N) outside Q that occur repeatedly in the blob.
    """
    m = 2 * n
    counts = {}
    buf = np.frombuffer(blob, dtype=np.uint8)
    qset = set(q)
    for off in range(8):
        usable = (len(buf) - off) // 8 * 8
        w = buf[off:off + usable].view("<u8")
        cand = w[((w % np.uint64(m)) == 1) & (w >= np.uint64(1 << 50)) & (w < np.uint64(1 << 62))]
        vals, cnt = np.unique(cand, return_counts=True)
        for v, c in zip(vals.tolist(), cnt.tolist()):
            counts[v] = counts.get(v, 0) + c
    found = sorted((v for v, c in counts.items() if c >= 2 and v not in qset and _is_prime(v)),
                   reverse=True)
    # OpenFHE draws P downwards from 2^AUX_BITS: the `expected` largest ones.
    if len(found) < expected:
        common.log(f"openfhe: warning: found only {len(found)} special primes in the key, "
                   f"expected {expected}")
    return found[:expected]


# ---------------------------------------------------------------- benchmark

def main(argv=None):
    args = common.parse_args(argv)
    try:
        import openfhe as o
    except Exception as e:  # noqa: BLE001 - any import failure means "skip"
        unavailable(f"import openfhe failed under Python {sys.version.split()[0]}: {e!r}")
    try:
        from importlib.metadata import version as _pkg_version
        wheel = _pkg_version("openfhe")
    except Exception:  # noqa: BLE001
        wheel = "?"

    n = 1 << args.logn
    slots = n // 2
    m = 2 * n
    cc, q, dnum, first, over = choose_params(o, args)
    n_special = num_special_primes(q, dnum)
    common.log(f"openfhe: N={n} dnum={dnum} firstModSize={first} Q bits="
               f"{[v.bit_length() for v in q]} #P={n_special}")

    kp = cc.KeyGen()
    sk, pk = kp.secretKey, kp.publicKey
    cc.EvalMultKeyGen(sk)

    res = common.skeleton("openfhe", f"openfhe-python {o.__version__} (wheel {wheel})")
    notes = {}
    sizes = res["sizes"]

    # One Galois key (rotation by 1), generated and serialized on its own
    # before the rotation keys are put into the context.
    rot1 = cc.FindAutomorphismIndex(1)
    key_blob = o.Serialize(cc.EvalAutomorphismKeyGen(sk, [rot1]), o.BINARY)
    sizes["galois_key_bytes"] = len(key_blob)
    k_real = round(len(key_blob) / (dnum * 2 * n * 8)) - len(q)
    if k_real != n_special:
        common.log(f"openfhe: note: key has {k_real} special primes, model said {n_special}")
    p_primes = special_primes_from_key(key_blob, q, n, k_real)
    del key_blob

    cc.EvalRotateKeyGen(sk, list(range(1, args.hoist + 1)))
    conj_idx = m - 1
    conj_keys = cc.EvalAutomorphismKeyGen(sk, [conj_idx])
    notes["conjugate"] = ("no EvalConjugate in the binding: EvalAutomorphism with index 2N-1 "
                          "and a key from EvalAutomorphismKeyGen")

    x, y = common.inputs(slots)
    T, P = res["timings_us"], res["precision_bits"]
    reps = args.reps

    def dec(ct):
        return cc.Decrypt(ct, sk).GetRealPackedValueArray()

    # encode (top level, scale 2^S)
    T["encode"] = common.median_us(lambda: cc.MakeCKKSPackedPlaintext(x), reps)
    pt_x = cc.MakeCKKSPackedPlaintext(x)
    pt_y = cc.MakeCKKSPackedPlaintext(y)
    # encrypt
    T["encrypt"] = common.median_us(lambda: cc.Encrypt(pk, pt_x), reps)
    ct_x = cc.Encrypt(pk, pt_x)
    ct_y = cc.Encrypt(pk, pt_y)
    # decrypt: OpenFHE's Decrypt always decodes as well
    T["decrypt"] = common.median_us(lambda: cc.Decrypt(ct_x, sk), reps)
    P["encrypt_decrypt"] = common.precision_bits(dec(ct_x), x)
    # decode: Plaintext.Decode on a freshly decrypted plaintext + values -> numpy
    fresh = [cc.Decrypt(ct_x, sk) for _ in range(reps + common.WARMUP)]
    nsd, sf = fresh[0].GetNoiseScaleDeg(), fresh[0].GetScalingFactor()

    def decode():
        pt = fresh.pop()
        pt.Decode(nsd, sf, o.FIXEDMANUAL, o.EXEC_EVALUATION)
        pt.GetRealPackedValueArray()
    T["decode"] = common.median_us(decode, reps)
    del fresh
    notes["decrypt"] = "OpenFHE Decrypt includes decoding (no decode-free API in the binding)"
    notes["decrypt_minus_decode_us"] = round(T["decrypt"] - T["decode"], 2)
    notes["encode_decode"] = ("null: the binding cannot decode a plaintext that was not "
                              "decrypted (Plaintext.Decode crashes on a freshly encoded one)")

    # add
    T["add"] = common.median_us(lambda: cc.EvalAdd(ct_x, ct_y), reps)
    P["add"] = common.precision_bits(dec(cc.EvalAdd(ct_x, ct_y)), x + y)
    # mul_plain (no rescale: FIXEDMANUAL)
    T["mul_plain"] = common.median_us(lambda: cc.EvalMult(ct_x, pt_y), reps)
    P["mul_plain"] = common.precision_bits(dec(cc.EvalMult(ct_x, pt_y)), x * y)
    # mul_const: EvalMult(ct, double)
    T["mul_const"] = common.median_us(lambda: cc.EvalMult(ct_x, common.MUL_CONST), reps)
    P["mul_const"] = common.precision_bits(dec(cc.EvalMult(ct_x, common.MUL_CONST)),
                                           common.MUL_CONST * x)
    # mul_relin: EvalMult(ct, ct) = tensor + relinearization, no rescale
    T["mul_relin"] = common.median_us(lambda: cc.EvalMult(ct_x, ct_y), reps)
    ct_xy = cc.EvalMult(ct_x, ct_y)
    P["mul_relin"] = common.precision_bits(dec(ct_xy), x * y)
    # rescale
    T["rescale"] = common.median_us(lambda: cc.Rescale(ct_xy), reps)
    P["rescale"] = common.precision_bits(dec(cc.Rescale(ct_xy)), x * y)
    # rotate left by one slot
    T["rotate"] = common.median_us(lambda: cc.EvalRotate(ct_x, 1), reps)
    P["rotate"] = common.precision_bits(dec(cc.EvalRotate(ct_x, 1)), np.roll(x, -1))

    # hoisted rotations by 1..hoist: one precompute + hoist fast rotations,
    # reported per rotation
    h = args.hoist
    # the like-for-like baseline: plain rotations by the same steps, each with its own key
    total = common.median_us(lambda: [cc.EvalRotate(ct_x, i) for i in range(1, h + 1)], max(3, reps // 4), warmup=1)
    T["rotate_steps"] = round(total / h, 2)

    def hoisted():
        digits = cc.EvalFastRotationPrecompute(ct_x)
        return [cc.EvalFastRotation(ct_x, i, m, digits) for i in range(1, h + 1)]
    total = common.median_us(hoisted, reps)
    T["rotate_hoisted"] = round(total / h, 2)
    P["rotate_hoisted"] = min(common.precision_bits(dec(c), np.roll(x, -(i + 1)))
                              for i, c in enumerate(hoisted()))
    notes["rotate_hoisted_total_us"] = total

    # conjugate
    T["conjugate"] = common.median_us(lambda: cc.EvalAutomorphism(ct_x, conj_idx, conj_keys), reps)
    P["conjugate"] = common.precision_bits(dec(cc.EvalAutomorphism(ct_x, conj_idx, conj_keys)), x)

    # size of a fresh top-level ciphertext (BINARY, includes OpenFHE's
    # per-object crypto-context header)
    sizes["ciphertext_bytes"] = len(o.Serialize(ct_x, o.BINARY))

    log_qp = common.log2_prod(q) + common.log2_prod(p_primes)
    res["params"] = {
        "logN": args.logn,
        "log_qp": round(log_qp, 2),
        "primes_bits": [v.bit_length() for v in q],
        "special_primes_bits": [v.bit_length() for v in p_primes],
        "levels": args.levels,
        "scale_bits": args.scale_bits,
        "dnum": dnum,
        "first_mod_bits": first,
    }
    if over or log_qp > args.max_logqp:
        res["params"]["budget_exceeded"] = True
    res["notes"] = notes
    common.emit(res)


if __name__ == "__main__":
    main()
