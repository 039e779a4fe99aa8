"""How much of the machine other work took while something was timed.

Layer: ``heinfer.runtime`` (standard library only). A cost table measured beside another job
prices every kernel too high: one measured while the test suite ran predicted 110.6 ms for
a CryptoNets plan that runs in 59.5 ms, and the cache then served it to every later compile.
:class:`OthersLoad` measures what the rest of the machine used over an interval, so that
:func:`heinfer.runtime.costs.measure_costs` can tell such a table from a quiet one.

What it counts (Linux): the busy time of all CPUs from the first line of ``/proc/stat`` —
user, nice, system, irq, softirq and *steal* (time a hypervisor gave to other guests, the
usual noise of a shared VM) — minus this process's own CPU time (:func:`os.times`, all its
threads and the children it has waited for), divided by the wall-clock time. The result is in cores: 1.0 means another job
kept one CPU busy for the whole interval. Both counters tick at ``1 / CLK_TCK`` s (10 ms), so
readings are discounted by two ticks: an interval shorter than a second reads low. Where
``/proc/stat`` cannot be read the reading is ``None``: unknown, not zero.
"""

from __future__ import annotations

import os
import time

__all__ = ["OthersLoad", "machine_busy_seconds"]


def machine_busy_seconds() -> float | None:
    """CPU-seconds all CPUs have spent busy since boot (steal included), or ``None`` where
    ``/proc/stat`` is missing or not in the expected form."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if len(fields) < 9 or fields[0] != "cpu" or ticks <= 0:
        return None
    try:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    except ValueError:
        return None
    return (user + nice + system + irq + softirq + steal) / ticks


def _own_seconds() -> float:
    """CPU-seconds of this process and of its children it has waited for (a benchmark's
    runner subprocesses are its own work, not other work)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OthersLoad:
    """A context manager: ``cores`` is the average number of CPUs that work other than this
    process (and its waited-for children) kept busy between ``__enter__`` and ``__exit__``
    (``None`` when unknown); :meth:`so_far` reads it before the end.

    >>> with OthersLoad() as load:
    ...     pass
    >>> load.cores is None or load.cores >= 0.0
    True
    """

    def __init__(self) -> None:
        self.cores: float | None = None
        self._start: tuple[float | None, float, float] | None = None

    def start(self) -> OthersLoad:
        """Starts the interval (what ``__enter__`` does; for an interval that lasts as long as
        the process, as a benchmark's whole run)."""
        self._start = (machine_busy_seconds(), _own_seconds(), time.perf_counter())
        return self

    def __enter__(self) -> OthersLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cores = self.so_far()

    def so_far(self) -> float | None:
        """The average CPUs other work kept busy from the start (``__enter__`` or
        :meth:`start`) until now."""
        if self._start is None:
            raise RuntimeError("OthersLoad.so_far() before the interval was started")
        busy, own, wall = machine_busy_seconds(), _own_seconds(), time.perf_counter()
        busy0, own0, wall0 = self._start
        if busy is None or busy0 is None or wall <= wall0:
            return None
        # each counter may have ticked once more or less than the time it covers: an
        # interval of milliseconds would read whole cores of noise without this allowance
        slack = 2.0 / os.sysconf("SC_CLK_TCK")
        return max((busy - busy0) - (own - own0) - slack, 0.0) / (wall - wall0)
