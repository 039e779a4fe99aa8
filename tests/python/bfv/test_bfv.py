"""heinfer.bfv from Python: slot arithmetic mod p against numpy (encryption with the CKKS key
generator and encryptor of ``params.rlwe``), rotations, flooding, bytes, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from heinfer import bfv, ckks
from heinfer.errors import EncodingError, MissingKeyError, OperandError, ParameterError, SerializationError


@pytest.fixture(scope="module")
def ctx():
    params = bfv.INSECURE_LOGN10()
    kg = ckks.KeyGenerator(params.rlwe)
    pk = kg.public_key()
    return {
        "params": params,
        "kg": kg,
        "pk": pk,
        "enc": bfv.BatchEncoder(params),
        "ev": bfv.Evaluator(params),
        "dec": bfv.Decryptor(params, kg.secret_key),
        "encrypt": ckks.Encryptor(params.rlwe, pk).encrypt,
    }


def _rand(n: int, p: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, p, n, dtype=np.uint64)


def test_multipliers_encoded_in_one_call_are_those_encoded_one_by_one(ctx) -> None:
    """``encode_multipliers`` (rows of signed integers, in parallel) multiplies exactly as
    ``encode_multiplier`` of each row; short rows leave the other slots 0; bad shapes refused."""
    p, n = ctx["params"].plain_modulus, ctx["params"].n
    enc, ev, dec = ctx["enc"], ctx["ev"], ctx["dec"]
    rows = np.random.default_rng(8).integers(-(p // 2), p // 2, (5, n // 2))
    x = _rand(n, p, 9)
    ct = ctx["encrypt"](enc.encode(x))
    for m, r in zip(enc.encode_multipliers(rows), rows):
        want = np.zeros(n, dtype=object)
        want[: n // 2] = r.astype(object) % p
        assert np.array_equal(dec.decrypt(ev.mul_plain(ct, m)).astype(object), x.astype(object) * want % p)
        assert np.array_equal(dec.decrypt(ev.mul_plain(ct, m)), dec.decrypt(ev.mul_plain(ct, enc.encode_multiplier(r))))
    with pytest.raises(EncodingError, match="2-D integer array"):
        enc.encode_multipliers(rows[0])
    with pytest.raises(EncodingError, match="2-D integer array"):
        enc.encode_multipliers(np.zeros((2, n + 1), dtype=np.int64))
    with pytest.raises(EncodingError, match="not below the plaintext modulus"):
        enc.encode_multipliers(np.full((1, 4), p, dtype=np.uint64))


def test_parameters(ctx) -> None:
    params = ctx["params"]
    assert (params.n, params.slots, params.plain_modulus, params.security) == (1024, 1024, 1_032_193, 0)
    assert params.rlwe.n == 1024 and params.log_q == pytest.approx(100, abs=0.1)
    secure = bfv.PN13_PLAIN20()
    assert (secure.n, secure.security) == (8192, 128)
    assert secure != params and secure == bfv.PN13_PLAIN20()
    with pytest.raises(ParameterError, match="plaintext modulus"):
        bfv.BfvParameters(13, [50, 50, 50], [50], 1_032_195)
    with pytest.raises(ParameterError, match="insecure parameters"):
        bfv.BfvParameters(13, [50, 50, 50, 50], [50], 1_032_193)
    assert bfv.flood_bits(20, 13) == 73


def test_slot_arithmetic_matches_numpy(ctx) -> None:
    p, n = ctx["params"].plain_modulus, ctx["params"].n
    enc, ev, dec = ctx["enc"], ctx["ev"], ctx["dec"]
    x, w, b = _rand(n, p, 1), _rand(n, p, 2), _rand(n, p, 3)
    ct = ctx["encrypt"](enc.encode(x))
    xo, wo, bo = (v.astype(object) for v in (x, w, b))
    assert np.array_equal(dec.decrypt(ct), x)
    got = ev.add_plain(ev.mul_plain(ct, enc.encode_multiplier(w)), enc.encode(b))
    assert np.array_equal(dec.decrypt(got).astype(object), (xo * wo + bo) % p)
    assert np.array_equal(dec.decrypt(ev.mul_scalar(ct, -2)).astype(object), (xo * (p - 2)) % p)
    cts = [ctx["encrypt"](enc.encode(_rand(n, p, s))) for s in (4, 5)]
    ms = [enc.encode_multiplier(_rand(n, p, s)) for s in (6, 7)]
    want = sum(_rand(n, p, a).astype(object) * _rand(n, p, m).astype(object) for a, m in ((4, 6), (5, 7))) % p
    assert np.array_equal(dec.decrypt(ev.dot_plain(cts, ms)).astype(object), want)
    # signed inputs are reduced mod p (fixed-point weights and shares)
    neg = ctx["encrypt"](enc.encode(np.array([-1, -5, 3])))
    assert list(dec.decrypt(neg)[:3]) == [p - 1, p - 5, 3]


def test_rotations_turn_both_rows(ctx) -> None:
    p, n = ctx["params"].plain_modulus, ctx["params"].n
    x = _rand(n, p, 8)
    ct = ctx["encrypt"](ctx["enc"].encode(x))
    keys = ctx["kg"].galois_keys([3, -1], conjugate=True)
    rows = x.reshape(2, n // 2)
    ev, dec = ctx["ev"], ctx["dec"]
    assert np.array_equal(dec.decrypt(ev.rotate_rows(ct, 3, keys)), np.roll(rows, -3, axis=1).ravel())
    hoisted = ev.rotate_rows_hoisted(ct, [3, -1], keys)
    assert np.array_equal(dec.decrypt(hoisted[1]), np.roll(rows, 1, axis=1).ravel())
    assert np.array_equal(dec.decrypt(ev.swap_rows(ct, keys)), rows[::-1].ravel())


def test_many_rotations_and_folds_are_the_single_ones(ctx) -> None:
    """``rotate_rows_many`` and ``fold_rows`` (one engine call each) give the same ciphertexts,
    bit for bit, as ``rotate_rows`` and ``add`` in a loop; a step without a key is refused."""
    p, n = ctx["params"].plain_modulus, ctx["params"].n
    ev, dec, kg = ctx["ev"], ctx["dec"], ctx["kg"]
    keys = kg.galois_keys([1, 2, 3, 5])
    cts = [ctx["encrypt"](ctx["enc"].encode(_rand(n, p, s))) for s in (9, 10, 11)]
    many = ev.rotate_rows_many(cts, [3, 1, 5], keys)
    assert [m.to_bytes() for m in many] == [ev.rotate_rows(c, k, keys).to_bytes() for c, k in zip(cts, [3, 1, 5])]
    folded = ev.fold_rows(cts, [1, 2, 3], keys)
    for c, f in zip(cts, folded):
        y = c
        for s in (1, 2, 3):
            y = ev.add(y, ev.rotate_rows(y, s, keys))
        assert f.to_bytes() == y.to_bytes()
    rows = dec.decrypt(cts[0]).astype(object).reshape(2, n // 2)
    want = rows + np.roll(rows, -1, axis=1)
    want = want + np.roll(want, -2, axis=1)
    want = (want + np.roll(want, -3, axis=1)) % p
    assert np.array_equal(dec.decrypt(folded[0]).astype(object), want.ravel())
    with pytest.raises(MissingKeyError, match="missing Galois key"):
        ev.rotate_rows_many(cts[:1], [7], keys)
    with pytest.raises(MissingKeyError, match="missing Galois key"):
        ev.fold_rows(cts[:1], [1, 7], keys)
    with pytest.raises(OperandError, match="2 ciphertexts but 1 steps"):
        ev.rotate_rows_many(cts[:2], [1], keys)


def test_flooding_keeps_the_message_and_hides_the_noise(ctx) -> None:
    p, n = ctx["params"].plain_modulus, ctx["params"].n
    enc, ev, dec = ctx["enc"], ctx["ev"], ctx["dec"]
    rr = bfv.Rerandomizer(ctx["params"], ctx["pk"])
    x = _rand(n, p, 9)
    ct = ctx["encrypt"](enc.encode(x))
    small, large = ev.mul_plain(ct, enc.encode_multiplier(np.ones(n, np.uint64))), ev.mul_plain(ct, enc.encode_multiplier(_rand(n, p, 10)))
    assert dec.noise_budget(small) - dec.noise_budget(large) > 15
    b = rr.max_flood_bits
    fs, fl = rr.rerandomize(small, b), rr.rerandomize(large, b)
    assert np.array_equal(dec.decrypt(fs), x)
    assert abs(dec.noise_budget(fs) - dec.noise_budget(fl)) < 1.0
    with pytest.raises(ParameterError, match="flooding"):
        rr.rerandomize(small, b + 1)


def scaled_copy(ct):
    scaled = ct.copy()
    scaled.set_scale(4.0)
    return scaled


def test_compact_results_decrypt_in_fewer_bytes(ctx) -> None:
    params = ctx["params"]
    ct = ctx["encrypt"](ctx["enc"].encode([5, 6, 7]))
    rr = bfv.Rerandomizer(params, ctx["pk"])
    b = rr.max_flood_bits - 2
    full, small = rr.rerandomize(ct, b), rr.rerandomize_compact(ct, b)
    assert small.level == rr.compact_level(b) < full.level
    assert list(ctx["dec"].decrypt(small)[:3]) == [5, 6, 7]
    n_small = len(params._raw.ciphertext_to_bytes(small._raw))
    assert n_small < len(params._raw.ciphertext_to_bytes(full._raw)) * (small.level + 1.5) / (full.level + 1)


def test_results_travel_rounded_within_their_bound(ctx) -> None:
    """A compacted result without the low bits its flooding leaves free: fewer bytes, the same
    slots, and at least two bits of noise budget left (flooded error plus rounding ≤ Δ_ℓ/8)."""
    params, dec = ctx["params"], ctx["dec"]
    x = _rand(params.n, params.plain_modulus, 11)
    ct = ctx["encrypt"](ctx["enc"].encode(x))
    rr = bfv.Rerandomizer(params, ctx["pk"])
    for b in (40, rr.max_flood_bits - 2):
        small = rr.rerandomize_compact(ct, b)
        j0, j1 = params.result_drop_bits(b)
        assert j0 > j1 > 0
        data = params._raw.result_to_bytes(small._raw, b)
        assert len(data) == params.result_wire_bytes(b) < len(params._raw.ciphertext_to_bytes(small._raw))
        back = ckks.Ciphertext._wrap(params._raw.result_from_bytes(data, 1 << 22, b), params.rlwe)
        assert np.array_equal(dec.decrypt(back), x)
        assert dec.noise_budget(back) >= 2.0, (b, dec.noise_budget(back))
    # the small flooding's result (the most rounded) read as the large one's: refused
    data = params._raw.result_to_bytes(rr.rerandomize_compact(ct, 40)._raw, 40)
    with pytest.raises(SerializationError, match="level|drops"):
        params._raw.result_from_bytes(data, 1 << 22, rr.max_flood_bits - 2)


def test_bytes_and_bad_input(ctx) -> None:
    params, enc = ctx["params"], ctx["enc"]
    ct = ctx["encrypt"](enc.encode([7, 8]))
    raw = params._raw.ciphertext_to_bytes(ct._raw)
    back = ckks.Ciphertext._wrap(params._raw.ciphertext_from_bytes(raw, len(raw)), params.rlwe)
    assert list(ctx["dec"].decrypt(back)[:2]) == [7, 8]
    with pytest.raises(SerializationError):
        params._raw.ciphertext_from_bytes(raw[:-3], len(raw))
    with pytest.raises(EncodingError, match="not below"):
        enc.encode(np.array([params.plain_modulus], dtype=np.uint64))
    with pytest.raises(EncodingError, match="integers"):
        enc.encode(np.array([1.5]))
    with pytest.raises(EncodingError, match="slots"):
        enc.encode(np.zeros(params.n + 1, dtype=np.int64))
    # a ciphertext at a lower level (a compacted result) is only decrypted; another scale is refused
    lowered = ckks.Evaluator(params.rlwe).drop_level(ct, 1)
    with pytest.raises(ParameterError, match="compacted result"):
        ctx["ev"].add(lowered, lowered)
    with pytest.raises(ParameterError, match="BFV ciphertext"):
        ctx["dec"].decrypt(scaled_copy(ct))
    with pytest.raises(ParameterError, match="BFV ciphertext"):
        ctx["ev"].add(scaled_copy(ct), ct)
    with pytest.raises(TypeError):
        ctx["ev"].mul_plain(ct, enc.encode([1]))


def test_uniform_residues_are_in_range_uniform_and_fresh() -> None:
    """The server's masks: residues below p in the asked shape, uniform (chi-square over 16
    buckets and over the low bits), a new draw each call, up to 40-bit moduli; moduli outside
    the plaintext range are refused."""
    p = 1_032_193
    x = bfv.uniform_mod((4, 8192), p)
    assert x.shape == (4, 8192) and x.dtype == np.uint64 and int(x.max()) < p
    for buckets in ((x.reshape(-1) * 16 // p).astype(int), (x.reshape(-1) % 16).astype(int)):
        counts = np.bincount(buckets, minlength=16)
        expected = x.size / 16
        chi2 = ((counts - expected) ** 2 / expected).sum()
        assert chi2 < 73.6, f"chi-square {chi2:.1f} over 15 degrees of freedom"  # p = 1e-9
    assert not np.array_equal(x, bfv.uniform_mod((4, 8192), p))
    wide = bfv.uniform_mod((8192,), bfv.plain_primes(15, 36)[0])  # the widest plaintext moduli
    assert int(wide.max()) < bfv.plain_primes(15, 36)[0] and int(wide.max()) > 1 << 35
    for bad in (1, 1 << 40, 1 << 62):
        with pytest.raises(ParameterError, match="modulus"):
            bfv.uniform_mod((3,), bad)


def test_plain_primes_batch_in_every_ring_up_to_the_one_asked() -> None:
    """``plain_primes(15, bits)``: primes of ``bits`` bits ``≡ 1 (mod 2^16)``, largest first,
    that the engine takes as plaintext moduli at N = 2^13 and 2^14; sizes outside 12..40
    are refused."""
    ps = bfv.plain_primes(15, 36, 3)
    assert len(ps) == 3 and ps == sorted(ps, reverse=True)
    assert all(p.bit_length() == 36 and p % (1 << 16) == 1 for p in ps)
    for log_n, primes in ((13, 3), (14, 4)):
        assert bfv.BfvParameters(log_n, [50] * primes, [50], ps[0]).plain_modulus == ps[0]
    for bad in (11, 41):
        with pytest.raises(ParameterError, match="bits"):
            bfv.plain_primes(15, bad)


def test_parameters_without_room_for_fresh_noise_are_refused() -> None:
    """Q = 2^50 over a 40-bit p leaves Δ = 2^10: accepted, and every fresh encryption decrypted
    wrong. A flood size past 32 bits saturates (refused by the re-randomizer) instead of
    wrapping to a small flood."""
    p40 = bfv.plain_primes(12, 40)[0]
    with pytest.raises(ParameterError, match="a fresh encryption.s noise"):
        bfv.BfvParameters(12, [50], [50], p40)
    assert bfv.flood_bits(2**32 - 1, 1, 0) == 2**32 - 1
    assert bfv.flood_bits(2**31, 10, 2**31) == 2**32 - 1


def test_add_assign_of_a_ciphertext_to_itself(ctx) -> None:
    """``add_assign(c, c)`` raised a bare "Already mutably borrowed"; now 2·c, as in CKKS."""
    p, n = ctx["params"].plain_modulus, ctx["params"].n
    x = _rand(n, p, 4)
    ct = ctx["encrypt"](ctx["enc"].encode(x))
    ctx["ev"].add_assign(ct, ct)
    np.testing.assert_array_equal(ctx["dec"].decrypt(ct), (2 * x) % p)
