"""The size of the native worker pool shared by every heinfer operation."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from heinfer import _native

__all__ = ["set_num_threads", "get_num_threads", "parallel_map"]

T = TypeVar("T")
R = TypeVar("R")
_POOL: ThreadPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()


def set_num_threads(n: int) -> None:
    """Use ``n`` worker threads (``n ≥ 1``) for every later operation.

    The default is every core (or ``RAYON_NUM_THREADS`` when set). Operations release the
    GIL while they run, so Python threads can drive several operations at once; each one is
    parallelized over the RNS limbs on this pool. With ``n = 1`` the calling thread runs each
    operation itself (no hand-over to a worker thread), one operation at a time across all
    Python threads. Raises ``ValueError`` for ``n < 1``.
    """
    _native.set_num_threads(operator.index(n))


def get_num_threads() -> int:
    """The number of worker threads currently used."""
    return _native.get_num_threads()


def parallel_map(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[fn(x) for x in items]``, run by :func:`get_num_threads` Python threads when there are
    several (one shared pool). For loops of independent native operations on small objects —
    one ciphertext each — that each use the cores poorly on their own (a ciphertext has only a
    few RNS limbs to spread): they release the GIL, so threads overlap them. Order is kept; the
    first exception raised by ``fn`` propagates."""
    global _POOL, _POOL_SIZE
    items = list(items)
    n = get_num_threads()
    if n < 2 or len(items) < 2:
        return [fn(x) for x in items]
    with _POOL_LOCK:
        if _POOL is None or _POOL_SIZE != n:
            if _POOL is not None:
                _POOL.shutdown(wait=False)
            _POOL, _POOL_SIZE = ThreadPoolExecutor(max_workers=n, thread_name_prefix="heinfer-map"), n
        pool = _POOL
    return list(pool.map(fn, items))
