"""Evaluator: every operation against numpy with precision floors, rotations against
np.roll, hoisting, complex packing, and the errors of mismatched operands."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROTATIONS, Kit, assert_precision
from heinfer import (
    LevelError,
    MissingKeyError,
    OperandError,
    ParameterError,
    ScaleError,
    ckks,
)


def test_encrypt_decrypt_every_level_and_symmetric(kit: Kit) -> None:
    x = kit.vector(10)
    for level in range(kit.params.max_level + 1):
        ct = kit.encrypt(x, level=level)
        assert (ct.level, ct.size, ct.params_id) == (level, 2, kit.params.id)
        assert not ct.is_seed_compressed
        assert_precision(f"{kit.name} encrypt level {level}", kit.decrypt(ct), x, 19.0)
        cs = kit.kg.encrypt_symmetric(kit.enc.encode(x, level=level))
        assert cs.is_seed_compressed
        assert_precision(f"{kit.name} symmetric level {level}", kit.decrypt(cs), x, 19.0)


def test_additive_ops(kit: Kit) -> None:
    ev, x, y = kit.ev, kit.vector(1), kit.vector(2)
    cx, cy = kit.encrypt(x), kit.encrypt(y)
    py_ = kit.enc.encode(y)
    floor = 19.0
    assert_precision("add", kit.decrypt(ev.add(cx, cy)), x + y, floor)
    assert_precision("sub", kit.decrypt(ev.sub(cx, cy)), x - y, floor)
    assert_precision("neg", kit.decrypt(ev.neg(cx)), -x, floor)
    assert_precision("add_plain", kit.decrypt(ev.add_plain(cx, py_)), x + y, floor)
    assert_precision("sub_plain", kit.decrypt(ev.sub_plain(cx, py_)), x - y, floor)
    assert_precision("add_const", kit.decrypt(ev.add_const(cx, 0.25)), x + 0.25, floor)
    z = kit.decrypt(ev.add_const_complex(cx, 0.5 - 0.25j), real=False)
    assert_precision("add_const_complex", z, x + 0.5 - 0.25j, floor)


def test_multiplicative_ops(kit: Kit) -> None:
    ev, x, y = kit.ev, kit.vector(3), kit.vector(4)
    cx, cy = kit.encrypt(x), kit.encrypt(y)
    top = kit.params.max_level
    m = ev.mul(cx, cy)
    assert m.size == 3 and m.level == top
    assert abs(m.scale - kit.params.default_scale**2) / m.scale < 1e-12
    assert_precision("mul (size 3, decrypted)", kit.decrypt(m), x * y, 15.0)
    r = ev.rescale(ev.relinearize(m, kit.rlk))
    assert (r.size, r.level) == (2, top - 1)
    assert_precision(f"{kit.name} mul+relin+rescale", kit.decrypt(r), x * y, 15.0)
    assert_precision(
        "mul_relin", kit.decrypt(ev.rescale(ev.mul_relin(cx, cy, kit.rlk))), x * y, 15.0
    )
    sq = ev.rescale(ev.relinearize(ev.square(cx), kit.rlk))
    assert_precision("square", kit.decrypt(sq), x * x, 15.0)
    mp = ev.rescale(ev.mul_plain(cx, kit.enc.encode(y)))
    assert_precision("mul_plain", kit.decrypt(mp), x * y, 15.0)
    mc = ev.mul_const(cx, -0.7)
    assert abs(mc.scale - kit.params.default_scale**2) / mc.scale < 1e-12
    assert_precision("mul_const", kit.decrypt(ev.rescale(mc)), -0.7 * x, 15.0)
    exact = ev.rescale(ev.mul_const(cx, 3.0, kit.params.q[top]))
    assert exact.scale == cx.scale, "constant at q_l: the rescale restores the scale exactly"
    assert_precision("mul_const at q_l", kit.decrypt(exact), 3.0 * x, 15.0)


def test_complex_ops_and_conjugate(kit: Kit) -> None:
    ev, z = kit.ev, kit.vector(5, complex_=True)
    cz = kit.encrypt(z)
    out = kit.decrypt(ev.rescale(ev.mul_const_complex(cz, 0.5 + 2j)), real=False)
    assert_precision("mul_const_complex", out, (0.5 + 2j) * z, 15.0)
    assert_precision(
        "conjugate", kit.decrypt(ev.conjugate(cz, kit.gks), real=False), z.conj(), 18.0
    )
    # complex packing: two real vectors in one ciphertext, products of complex numbers
    w = kit.vector(6, complex_=True)
    prod = ev.rescale(ev.mul_relin(cz, kit.encrypt(w), kit.rlk))
    assert_precision("complex mul", kit.decrypt(prod, real=False), z * w, 14.0)


def test_assign_forms(kit12: Kit) -> None:
    k, ev = kit12, kit12.ev
    x, y = k.vector(7), k.vector(8)
    cx, cy, py_ = k.encrypt(x), k.encrypt(y), k.enc.encode(y)
    a = cx.copy()
    ev.add_assign(a, cy)
    assert_precision("add_assign", k.decrypt(a), x + y, 20.0)
    ev.sub_assign(a, cy)
    assert_precision("sub_assign", k.decrypt(a), x, 20.0)
    ev.add_assign(a, a)  # aliasing: a ← a + a
    assert_precision("add_assign aliased", k.decrypt(a), 2 * x, 20.0)
    ev.sub_assign(a, a)
    assert np.abs(k.decrypt(a)).max() < 1e-5
    a = cx.copy()
    ev.neg_assign(a)
    assert_precision("neg_assign", k.decrypt(a), -x, 20.0)
    ev.add_plain_assign(a, py_)
    assert_precision("add_plain_assign", k.decrypt(a), y - x, 20.0)
    ev.mul_plain_assign(a, py_)
    ev.rescale_assign(a)
    assert_precision("mul_plain_assign+rescale_assign", k.decrypt(a), (y - x) * y, 15.0)
    b = cx.copy()
    ev.mul_const_assign(b, 2.5)
    ev.rescale_assign(b)
    assert_precision("mul_const_assign", k.decrypt(b), 2.5 * x, 15.0)
    c = ev.mul(cx, cy)
    ev.relinearize_assign(c, k.rlk)
    assert c.size == 2
    assert_precision("relinearize_assign", k.decrypt(ev.rescale(c)), x * y, 15.0)
    assert_precision("copy untouched", k.decrypt(cx), x, 20.0)


def test_levels(kit12: Kit) -> None:
    k, ev = kit12, kit12.ev
    x = k.vector(9)
    cx = k.encrypt(x)
    d = ev.drop_level(cx, 2)
    assert d.level == cx.level - 2 and d.scale == cx.scale
    assert_precision("drop_level", k.decrypt(d), x, 20.0)
    assert ev.drop_to_level(cx, 0).level == 0
    assert ev.drop_level(cx, 0).level == cx.level
    with pytest.raises(LevelError):
        ev.drop_level(cx, cx.level + 1)
    with pytest.raises(LevelError):
        ev.drop_level(cx, -1)
    with pytest.raises(LevelError):
        ev.drop_to_level(cx, cx.level + 1)
    # multiply down to level 0, then one more rescale is refused
    ct, want = cx, x
    while ct.level > 0:
        ct = ev.rescale(ev.mul_relin(ct, ct, k.rlk))
        want = want * want
    assert_precision("depth L", k.decrypt(ct), want, 10.0)
    with pytest.raises(LevelError):
        ev.rescale(ct)


@pytest.mark.parametrize("k_", ROTATIONS)
def test_rotations_match_np_roll(kit: Kit, k_: int) -> None:
    x = kit.vector(11)
    out = kit.decrypt(kit.ev.rotate(kit.encrypt(x), k_, kit.gks))
    assert_precision(f"{kit.name} rotate {k_}", out, np.roll(x, -k_), 18.0)


def test_rotation_by_zero_needs_no_key(kit10: Kit) -> None:
    x = kit10.vector(12)
    empty = kit10.kg.galois_keys([])
    assert len(empty) == 0
    for k_ in (0, kit10.params.slots, -kit10.params.slots):
        assert_precision(
            "rotate 0", kit10.decrypt(kit10.ev.rotate(kit10.encrypt(x), k_, empty)), x, 20.0
        )


def test_galois_key_set(kit10: Kit) -> None:
    g = kit10.gks
    assert all(g.has_rotation(k) for k in ROTATIONS) and g.has_rotation(0)
    assert not g.has_rotation(4) and g.has_conjugation()
    assert len(g) == len(g.elements) == len(ROTATIONS) + 1
    x = kit10.vector(13)
    ct = kit10.encrypt(x)
    via_g = kit10.ev.apply_galois(ct, kit10.params.rotation_galois_element(1), g)
    assert_precision("apply_galois", kit10.decrypt(via_g), np.roll(x, -1), 18.0)
    with pytest.raises(OperandError):
        kit10.ev.apply_galois(ct, 4, g)  # even: not a Galois element
    with pytest.raises(OperandError):
        kit10.ev.apply_galois(ct, 2**80, g)


def test_hoisted_equals_plain(kit: Kit) -> None:
    x = kit.vector(14)
    ct = kit.encrypt(x)
    steps = [0, 1, 2, -1, 5]
    hoisted = kit.ev.rotate_hoisted(ct, steps, kit.gks)
    assert len(hoisted) == len(steps)
    for k_, h in zip(steps, hoisted, strict=True):
        plain = kit.decrypt(kit.ev.rotate(ct, k_, kit.gks))
        assert np.abs(kit.decrypt(h) - plain).max() < 2.0**-25
        assert_precision(f"hoisted {k_}", kit.decrypt(h), np.roll(x, -k_), 18.0)


def test_grouped_sums_are_one_sum_per_group(kit: Kit) -> None:
    """dot_plain_groups / dot_plain_extended_groups: the same bits as one dot_plain /
    dot_plain_extended per group, and the values of the sums."""
    ct = kit.encrypt(kit.vector(20))
    xs = [kit.encrypt(kit.vector(21 + i)) for i in range(3)]
    terms = [[0, 1, 2], [2], [1, 1, 0]]
    pts = [[kit.enc.encode(kit.vector(40 + 10 * g + t)) for t in range(len(ts))] for g, ts in enumerate(terms)]
    got = kit.ev.dot_plain_groups(xs, terms, pts)
    for ts, ps, out in zip(terms, pts, got, strict=True):
        assert out.to_bytes() == kit.ev.dot_plain([xs[t] for t in ts], ps).to_bytes()
    want = sum(kit.vector(21 + t) * kit.vector(60 + i) for i, t in enumerate(terms[2]))
    assert_precision("grouped sum", kit.decrypt(kit.ev.rescale(got[2])), want, 16.0)
    exts = kit.ev.rotate_hoisted_extended(ct, [0, 1, 2], kit.gks)
    epts = [[kit.enc.encode_extended(kit.vector(70 + 10 * g + t), level=ct.level) for t in range(len(ts))] for g, ts in enumerate(terms)]
    for ts, ps, out in zip(terms, epts, kit.ev.dot_plain_extended_groups(exts, terms, epts), strict=True):
        assert out.to_bytes() == kit.ev.dot_plain_extended([exts[t] for t in ts], ps).to_bytes()
    with pytest.raises(OperandError, match="names a ciphertext that is not in the list"):
        kit.ev.dot_plain_groups(xs, [[3]], [pts[1]])
    with pytest.raises(OperandError, match="2 groups of terms but 1 groups of plaintexts"):
        kit.ev.dot_plain_groups(xs, terms[:2], pts[:1])


def test_rotate_many_is_rotate_on_each(kit: Kit) -> None:
    xs = [kit.vector(50 + i) for i in range(4)]
    cts = [kit.encrypt(x) for x in xs]
    steps = [1, 2, -1, 0]
    many = kit.ev.rotate_many(cts, steps, kit.gks)
    assert len(many) == len(steps)
    for c, k_, m in zip(cts, steps, many, strict=True):
        assert m.to_bytes() == kit.ev.rotate(c, k_, kit.gks).to_bytes()  # the same bits
    assert kit.ev.rotate_many([], [], kit.gks) == []
    with pytest.raises(OperandError, match="3 ciphertexts but 2 steps"):
        kit.ev.rotate_many(cts[:3], steps[:2], kit.gks)
    with pytest.raises(MissingKeyError):
        kit.ev.rotate_many(cts[:2], [1, 4], kit.gks)


def test_hoisted_many_is_hoisted_on_each(kit: Kit) -> None:
    cts = [kit.encrypt(kit.vector(70 + i)) for i in range(3)]
    steps = [[1, 2, 0], [-1], [100, 1]]
    plain = kit.ev.rotate_hoisted_many(cts, steps, kit.gks)
    ext = kit.ev.rotate_hoisted_extended_many(cts, steps, kit.gks)
    for c, s, p, e in zip(cts, steps, plain, ext, strict=True):
        assert [r.to_bytes() for r in p] == [r.to_bytes() for r in kit.ev.rotate_hoisted(c, s, kit.gks)]
        one = kit.ev.rotate_hoisted_extended(c, s, kit.gks)
        assert [kit.ev.mod_down_extended(r).to_bytes() for r in e] == [kit.ev.mod_down_extended(r).to_bytes() for r in one]
    with pytest.raises(OperandError, match="3 ciphertexts but 2 lists of steps"):
        kit.ev.rotate_hoisted_many(cts, steps[:2], kit.gks)
    with pytest.raises(MissingKeyError):
        kit.ev.rotate_hoisted_extended_many(cts[:1], [[1, 4]], kit.gks)


def test_rescale_many_assign_is_rescale_on_each_or_none(kit: Kit) -> None:
    cts = [kit.ev.mul_const(kit.encrypt(kit.vector(80 + i)), 0.5) for i in range(3)]
    want = [kit.ev.rescale(c).to_bytes() for c in cts]
    kit.ev.rescale_many_assign(cts)
    assert [c.to_bytes() for c in cts] == want
    low = kit.ev.drop_to_level(cts[0], 0)
    before = [c.to_bytes() for c in cts]
    with pytest.raises(LevelError):
        kit.ev.rescale_many_assign([*cts, low])
    assert [c.to_bytes() for c in cts] == before  # checked first: none was rescaled
    with pytest.raises(OperandError, match="appears twice"):
        kit.ev.rescale_many_assign([cts[1], cts[1]])


def test_fold_is_rotate_and_add_in_order(kit: Kit) -> None:
    xs = [kit.vector(60 + i) for i in range(3)]
    cts = [kit.encrypt(x) for x in xs]
    steps = [1, 2, -1]
    folded = kit.ev.fold(cts, steps, kit.gks)
    assert len(folded) == len(cts)
    for c, x, f in zip(cts, xs, folded, strict=True):
        acc, want = c, x
        for s in steps:
            acc = kit.ev.add(acc, kit.ev.rotate(acc, s, kit.gks))
            want = want + np.roll(want, -s)
        assert f.to_bytes() == acc.to_bytes()  # the same bits as the loop
        assert_precision(f"{kit.name} fold", kit.decrypt(f), want, 14.0)
    assert [c.to_bytes() for c in kit.ev.fold(cts[:1], [], kit.gks)] == [cts[0].to_bytes()]
    assert kit.ev.fold([], steps, kit.gks) == []
    with pytest.raises(MissingKeyError):
        kit.ev.fold(cts[:1], [1, 4], kit.gks)


def test_hoisted_extended_bsgs_sum(kit: Kit) -> None:
    """Σ_k d_k ⊙ rot_k(x) with one ModDown (the inner loop of a diagonal matvec)."""
    ev, enc = kit.ev, kit.enc
    x = kit.vector(15)
    ct = kit.encrypt(x)
    steps = [0, 1, 2, 3]
    diags = [kit.vector(20 + k_) for k_ in steps]
    ext = ev.rotate_hoisted_extended(ct, steps, kit.gks)
    assert all(e.level == ct.level and e.scale == ct.scale for e in ext)
    acc = ev.mul_plain_extended(ext[0], enc.encode_extended(diags[0]))
    for e, d in zip(ext[1:], diags[1:], strict=True):
        ev.add_extended_assign(acc, ev.mul_plain_extended(e, enc.encode_extended(d)))
    out = ev.rescale(ev.mod_down_extended(acc))
    want = sum(d * np.roll(x, -k_) for k_, d in zip(steps, diags, strict=True))
    assert_precision(f"{kit.name} extended BSGS sum", kit.decrypt(out), want, 14.0)
    # a single extended rotation brought down equals the plain rotation
    one = ev.mod_down_extended(ext[1])
    assert_precision("mod_down(rot_ext)", kit.decrypt(one), np.roll(x, -1), 18.0)
    mc = ev.rescale(ev.mod_down_extended(ev.mul_const_extended(ext[2], 1.5)))
    assert_precision("mul_const_extended", kit.decrypt(mc), 1.5 * np.roll(x, -2), 14.0)
    a = ext[3].copy()
    ev.add_extended_assign(a, a)
    assert_precision(
        "add_extended aliased", kit.decrypt(ev.mod_down_extended(a)), 2 * np.roll(x, -3), 17.0
    )


def test_operators(kit10: Kit) -> None:
    k = kit10
    x, y = k.vector(30), k.vector(31)
    cx, cy, py_ = k.encrypt(x), k.encrypt(y), k.enc.encode(y)
    floor = 18.0
    assert_precision("ct+ct", k.decrypt(cx + cy), x + y, floor)
    assert_precision("ct+pt", k.decrypt(cx + py_), x + y, floor)
    assert_precision("ct+float", k.decrypt(cx + 2.0), x + 2, floor)
    assert_precision("int+ct", k.decrypt(3 + cx), x + 3, floor)
    assert_precision("ct-ct", k.decrypt(cx - cy), x - y, floor)
    assert_precision("ct-pt", k.decrypt(cx - py_), x - y, floor)
    assert_precision("ct-float", k.decrypt(cx - 0.5), x - 0.5, floor)
    assert_precision("float-ct", k.decrypt(1.0 - cx), 1 - x, floor)
    assert_precision("-ct", k.decrypt(-cx), -x, floor)
    assert_precision("ct+complex", k.decrypt(cx + 1j, real=False), x + 1j, floor)
    assert_precision("ct-complex", k.decrypt(cx - 1j, real=False), x - 1j, floor)
    with pytest.raises(TypeError):
        cx + "a"  # type: ignore[operator]
    with pytest.raises(TypeError):
        cx * cy  # type: ignore[operator]


def test_errors(kit10: Kit, kit12: Kit) -> None:
    k, ev = kit10, kit10.ev
    cx = k.encrypt(k.vector(40))
    low = ev.drop_level(cx, 1)
    with pytest.raises(LevelError, match="different levels"):
        ev.add(cx, low)
    with pytest.raises(ScaleError):
        ev.add(cx, ev.mul_const(cx, 2.0))
    with pytest.raises(ScaleError):
        cx.copy().set_scale(0.0)
    with pytest.raises(MissingKeyError):
        ev.rotate(cx, 4, k.gks)
    with pytest.raises(MissingKeyError):
        ev.rotate_hoisted(cx, [1, 4], k.gks)
    with pytest.raises(MissingKeyError):
        ev.conjugate(cx, k.kg.galois_keys([1]))
    with pytest.raises(OperandError):
        ev.rotate(ev.mul(cx, cx), 1, k.gks)  # size 3: relinearize first
    foreign = kit12.encrypt(kit12.vector(41))
    with pytest.raises(ParameterError):
        ev.add(foreign, foreign)
    with pytest.raises(ParameterError):
        ev.rotate(cx, 1, kit12.gks)
    with pytest.raises(ParameterError):
        ev.relinearize(ev.mul(cx, cx), kit12.rlk)
    with pytest.raises(ParameterError):
        ckks.Encryptor(k.params, kit12.pk)
    with pytest.raises(ParameterError):
        ckks.Decryptor(k.params, kit12.kg.secret_key)
    with pytest.raises(ParameterError):
        k.decryptor.decrypt(foreign)
    with pytest.raises(ParameterError):
        k.encryptor.encrypt(kit12.enc.encode([1.0]))
    with pytest.raises(TypeError):
        ev.add(cx, k.enc.encode([1.0]))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ckks.Evaluator("params")  # type: ignore[arg-type]


def test_scale_override(kit10: Kit) -> None:
    ct = kit10.encrypt(kit10.vector(42))
    c2 = ct.copy()
    c2.set_scale(ct.scale * 2)
    assert c2.scale == ct.scale * 2 and ct.scale == kit10.params.default_scale
    assert_precision("set_scale halves", kit10.decrypt(c2), kit10.vector(42) / 2, 18.0)


def test_pn13_pipeline_at_128_bits(kit13: Kit) -> None:
    """rot_3(x·y + 0.5·x) at real parameters."""
    k, ev = kit13, kit13.ev
    assert k.params.security == 128
    x, y = k.vector(50), k.vector(51)
    cx, cy = k.encrypt(x), k.encrypt(y)
    gk = k.kg.galois_keys([3])
    s = ev.add(ev.rescale(ev.mul_relin(cx, cy, k.rlk)), ev.rescale(ev.mul_const(cx, 0.5)))
    out = k.decrypt(ev.rotate(s, 3, gk))
    assert_precision("logN=13 rot(x*y+0.5x)", out, np.roll(x * y + 0.5 * x, -3), 17.0)


def _conjugated_coefficients(v: np.ndarray) -> np.ndarray:
    """``v(X^{-1})`` coefficient-wise (rows of ``N``): coefficient 0 stays, ``k → −v_{N−k}``."""
    out = np.empty_like(v)
    out[:, 0], out[:, 1:] = v[:, 0], -v[:, :0:-1]
    return out


def test_key_switching_leaves_no_fixed_offset() -> None:
    """A key switch's error has mean zero in every coefficient. With ModUp digits taken in
    ``[0, Q_j)`` (mean ``Q_j/2``) it carried ``(Q_j/2)·(1 + X + … + X^{N−1})·e_j/P``, fixed
    per key — small in variance, but ``≈ 2N/π`` times larger in slot 0 (before a rotation's
    automorphism), where it reached 4× the noise with digits 6–12 bits below ``P``
    (``heinfer_ckks::params::unbalanced_digit_bits``). Measured on the error a
    relinearization and a conjugation add, over 24 ciphertexts (mean per coefficient, in
    integer units: ±0.04 to ±3.5 per key before, against a standard error of 0.05)."""
    from heinfer import _native

    p = ckks.CkksParameters(13, [34, 28, 28, 28, 28, 28], [40], 28)
    kg, enc, ev = ckks.KeyGenerator(p), ckks.Encoder(p), ckks.Evaluator(p)
    dec, gk, rlk = ckks.Decryptor(p, kg.secret_key), kg.galois_keys([], conjugate=True), kg.relin_key()

    def coefficients(cts: list, scale: float) -> np.ndarray:
        batch = _native.CiphertextBatch.from_list([c._raw for c in cts])
        return np.asarray(_native.decrypt_batch_coefficients(dec._raw, batch)).reshape(len(cts), -1) * scale

    fresh = [kg.encrypt_symmetric(enc.encode(np.zeros(enc.slots), scale=2.0**28)) for _ in range(24)]
    squares = [ev.square(c) for c in fresh]
    errors = {
        "conjugate": _conjugated_coefficients(coefficients([ev.conjugate(c, gk) for c in fresh], 2.0**28))
        - coefficients(fresh, 2.0**28),
        "relinearize": coefficients([ev.relinearize(c, rlk) for c in squares], 2.0**56) - coefficients(squares, 2.0**56),
    }
    for name, e in errors.items():
        se = e.std() / np.sqrt(e.size)
        assert abs(e.mean()) < 6 * se, f"{name}: mean {e.mean():.3f} per coefficient (standard error {se:.3f})"


def test_what_would_wrap_around_the_modulus_is_refused(kit10: Kit) -> None:
    """Each of these returned a result that decrypted to garbage, silently: a product whose
    scale is not below ``Q_ℓ`` (every multiplication at level 0 of a 2^35 scale under a 50-bit
    modulus), a constant added beyond ``Q_ℓ/2``; an encoded value of 2^61 or more decoded
    wrapped; ``ct + ndarray`` made an object array of ciphertexts."""
    from heinfer import EncodingError

    k, ev = kit10, kit10.ev
    x = k.vector(50)
    low = ev.drop_level(k.encrypt(x), k.params.max_level)  # level 0
    assert low.level == 0
    for op in (lambda: ev.mul_relin(low, low, k.rlk), lambda: ev.square(low), lambda: ev.mul_const(low, 3.0),
               lambda: ev.mul_plain(low, k.enc.encode(x, level=0))):
        with pytest.raises(ScaleError, match="does not fit the modulus"):
            op()
    with pytest.raises(EncodingError, match="reaches Q_0/2"):
        ev.add_const(low, 2.0**16)
    assert_precision("add_const within Q_0", k.decrypt(ev.add_const(low, 100.0)), x + 100.0, 10.0)
    with pytest.raises(EncodingError, match="cannot be decoded"):
        k.enc.encode(np.full(k.params.slots, 2.0**64))
    with pytest.raises(TypeError):
        k.encrypt(x) + np.arange(3.0)  # type: ignore[operator]
    with pytest.raises(TypeError):
        np.arange(3.0) + k.encrypt(x)  # type: ignore[operator]


def test_an_all_zero_secret_key_is_refused(kit10: Kit) -> None:
    from heinfer import SerializationError

    data = bytearray(kit10.kg.secret_key.to_bytes())
    body = kit10.params.n // 4
    data[-body:] = bytes(body)
    with pytest.raises(SerializationError, match="all-zero secret key"):
        ckks.SecretKey.from_bytes(kit10.params, bytes(data))
