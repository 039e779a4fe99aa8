"""The size of the native worker pool shared by every heinfer operation."""

from __future__ import annotations

import operator

from heinfer import _native

__all__ = ["set_num_threads", "get_num_threads"]


def set_num_threads(n: int) -> None:
    """Use ``n`` worker threads (``n ≥ 1``) for every later operation.

    The default is every core (or ``RAYON_NUM_THREADS`` when set). Operations release the
    GIL while they run, so Python threads can drive several operations at once; each one is
    parallelized over the RNS limbs on this pool. Raises ``ValueError`` for ``n < 1``.
    """
    _native.set_num_threads(operator.index(n))


def get_num_threads() -> int:
    """The number of worker threads currently used."""
    return _native.get_num_threads()
