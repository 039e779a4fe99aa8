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
