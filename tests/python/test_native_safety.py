"""The native module's safety net and the binding additions the protocol needs.

* A Rust panic arrives as ``heinfer.errors.InternalError`` (a ``HeinferError``), never as
  pyo3's ``PanicException`` (a ``BaseException`` that ``except Exception`` misses).
* Batch messages with forged counts are refused before anything is allocated for them.
* ``CiphertextBatch.from_list`` / ``to_list`` / ``__getitem__``.
* ``Params.*_wire_bytes`` equal the lengths of real serializations.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from heinfer import _native
from heinfer.errors import (
    HeinferError,
    InternalError,
    LevelError,
    OperandError,
    ParameterError,
    SerializationError,
)

MAX = _native.DEFAULT_MAX_BYTES


@pytest.fixture(scope="module")
def tools():
    p = _native.Params.preset("INSECURE_LOGN10")
    kg = _native.KeyGenerator(p)
    enc = _native.Encoder(p)
    encryptor = _native.Encryptor(p, kg.public_key())
    ev = _native.Evaluator(p)
    return p, kg, enc, encryptor, ev


def _ct(tools, value: float, level: int):
    p, _, enc, encryptor, ev = tools
    pt = enc.encode_real(np.full(4, value), p.default_scale, p.max_level, False)
    return ev.drop_to_level(encryptor.encrypt(pt), level)


@pytest.mark.parametrize("site", ["parallel", "closure", "guard"])
def test_a_panic_arrives_as_internal_error(site: str) -> None:
    with pytest.raises(InternalError, match=r"internal error in _panic_for_tests") as info:
        _native._panic_for_tests(site)
    assert isinstance(info.value, HeinferError) and isinstance(info.value, Exception)
    # an ordinary handler catches it, and the pool still works afterwards
    try:
        _native._panic_for_tests(site)
    except Exception as e:  # noqa: BLE001 - the point of the test
        assert type(e) is InternalError
    assert _native.get_num_threads() >= 1


def test_the_pool_survives_a_panic(tools) -> None:
    p, _, enc, _, ev = tools
    with pytest.raises(InternalError):
        _native._panic_for_tests("parallel")
    ct = _ct(tools, 0.5, 1)
    assert ev.add(ct, ct).level == 1


def test_forged_batch_counts_are_refused(tools) -> None:
    p = tools[0]
    good = _native.CiphertextBatch.from_list([_ct(tools, 0.1, 0), _ct(tools, 0.2, 0)]).to_bytes()
    for count in (2**32 - 1, 2**28, 1000):
        forged = good[:6] + struct.pack("<I", count) + good[10:]
        with pytest.raises(SerializationError, match="cannot fit"):
            _native.CiphertextBatch.from_bytes(p, forged, MAX, 2**40)
    forged = good[:6] + struct.pack("<I", 3) + good[10:]
    with pytest.raises(SerializationError, match="truncated"):
        _native.CiphertextBatch.from_bytes(p, forged, MAX, 2**40)
    assert len(_native.CiphertextBatch.from_bytes(p, good, MAX, 2)) == 2


def test_batches_decode_from_bytes_or_read_only_buffers_only(tools) -> None:
    p = tools[0]
    good = _native.CiphertextBatch.from_list([_ct(tools, 0.1, 0), _ct(tools, 0.2, 0)]).to_bytes()
    want = _native.CiphertextBatch.from_bytes(p, good, MAX, 2).to_bytes()
    view = np.frombuffer(good, np.uint8)  # read-only: what a Ray actor receives
    assert not view.flags.writeable
    inside = memoryview(b"head" + good + b"tail")[4:-4]  # a message's field, read in place
    for ok in (view, inside):
        assert _native.CiphertextBatch.from_bytes(p, ok, MAX, 2).to_bytes() == want
        assert _native.CiphertextBatch.check_bytes(p, ok, MAX, 2)[:3] == (2, 0, 2)
    writeable = np.frombuffer(bytearray(good), np.uint8)
    strided = np.frombuffer(good + good, np.uint8)[::2]
    bad_views = (memoryview(bytearray(good)), memoryview(good + good)[::2], memoryview(view.astype(np.int16)))
    for bad in (writeable, strided, bytearray(good), view.astype(np.int16), view.reshape(1, -1), "text", *bad_views):
        for fn in (_native.CiphertextBatch.from_bytes, _native.CiphertextBatch.check_bytes):
            with pytest.raises((OperandError, TypeError)):
                fn(p, bad, MAX, 2)


def test_to_bytes_writes_after_a_frame(tools) -> None:
    """``to_bytes(frame=f)`` is ``f(n) + to_bytes()`` (n: the batch's bytes), rounded or not;
    a frame that does not return bytes, or raises, fails the call."""
    p = tools[0]
    batch = _native.CiphertextBatch.from_list([_ct(tools, 0.1, 0), _ct(tools, 0.2, 0), _ct(tools, 0.3, 0)])
    seen = []

    def frame(n: int) -> bytes:
        seen.append(n)
        return b"header:" + str(n).encode()

    for args, kw in [((), {}), ((1, 3), {}), ((0, 2), {"drop_bits": p.rounding_drop_bits(0, 2, 1e-3)})]:
        plain = batch.to_bytes(*args, **kw)
        assert batch.to_bytes(*args, **kw, frame=frame) == b"header:%d" % len(plain) + plain
        assert seen[-1] == len(plain)
    with pytest.raises(TypeError, match="frame must return bytes"):
        batch.to_bytes(frame=lambda n: "text")
    with pytest.raises(ZeroDivisionError):
        batch.to_bytes(frame=lambda n: 1 // 0)


def test_to_bytes_sets_every_byte_of_memory_that_held_garbage(tools) -> None:
    """The batch is written into a new ``bytes`` that is not zeroed first: every byte must be
    the batch's. Built independently (header, each ciphertext's length and own
    serialization) and compared after the allocator was handed blocks of the same size full
    of 0xAB (which it reuses), with and without a frame, many times."""
    cts = [_ct(tools, 0.1 * (i + 1), 0) for i in range(40)]
    batch = _native.CiphertextBatch.from_list(cts)
    want = b"HEBT" + struct.pack("<HI", 1, len(cts)) + b"".join(struct.pack("<I", len(b)) + b for b in (c.to_bytes() for c in cts))
    head = b"frame!"
    for _ in range(20):
        for size in (len(want), len(want) + len(head)):
            garbage = [bytearray(b"\xab" * size) for _ in range(4)]
            del garbage
        assert batch.to_bytes() == want
        assert batch.to_bytes(frame=lambda n: head) == head + want


def test_from_list_to_list_and_indexing(tools) -> None:
    p, kg, enc, encryptor, ev = tools
    cts = [_ct(tools, v, 1) for v in (0.1, 0.2, 0.3)]
    batch = _native.CiphertextBatch.from_list(cts)
    assert (len(batch), batch.level, batch.size) == (3, 1, 2)
    out = batch.to_list()
    assert [c.to_bytes() for c in out] == [c.to_bytes() for c in cts]
    assert batch[0].to_bytes() == cts[0].to_bytes()
    assert batch[-1].to_bytes() == cts[2].to_bytes()
    assert len(list(batch)) == 3  # iteration through __getitem__ stops at IndexError
    with pytest.raises(IndexError):
        batch[3]
    with pytest.raises(IndexError):
        batch[-4]
    # copies: changing one does not change the batch
    out[0].set_scale(out[0].scale * 2)
    assert batch[0].scale == cts[0].scale

    with pytest.raises(OperandError, match="at least one"):
        _native.CiphertextBatch.from_list([])
    with pytest.raises(OperandError, match="level"):
        _native.CiphertextBatch.from_list([cts[0], _ct(tools, 0.4, 0)])
    with pytest.raises(OperandError):
        _native.CiphertextBatch.from_list([cts[0], ev.square(cts[1])])
    scaled = cts[1].clone()
    scaled.set_scale(scaled.scale * 3)
    with pytest.raises(OperandError, match="scale"):
        _native.CiphertextBatch.from_list([cts[0], scaled])
    other = _native.Params.preset("INSECURE_LOGN12")
    kg12 = _native.KeyGenerator(other)
    pt12 = _native.Encoder(other).encode_real(np.zeros(2), other.default_scale, 0, False)
    with pytest.raises(ParameterError):
        _native.CiphertextBatch.from_list([cts[0], kg12.encrypt_symmetric(pt12)])
    assert not hasattr(batch, "with_scale")


def test_wire_sizes_match_real_serializations(tools) -> None:
    p, kg, enc, encryptor, ev = tools
    for level in range(p.max_level + 1):
        ct = _ct(tools, 0.25, level)
        assert len(ct.to_bytes()) == p.ciphertext_wire_bytes(level, 2)
        small = ct.copy() if hasattr(ct, "copy") else ct
        small.set_scale(2.0**10)  # a scale whose fourth power every level holds (products that would wrap are refused)
        assert len(ev.square(small).to_bytes()) == p.ciphertext_wire_bytes(level, 3)
        assert len(ev.square(ev.square(small)).to_bytes()) == p.ciphertext_wire_bytes(level, 5)
        for count in (1, 4):
            b = _native.CiphertextBatch.from_list([ct] * count).to_bytes()
            assert len(b) == p.batch_wire_bytes(count, level, 2)
    assert len(kg.relin_key().to_bytes()) == p.relin_key_wire_bytes()
    for steps, conj in (([], False), ([1], False), ([1, 2, -3], True)):
        keys = kg.galois_keys(steps, conj)
        assert len(keys.to_bytes()) == p.galois_keys_wire_bytes(len(keys))
    # a seed-compressed ciphertext is smaller than the bound
    pt = enc.encode_real(np.ones(2), p.default_scale, 1, False)
    assert len(kg.encrypt_symmetric(pt).to_bytes()) < p.ciphertext_wire_bytes(1, 2)

    with pytest.raises(LevelError):
        p.ciphertext_wire_bytes(p.max_level + 1, 2)
    with pytest.raises(OperandError):
        p.ciphertext_wire_bytes(0, 6)
    with pytest.raises(OperandError):
        p.batch_wire_bytes(0, 0, 2)
    with pytest.raises(OperandError):
        p.galois_keys_wire_bytes(p.n)
    no_p = _native.Params(13, [40, 30], [], 30)
    with pytest.raises(ParameterError):
        no_p.relin_key_wire_bytes()


def test_to_list_copies_or_moves() -> None:
    """``CiphertextBatch.to_list``: in order; copies by default (the batch is unchanged),
    ``consume=True`` moves the ciphertexts out and leaves the batch empty."""
    p = _native.Params(11, [27, 27], [], 20, None, 128)
    kg = _native.KeyGenerator(p)
    rows = np.arange(3 * 8, dtype=np.float64).reshape(3, 8) / 24
    batch = _native.encrypt_batch_coefficients(kg, rows, 2.0**12, 1)
    want = batch.to_bytes()
    copies = batch.to_list()
    assert len(batch) == 3 and _native.CiphertextBatch.from_list(copies).to_bytes() == want
    moved = batch.to_list(consume=True)
    assert len(batch) == 0 and _native.CiphertextBatch.from_list(moved).to_bytes() == want
    with pytest.raises(OperandError):
        batch.level  # nothing left to describe


def test_concat_copies_or_moves_and_refuses_mixed_batches() -> None:
    """``CiphertextBatch.concat``: in order; ``consume=True`` moves the ciphertexts (the inputs
    are left empty), the default copies; batches of other levels or scales are refused."""
    p = _native.Params(11, [27, 27], [], 20, None, 128)
    kg = _native.KeyGenerator(p)
    rows = np.arange(5 * 8, dtype=np.float64).reshape(5, 8) / 40
    whole = _native.encrypt_batch_coefficients(kg, rows, 2.0**12, 1)
    parts = [_native.CiphertextBatch.from_list(whole.to_list()[:2]), _native.CiphertextBatch.from_list(whole.to_list()[2:])]
    copied = _native.CiphertextBatch.concat(parts)
    assert copied.to_bytes() == whole.to_bytes() and [len(b) for b in parts] == [2, 3]
    moved = _native.CiphertextBatch.concat(parts, consume=True)
    assert moved.to_bytes() == whole.to_bytes() and [len(b) for b in parts] == [0, 0]
    other_level = _native.encrypt_batch_coefficients(kg, rows, 2.0**12, 0)
    with pytest.raises(OperandError, match="different levels"):
        _native.CiphertextBatch.concat([whole, other_level])
    with pytest.raises(OperandError, match="empty"):
        _native.CiphertextBatch.concat(parts)
