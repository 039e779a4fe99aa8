"""Parameters: presets, security checks, literal validation, binary form."""

from __future__ import annotations

import hashlib

import pytest
from heinfer import ParameterError, SerializationError, ckks


@pytest.mark.parametrize(
    "preset, log_n, levels, bound",
    [(ckks.PN13_QP218, 13, 3, 218), (ckks.PN14_QP438, 14, 7, 438), (ckks.PN15_QP881, 15, 16, 881)],
)
def test_secure_presets(preset, log_n: int, levels: int, bound: int) -> None:
    p = preset()
    assert p is preset(), "presets are cached"
    assert (p.log_n, p.n, p.slots, p.max_level) == (log_n, 1 << log_n, 1 << (log_n - 1), levels)
    assert p.security == 128
    assert p.log_qp <= bound
    assert len(p.q) == levels + 1 and len(p.p) >= 1
    assert all(q % (2 * p.n) == 1 for q in p.q + p.p), "NTT-friendly primes"
    assert p.alpha * p.beta >= len(p.q)
    assert p.default_scale == 2.0**40
    assert "128-bit" in repr(p)


def test_insecure_presets_are_marked() -> None:
    for preset, log_n in [(ckks.INSECURE_LOGN10, 10), (ckks.INSECURE_LOGN12, 12)]:
        p = preset()
        assert p.log_n == log_n and p.security == 0
        assert "INSECURE" in repr(p)
        assert "NO SECURITY" in (preset.__doc__ or "")


def test_literal_builds_the_preset() -> None:
    p = ckks.CkksParameters(13, [49, 40, 40, 40], [49], 40)
    assert p == ckks.PN13_QP218() and hash(p) == hash(ckks.PN13_QP218())
    assert p.log_q == (49, 40, 40, 40) and p.log_p == (49,) and p.digits is None
    assert p != ckks.PN14_QP438()


def test_insecure_literals_are_refused() -> None:
    with pytest.raises(ParameterError, match="insecure"):
        ckks.CkksParameters(14, [60] * 8, [60], 40)  # 540 > 438 bits
    with pytest.raises(ParameterError, match="insecure"):
        ckks.CkksParameters(13, [49, 40, 40, 40], [49], 40, security=192)
    with pytest.raises(ParameterError):
        ckks.CkksParameters(10, [50, 35], [50], 35)  # logN = 10 only for test presets
    with pytest.raises(ParameterError):
        ckks.CkksParameters(13, [49, 40], [49], 40, security=0)  # the insecure level


def test_higher_security_levels() -> None:
    p = ckks.CkksParameters(14, [50, 40, 40, 40, 40], [50], 40, security=192)
    assert p.security == 192 and p.max_level == 4


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(log_n=17, log_q=[50, 40], log_p=[50], log_scale=40),
        dict(log_n=13, log_q=[], log_p=[50], log_scale=40),
        dict(log_n=13, log_q=[40, 40], log_p=[50], log_scale=40),  # base prime ≤ scale
        dict(log_n=13, log_q=[50, 40], log_p=[50], log_scale=5),
        dict(log_n=13, log_q=[50, 40], log_p=[50], log_scale=40, digits=0),
        dict(log_n=13, log_q=[50, 40], log_p=[50], log_scale=40, digits=3),
        dict(log_n=13, log_q=[50, 40], log_p=[50], log_scale=40, security=100),
        dict(log_n=-1, log_q=[50, 40], log_p=[50], log_scale=40),
        dict(log_n=13, log_q=[50, -40], log_p=[50], log_scale=40),
        dict(log_n=13, log_q=[50, 400], log_p=[50], log_scale=40),
        dict(log_n=13.5, log_q=[50, 40], log_p=[50], log_scale=40),
        dict(log_n=13, log_q="50", log_p=[50], log_scale=40),
        dict(log_n=13, log_q=[50, 40], log_p=[50], log_scale=40, security=2**40),
        dict(log_n=13, log_q=[62, 40], log_p=[62], log_scale=40),  # primes above 61 bits
        dict(log_n=13, log_q=[50, 40, 40, 40], log_p=[20], log_scale=40, digits=1),  # P too small
    ],
)
def test_malformed_literals(kwargs: dict) -> None:
    with pytest.raises(ParameterError):
        ckks.CkksParameters(**kwargs)


def test_parameters_without_special_primes_refuse_key_switching_keys() -> None:
    params = ckks.CkksParameters(log_n=13, log_q=[50, 40], log_p=[], log_scale=40)
    kg = ckks.KeyGenerator(params)
    for make in (kg.public_key, kg.relin_key, lambda: kg.galois_keys([1])):
        with pytest.raises(ParameterError, match="special primes"):
            make()


def test_parameter_error_is_value_error() -> None:
    assert issubclass(ParameterError, ValueError)


def test_explicit_digits() -> None:
    p = ckks.CkksParameters(13, [49, 40, 40, 40], [49], 40, digits=4)
    assert (p.alpha, p.beta, p.digits) == (1, 4, 4)


def test_galois_elements() -> None:
    p = ckks.INSECURE_LOGN10()
    assert p.rotation_galois_element(0) == 1
    assert p.rotation_galois_element(1) == 5
    assert p.rotation_galois_element(2) == 25
    assert p.rotation_galois_element(-1) == p.rotation_galois_element(p.slots - 1)
    assert p.rotation_galois_element(10**30) == p.rotation_galois_element(10**30 % p.slots)
    assert p.conjugation_galois_element() == 2 * p.n - 1


@pytest.mark.parametrize("preset", [ckks.PN13_QP218, ckks.PN14_QP438, ckks.PN15_QP881])
def test_bytes_round_trip(preset) -> None:
    p = preset()
    q = ckks.CkksParameters.from_bytes(p.to_bytes())
    assert q == p and q.q == p.q and q.p == p.p and q.log_scale == p.log_scale


def test_insecure_bytes_need_opt_in() -> None:
    b = ckks.INSECURE_LOGN12().to_bytes()
    with pytest.raises(SerializationError, match="insecure"):
        ckks.CkksParameters.from_bytes(b)
    assert ckks.CkksParameters.from_bytes(b, allow_insecure=True) == ckks.INSECURE_LOGN12()


def test_wire_format_is_frozen() -> None:
    """Changing the parameter encoding or the id derivation must be a deliberate act."""
    b = ckks.PN13_QP218().to_bytes()
    assert b[:4] == b"HEIN"
    assert int.from_bytes(b[8:16], "little") == ckks.PN13_QP218().id
    digest = hashlib.sha256(b).hexdigest()
    assert digest == GOLDEN_PN13_SHA256, digest


# format version 2 (seeds under AES-256-CTR); version 1 was 2647965774b18773…
GOLDEN_PN13_SHA256 = "b0fa3799c93f210354291154558f1b32a5c955306f8f38a47b24e0dfc3098d10"


def test_params_from_bad_bytes() -> None:
    good = ckks.PN13_QP218().to_bytes()
    for bad in [b"", b"HEIN", good[:-1], good + b"\0", b"XXXX" + good[4:]]:
        with pytest.raises(SerializationError):
            ckks.CkksParameters.from_bytes(bad)
    with pytest.raises(TypeError):
        ckks.CkksParameters.from_bytes("not bytes")  # type: ignore[arg-type]
