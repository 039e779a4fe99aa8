"""Microsoft SEAL (through tenseal.sealapi) side of the CKKS comparison.

Usage (main venv, Python 3.11, `tenseal` installed by bench/setup_compare.sh):
  python bench/compare/seal_runner.py --logn 14 --levels 7 --scale-bits 40 \
      --max-logqp 438 --reps 20 --hoist 16
Prints exactly one JSON line on stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MAX_PRIME_BITS = 60  # SEAL's limit for one coefficient-modulus prime


def choose_bits(levels: int, scale_bits: int, budget: int):
    """[q0] + [scale]*levels + [special], q0/special as large as the budget allows.

    SEAL has exactly one special prime (the last one of the chain). The spare
    budget after the scaling primes is split between q0 and the special prime
    (each <= 60 bits; the special prime gets the odd bit, as it should be at
    least as large as any other prime).
    """
    spare = budget - scale_bits * levels
    special = min(MAX_PRIME_BITS, spare - spare // 2)
    q0 = min(MAX_PRIME_BITS, spare - special)
    if q0 <= scale_bits:
        common.log(f"seal: warning: q0 = {q0} bits <= scale {scale_bits} bits: "
                   "the last level cannot hold a scale-2^S message")
    if q0 < 2 or special < 2:
        raise SystemExit(f"seal: budget {budget} too small for {levels} x {scale_bits}-bit primes")
    return [q0] + [scale_bits] * levels + [special]


def parse_seal_file(path: str):
    """Return (total_bytes_on_disk, uncompressed_bytes or None, compr_mode, (major, minor)).

    SEAL's 16-byte header: magic u16, header_size u8, version major u8, minor u8,
    compr_mode u8, reserved u16, total size u64. tenseal's save(path) writes with
    SEAL's default compression (zstd when compiled in), so the uncompressed size
    is 16 + len(decompressed payload).
    """
    with open(path, "rb") as f:
        blob = f.read()
    magic, hsize, vmaj, vmin, mode, _res, total = struct.unpack_from("<HBBBBHQ", blob, 0)
    if magic != 0xA15E or hsize != 16:
        raise ValueError("not a SEAL serialization")
    payload = blob[hsize:total]
    raw = None
    if mode == 0:       # none
        raw = len(payload)
    elif mode == 1:     # zlib
        raw = len(zlib.decompress(payload))
    elif mode == 2:     # zstd
        try:
            import zstandard  # optional, installed by setup_compare.sh
            dobj = zstandard.ZstdDecompressor().decompressobj()
            raw = len(dobj.decompress(payload))
        except ImportError:
            exe = shutil.which("zstd")
            if exe:
                out = subprocess.run([exe, "-dc"], input=payload, capture_output=True, check=True)
                raw = len(out.stdout)
            else:
                common.log("seal: neither python zstandard nor zstd CLI: uncompressed size unknown")
    return total, (hsize + raw if raw is not None else None), mode, (vmaj, vmin)


def main(argv=None):
    args = common.parse_args(argv)
    import tenseal
    import tenseal.sealapi as s

    n = 1 << args.logn
    slots = n // 2
    scale = float(2 ** args.scale_bits)
    bits = choose_bits(args.levels, args.scale_bits, args.max_logqp)

    parms = s.EncryptionParameters(s.SCHEME_TYPE.CKKS)
    parms.set_poly_modulus_degree(n)
    parms.set_coeff_modulus(s.CoeffModulus.Create(n, bits))
    if sum(bits) <= s.CoeffModulus.MaxBitCount(n, s.SEC_LEVEL_TYPE.TC128):
        sec = s.SEC_LEVEL_TYPE.TC128
    else:
        common.log(f"seal: {sum(bits)} bits > 128-bit-security maximum for N={n}: sec_level NONE")
        sec = s.SEC_LEVEL_TYPE.NONE
    ctx = s.SEALContext(parms, True, sec)
    if not ctx.parameters_set():
        raise SystemExit(f"seal: invalid parameters: {ctx.parameters_error_message()}")

    moduli = ctx.key_context_data().parms().coeff_modulus()
    primes = [m.value() for m in moduli]
    q_primes = primes[:-1]
    top = ctx.first_parms_id()

    keygen = s.KeyGenerator(ctx)
    sk = keygen.secret_key()
    pk = s.PublicKey()
    keygen.create_public_key(pk)
    rlk = s.RelinKeys()
    keygen.create_relin_keys(rlk)
    # Galois elements given explicitly (the uint32 overload): 3 = rotate left by
    # one slot, 2N-1 = complex conjugation.
    gal_rot, gal_conj = 3, 2 * n - 1
    gk = s.GaloisKeys()
    keygen.create_galois_keys([gal_rot, gal_conj], gk)

    encoder = s.CKKSEncoder(ctx)
    encryptor = s.Encryptor(ctx, pk)
    decryptor = s.Decryptor(ctx, sk)
    ev = s.Evaluator(ctx)
    assert encoder.slot_count() == slots

    x, y = common.inputs(slots)
    xl, yl = x.tolist(), y.tolist()

    def enc(vec_list):
        pt = s.Plaintext()
        encoder.encode(vec_list, top, scale, pt)
        ct = s.Ciphertext()
        encryptor.encrypt(pt, ct)
        return ct

    def dec(ct):
        pt = s.Plaintext()
        decryptor.decrypt(ct, pt)
        return encoder.decode_double(pt)

    res = common.skeleton("seal", "")
    T, P = res["timings_us"], res["precision_bits"]
    reps = args.reps

    # encode / decode
    pt_x = s.Plaintext()
    T["encode"] = common.median_us(lambda: encoder.encode(xl, top, scale, pt_x), reps)
    out_vec = []
    T["decode"] = common.median_us(lambda: out_vec.__setitem__(slice(None), encoder.decode_double(pt_x)), reps)
    P["encode_decode"] = common.precision_bits(encoder.decode_double(pt_x), x)

    # encrypt / decrypt
    ct_x = s.Ciphertext()
    T["encrypt"] = common.median_us(lambda: encryptor.encrypt(pt_x, ct_x), reps)
    ct_x = enc(xl)
    ct_y = enc(yl)
    pt_out = s.Plaintext()
    T["decrypt"] = common.median_us(lambda: decryptor.decrypt(ct_x, pt_out), reps)
    P["encrypt_decrypt"] = common.precision_bits(dec(ct_x), x)

    out = s.Ciphertext()
    # add
    T["add"] = common.median_us(lambda: ev.add(ct_x, ct_y, out), reps)
    ev.add(ct_x, ct_y, out)
    P["add"] = common.precision_bits(dec(out), x + y)

    # mul_plain (plaintext encoded at top level, no rescale)
    pt_y = s.Plaintext()
    encoder.encode(yl, top, scale, pt_y)
    T["mul_plain"] = common.median_us(lambda: ev.multiply_plain(ct_x, pt_y, out), reps)
    ev.multiply_plain(ct_x, pt_y, out)
    P["mul_plain"] = common.precision_bits(dec(out), x * y)

    # mul_const: encode(double) at scale 2^S + multiply_plain (both timed, as
    # OpenFHE's EvalMult(ct, double) also converts the scalar internally)
    pt_c = s.Plaintext()

    def mul_const():
        encoder.encode(common.MUL_CONST, top, scale, pt_c)
        ev.multiply_plain(ct_x, pt_c, out)
    T["mul_const"] = common.median_us(mul_const, reps)
    mul_const()
    P["mul_const"] = common.precision_bits(dec(out), common.MUL_CONST * x)

    # mul_relin: ct x ct then relinearize (no rescale)
    def mul_relin():
        ev.multiply(ct_x, ct_y, out)
        ev.relinearize_inplace(out, rlk)
    T["mul_relin"] = common.median_us(mul_relin, reps)
    ct_xy = s.Ciphertext()
    ev.multiply(ct_x, ct_y, ct_xy)
    ev.relinearize_inplace(ct_xy, rlk)
    P["mul_relin"] = common.precision_bits(dec(ct_xy), x * y)

    # rescale: degree-1 ciphertext at scale 2^(2S) -> next level
    T["rescale"] = common.median_us(lambda: ev.rescale_to_next(ct_xy, out), reps)
    ev.rescale_to_next(ct_xy, out)
    P["rescale"] = common.precision_bits(dec(out), x * y)

    # rotate left by one slot
    T["rotate"] = common.median_us(lambda: ev.rotate_vector(ct_x, 1, gk, out), reps)
    ev.rotate_vector(ct_x, 1, gk, out)
    P["rotate"] = common.precision_bits(dec(out), np.roll(x, -1))

    # SEAL has no hoisted rotation API: null, not faked; its keys here are for one step and
    # conjugation only (16 keys at logN = 15 would take 2.5 GB), so no rotate_steps either.
    T["rotate_steps"] = None
    T["rotate_hoisted"] = None
    P["rotate_hoisted"] = None

    # conjugate (of a real vector: itself)
    T["conjugate"] = common.median_us(lambda: ev.complex_conjugate(ct_x, gk, out), reps)
    ev.complex_conjugate(ct_x, gk, out)
    P["conjugate"] = common.precision_bits(dec(out), x)

    # sizes: fresh top-level ciphertext, one Galois key (rotation by 1)
    version = "?"
    with tempfile.TemporaryDirectory() as tmp:
        f_ct = os.path.join(tmp, "ct.bin")
        ct_x.save(f_ct)
        comp, raw, mode, ver = parse_seal_file(f_ct)
        version = f"{ver[0]}.{ver[1]}"
        res["sizes"]["ciphertext_bytes"] = raw
        if mode == 2:
            res["sizes"]["ciphertext_bytes_compressed"] = comp
        gk1 = s.GaloisKeys()
        keygen.create_galois_keys([gal_rot], gk1)
        f_gk = os.path.join(tmp, "gk.bin")
        gk1.save(f_gk)
        gcomp, graw, gmode, _ = parse_seal_file(f_gk)
        res["sizes"]["galois_key_bytes"] = graw
        if gmode == 2:
            res["sizes"]["galois_key_bytes_compressed"] = gcomp
        common.log(f"seal: serialization compr_mode={mode} (0 none, 1 zlib, 2 zstd); "
                   "uncompressed sizes are reconstructed by decompressing")

    res["version"] = f"SEAL {version} (tenseal {tenseal.__version__})"
    res["params"] = {
        "logN": args.logn,
        "log_qp": round(common.log2_prod(primes), 2),
        "primes_bits": [m.bit_count() for m in moduli[:-1]],
        "special_primes_bits": [m.bit_count() for m in moduli[-1:]],
        "levels": args.levels,
        "scale_bits": args.scale_bits,
        "dnum": len(q_primes),  # SEAL: one digit per ciphertext prime, one special prime
    }
    common.emit(res)


if __name__ == "__main__":
    main()
