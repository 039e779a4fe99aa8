"""Batches joined at the byte level (no Ray needed): a range of a joined batch is the batch
the engine serializes for that range."""

from __future__ import annotations

import numpy as np
import pytest

from heinfer import _native
from heinfer.cluster.wire import join_batches


def test_a_range_of_a_joined_batch_is_the_engines_batch_of_that_range() -> None:
    params = _native.Params(11, [42], [], 41, None, 128)
    kg = _native.KeyGenerator(params)
    batch = _native.encrypt_batch_coefficients(kg, np.random.default_rng(0).uniform(-1, 1, (7, 16)), 2.0**20, 0)
    parts = [batch.to_bytes(0, 3), batch.to_bytes(3, 7)]
    joined = join_batches(params, parts, 7)
    assert joined.to_bytes() == batch.to_bytes() and len(joined) == 7
    for start, stop in [(0, 1), (2, 5), (6, 7), (0, 7), (1, 7)]:
        assert joined.to_bytes(start, stop) == batch.to_bytes(start, stop), (start, stop)
    for bad in [(3, 3), (5, 2), (0, 8), (-1, 2)]:
        with pytest.raises(IndexError):
            joined.to_bytes(*bad)
    # after a message header (frame): the same bytes behind it, whole or cut
    for start, stop in [(0, 7), (2, 5)]:
        want = batch.to_bytes(start, stop)
        assert joined.to_bytes(start, stop, frame=lambda n: b"h%d:" % n) == b"h%d:" % len(want) + want


def test_a_batch_the_workers_rounded_travels_as_is_and_decodes_with_its_rounding() -> None:
    params = _native.Params(11, [42], [], 41, None, 128)
    kg = _native.KeyGenerator(params)
    # an evaluated batch (not seed-compressed), as a worker returns
    batch = _native.encrypt_batch_coefficients(kg, np.random.default_rng(1).uniform(-1, 1, (5, 16)), 2.0**20, 0)
    batch = _native.CiphertextBatch.from_bytes(params, batch.to_bytes(), 1 << 30, 5)
    drop = params.rounding_drop_bits(0, 2, 2.0**12)
    parts = [batch.to_bytes(0, 2, drop_bits=drop), batch.to_bytes(2, 5, drop_bits=drop)]
    joined = join_batches(params, parts, 5, drop)
    assert joined.to_bytes(drop_bits=drop) == batch.to_bytes(drop_bits=drop)
    assert joined.to_bytes(1, 4, drop_bits=drop) == batch.to_bytes(1, 4, drop_bits=drop)
    # asked for another rounding (none): decoded with the workers' bound, serialized again
    again = joined.to_bytes()
    assert len(again) > len(joined.to_bytes(drop_bits=drop)) and len(joined) == 5
    with pytest.raises(Exception, match="only full ones"):  # rounded bytes need the bound
        join_batches(params, parts, 5).decoded()
