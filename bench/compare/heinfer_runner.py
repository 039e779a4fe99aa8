"""heinfer side of the side-by-side primitives benchmark (same contract as seal_runner.py).

    python bench/compare/heinfer_runner.py --logn 14 --levels 7 --scale-bits 40 \
        --max-logqp 438 --reps 20 --hoist 16 [--threads 1]

Prints ONE JSON line on stdout (diagnostics on stderr). Parameters: the secure preset of the
ring degree when it matches the requested levels, scale and budget (PN13_QP218, PN14_QP438,
PN15_QP881: every prime below 2^50 for the FMA kernels); otherwise q0 = 50 bits, `levels`
scale primes, and as many 50-bit special primes as the budget allows.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import numpy as np  # noqa: E402

import heinfer  # noqa: E402
from heinfer import ckks  # noqa: E402

PRESETS = {13: ckks.PN13_QP218, 14: ckks.PN14_QP438, 15: ckks.PN15_QP881}


def choose_params(logn: int, levels: int, scale_bits: int, budget: int) -> ckks.CkksParameters:
    if logn in PRESETS:
        p = PRESETS[logn]()
        if p.max_level == levels and p.log_qp <= budget and round(np.log2(p.default_scale)) == scale_bits:
            return p
    q0 = min(50, scale_bits + 10)
    log_q = [q0] + [scale_bits] * levels
    room = budget - sum(log_q)
    k = max(1, room // 50)
    if room < 20:
        raise SystemExit(f"no room for a special prime: budget {budget}, Q uses {sum(log_q)} bits")
    return ckks.CkksParameters(logn, log_q, [min(50, room // k)] * k, scale_bits)


def main(argv=None) -> None:
    import argparse

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--threads", type=int, default=1)
    ns, rest = extra.parse_known_args(argv)
    args = common.parse_args(rest)
    heinfer.set_num_threads(ns.threads)
    params = choose_params(args.logn, args.levels, args.scale_bits, args.max_logqp)
    common.log(f"heinfer: {params!r}, threads={heinfer.get_num_threads()}")
    slots = params.slots
    top = params.max_level
    scale = params.default_scale
    kg = ckks.KeyGenerator(params)
    pk, rlk = kg.public_key(), kg.relin_key()
    steps = list(range(1, args.hoist + 1))
    gk = kg.galois_keys(steps, conjugate=True)
    encoder, ev = ckks.Encoder(params), ckks.Evaluator(params)
    encryptor, decryptor = ckks.Encryptor(params, pk), ckks.Decryptor(params, kg.secret_key)
    x, y = common.inputs(slots)

    def dec(ct):
        return encoder.decode(decryptor.decrypt(ct))

    res = common.skeleton("heinfer", f"heinfer {heinfer.__version__} (threads={ns.threads})")
    T, P = res["timings_us"], res["precision_bits"]
    reps = args.reps

    pt_x = encoder.encode(x, scale, top)
    T["encode"] = common.median_us(lambda: encoder.encode(x, scale, top), reps)
    T["decode"] = common.median_us(lambda: encoder.decode(pt_x), reps)
    P["encode_decode"] = common.precision_bits(encoder.decode(pt_x), x)

    T["encrypt"] = common.median_us(lambda: encryptor.encrypt(pt_x), reps)
    ct_x, ct_y = encryptor.encrypt(pt_x), encryptor.encrypt(encoder.encode(y, scale, top))
    T["decrypt"] = common.median_us(lambda: decryptor.decrypt(ct_x), reps)
    P["encrypt_decrypt"] = common.precision_bits(dec(ct_x), x)

    T["add"] = common.median_us(lambda: ev.add(ct_x, ct_y), reps)
    P["add"] = common.precision_bits(dec(ev.add(ct_x, ct_y)), x + y)

    pt_y = encoder.encode(y, scale, top)
    T["mul_plain"] = common.median_us(lambda: ev.mul_plain(ct_x, pt_y), reps)
    P["mul_plain"] = common.precision_bits(dec(ev.mul_plain(ct_x, pt_y)), x * y)

    # scalar fast path: one integer round(c·Δ) per limb, no plaintext polynomial
    T["mul_const"] = common.median_us(lambda: ev.mul_const(ct_x, common.MUL_CONST, scale), reps)
    P["mul_const"] = common.precision_bits(dec(ev.mul_const(ct_x, common.MUL_CONST, scale)), common.MUL_CONST * x)

    T["mul_relin"] = common.median_us(lambda: ev.mul_relin(ct_x, ct_y, rlk), reps)
    ct_xy = ev.mul_relin(ct_x, ct_y, rlk)
    P["mul_relin"] = common.precision_bits(dec(ct_xy), x * y)

    T["rescale"] = common.median_us(lambda: ev.rescale(ct_xy), reps)
    P["rescale"] = common.precision_bits(dec(ev.rescale(ct_xy)), x * y)

    T["rotate"] = common.median_us(lambda: ev.rotate(ct_x, 1, gk), reps)
    P["rotate"] = common.precision_bits(dec(ev.rotate(ct_x, 1, gk)), np.roll(x, -1))

    hoisted_reps = max(3, reps // 4)
    total = common.median_us(lambda: [ev.rotate(ct_x, k, gk) for k in steps], hoisted_reps, warmup=1)
    T["rotate_steps"] = round(total / len(steps), 2)
    total = common.median_us(lambda: ev.rotate_hoisted(ct_x, steps, gk), hoisted_reps, warmup=1)
    T["rotate_hoisted"] = round(total / len(steps), 2)
    outs = ev.rotate_hoisted(ct_x, steps, gk)
    P["rotate_hoisted"] = min(common.precision_bits(dec(c), np.roll(x, -k)) for k, c in zip(steps, outs))

    T["conjugate"] = common.median_us(lambda: ev.conjugate(ct_x, gk), reps)
    P["conjugate"] = common.precision_bits(dec(ev.conjugate(ct_x, gk)), x)

    one_key = kg.galois_keys([1])
    res["sizes"] = {
        "ciphertext_bytes": len(ct_x.to_bytes()),
        "ciphertext_bytes_seed_compressed": len(kg.encrypt_symmetric(pt_x).to_bytes()),
        "galois_key_bytes": len(one_key.to_bytes()),
    }
    res["params"] = {
        "logN": args.logn,
        "log_qp": round(params.log_qp, 2),
        "primes_bits": [int(q).bit_length() for q in params.q],
        "special_primes_bits": [int(p).bit_length() for p in params.p],
        "levels": params.max_level,
        "scale_bits": args.scale_bits,
        "dnum": params.beta,
    }
    common.emit(res)


if __name__ == "__main__":
    main()
