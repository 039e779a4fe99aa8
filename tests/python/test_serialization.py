"""Serialization: round trips of every object, and hostile bytes (truncated, corrupted,
bit-flipped, oversized, wrong kind, wrong parameters) that must raise, never crash."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import Kit, assert_precision
from heinfer import HeinferError, ParameterError, SerializationError, ckks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KINDS = ["plaintext", "ciphertext", "seeded", "size3", "secret", "public", "relin", "galois"]


def make(kit: Kit, kind: str):  # type: ignore[no-untyped-def]
    """(object, class) of each serializable kind."""
    x = kit.vector(1)
    ct = kit.encrypt(x)
    return {
        "plaintext": (kit.enc.encode(x), ckks.Plaintext),
        "ciphertext": (ct, ckks.Ciphertext),
        "seeded": (kit.kg.encrypt_symmetric(kit.enc.encode(x, level=1)), ckks.Ciphertext),
        "size3": (kit.ev.mul(ct, ct), ckks.Ciphertext),
        "secret": (kit.kg.secret_key, ckks.SecretKey),
        "public": (kit.pk, ckks.PublicKey),
        "relin": (kit.rlk, ckks.RelinKey),
        "galois": (kit.gks, ckks.GaloisKeys),
    }[kind]


@pytest.fixture(scope="module")
def blobs(kit10: Kit) -> dict[str, tuple[bytes, type]]:
    out = {}
    for kind in KINDS:
        obj, cls = make(kit10, kind)
        out[kind] = (obj.to_bytes(), cls)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip(kit10: Kit, blobs, kind: str) -> None:
    data, cls = blobs[kind]
    obj = cls.from_bytes(kit10.params, data)
    assert obj.to_bytes() == data
    assert obj.params_id == kit10.params.id and obj.params == kit10.params
    assert data[:4] == b"HEIN"
    # also accepted as bytearray / memoryview
    assert cls.from_bytes(kit10.params, bytearray(data)).to_bytes() == data
    assert cls.from_bytes(kit10.params, memoryview(data)).to_bytes() == data


def test_decoded_objects_work(kit10: Kit, blobs) -> None:
    p, x = kit10.params, kit10.vector(1)
    sk = ckks.SecretKey.from_bytes(p, blobs["secret"][0])
    pk = ckks.PublicKey.from_bytes(p, blobs["public"][0])
    rlk = ckks.RelinKey.from_bytes(p, blobs["relin"][0])
    gks = ckks.GaloisKeys.from_bytes(p, blobs["galois"][0])
    dec = ckks.Decryptor(p, sk)
    ct = ckks.Ciphertext.from_bytes(p, blobs["ciphertext"][0])
    assert_precision("decoded ct", kit10.enc.decode(dec.decrypt(ct)), x, 19.0)
    seeded = ckks.Ciphertext.from_bytes(p, blobs["seeded"][0])
    assert seeded.is_seed_compressed and seeded.level == 1
    assert_precision("decoded seeded ct", kit10.enc.decode(dec.decrypt(seeded)), x, 19.0)
    size3 = ckks.Ciphertext.from_bytes(p, blobs["size3"][0])
    assert size3.size == 3
    r = kit10.ev.rescale(kit10.ev.relinearize(size3, rlk))
    assert_precision("decoded size3 + decoded rlk", kit10.enc.decode(dec.decrypt(r)), x * x, 14.0)
    fresh = ckks.Encryptor(p, pk).encrypt(kit10.enc.encode(x))
    rot = kit10.ev.rotate(fresh, 1, gks)
    assert_precision("decoded pk + gks", kit10.enc.decode(dec.decrypt(rot)), np.roll(x, -1), 18.0)
    kg2 = ckks.KeyGenerator.from_secret_key(p, sk)
    assert kg2.secret_key.to_bytes() == blobs["secret"][0]
    pt = ckks.Plaintext.from_bytes(p, blobs["plaintext"][0])
    assert_precision("decoded pt", kit10.enc.decode(pt), x, 25.0)


def test_galois_keys_bytes_are_serialized_fresh_keys(kit10: Kit) -> None:
    p, x = kit10.params, kit10.vector(3)
    data = kit10.kg.galois_keys_bytes([1, -2, 1], conjugate=True)
    assert len(data) == len(kit10.kg.galois_keys([1, -2], conjugate=True).to_bytes())
    gks = ckks.GaloisKeys.from_bytes(p, data)
    ct = kit10.encryptor.encrypt(kit10.enc.encode(x))
    for k in (1, -2):
        rot = kit10.ev.rotate(ct, k, gks)
        assert_precision(f"rotate {k}", kit10.enc.decode(kit10.decryptor.decrypt(rot)), np.roll(x, -k), 18.0)


def test_seed_compression_halves_the_size(kit10: Kit) -> None:
    pt = kit10.enc.encode(kit10.vector(2))
    full = len(kit10.encryptor.encrypt(pt).to_bytes())
    seeded = len(kit10.kg.encrypt_symmetric(pt).to_bytes())
    assert seeded < 0.6 * full


@pytest.mark.parametrize("kind", KINDS)
def test_truncated_and_padded(kit10: Kit, blobs, kind: str) -> None:
    data, cls = blobs[kind]
    for cut in sorted({0, 1, 4, 15, 16, 17, len(data) // 2, len(data) - 1}):
        with pytest.raises(SerializationError):
            cls.from_bytes(kit10.params, data[:cut])
    with pytest.raises(SerializationError):
        cls.from_bytes(kit10.params, data + b"\0")


@pytest.mark.parametrize("kind", KINDS)
def test_corrupted_header(kit10: Kit, blobs, kind: str) -> None:
    data, cls = blobs[kind]
    for pos in range(16):  # magic, version, kind, flags, params id
        if pos == 7:
            continue  # flags byte: some flag values are legal
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        with pytest.raises(SerializationError):
            cls.from_bytes(kit10.params, bytes(bad))


@pytest.mark.parametrize("kind", KINDS)
def test_bit_flips_never_crash(kit10: Kit, blobs, kind: str) -> None:
    data, cls = blobs[kind]
    rng = np.random.default_rng(0)
    for pos in rng.integers(0, len(data), 40):
        bad = bytearray(data)
        bad[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            cls.from_bytes(kit10.params, bytes(bad))
        except SerializationError:
            pass  # a flip inside a residue may still decode: both outcomes are fine


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "secret"])
def test_size_limit(kit10: Kit, blobs, kind: str) -> None:
    data, cls = blobs[kind]
    with pytest.raises(SerializationError):
        cls.from_bytes(kit10.params, data, max_bytes=len(data) - 1)
    assert cls.from_bytes(kit10.params, data, max_bytes=len(data)).to_bytes() == data
    for bad in (0, -1, 2**31):
        with pytest.raises(SerializationError):
            cls.from_bytes(kit10.params, data, max_bytes=bad)


def test_wrong_kind(kit10: Kit, blobs) -> None:
    classes = {cls for _, cls in blobs.values()}
    for data, cls in blobs.values():
        for other in classes - {cls}:
            with pytest.raises(SerializationError):
                other.from_bytes(kit10.params, data)
        with pytest.raises(SerializationError):
            ckks.CkksParameters.from_bytes(data)
    with pytest.raises(SerializationError):
        ckks.Ciphertext.from_bytes(kit10.params, kit10.params.to_bytes())


def test_wrong_params(kit10: Kit, kit12: Kit, blobs) -> None:
    for data, cls in blobs.values():
        with pytest.raises((SerializationError, ParameterError)):
            cls.from_bytes(kit12.params, data)


def test_bad_argument_types(kit10: Kit, blobs) -> None:
    with pytest.raises(TypeError):
        ckks.Ciphertext.from_bytes(kit10.params, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ckks.Ciphertext.from_bytes("params", blobs["ciphertext"][0])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ckks.ExtendedCiphertext.from_bytes(kit10.params, b"")
    ext = kit10.ev.rotate_hoisted_extended(kit10.encrypt(kit10.vector(3)), [1], kit10.gks)[0]
    with pytest.raises(TypeError):
        ext.to_bytes()


# ---------------------------------------------------------------------- fuzzing
_FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FUZZ
@given(data=st.binary(max_size=4096), kind=st.sampled_from(KINDS))
def test_random_bytes(kit10: Kit, blobs, data: bytes, kind: str) -> None:
    cls = blobs[kind][1]
    with pytest.raises(HeinferError):
        cls.from_bytes(kit10.params, data)


@_FUZZ
@given(
    kind=st.sampled_from(KINDS),
    edits=st.lists(st.tuples(st.integers(0, 2**32), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.one_of(st.none(), st.integers(0, 2**32)),
)
def test_mutated_bytes(
    kit10: Kit, blobs, kind: str, edits: list[tuple[int, int]], cut: int | None
) -> None:
    data, cls = blobs[kind]
    bad = bytearray(data)
    for pos, val in edits:
        bad[pos % len(bad)] = val
    if cut is not None:
        bad = bad[: cut % (len(bad) + 1)]
    try:
        obj = cls.from_bytes(kit10.params, bytes(bad))
    except SerializationError:
        return
    assert obj.to_bytes() == bytes(bad)  # whatever decodes is a valid object


@settings(max_examples=60, deadline=None)
@given(edits=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), min_size=1, max_size=4))
def test_mutated_params(edits: list[tuple[int, int]]) -> None:
    bad = bytearray(ckks.PN13_QP218().to_bytes())
    for pos, val in edits:
        bad[pos % len(bad)] = val
    try:
        p = ckks.CkksParameters.from_bytes(bytes(bad))
    except (SerializationError, ParameterError):
        return
    assert p.to_bytes() == bytes(bad)
