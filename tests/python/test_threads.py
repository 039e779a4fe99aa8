"""Threads: the pool size does not change results, and the GIL is released during work."""

from __future__ import annotations

import threading
import time

import heinfer
import numpy as np
import pytest
from conftest import Kit, assert_precision


def _pipeline(k: Kit, cx, cy):  # type: ignore[no-untyped-def]
    ev = k.ev
    s = ev.add(ev.rescale(ev.mul_relin(cx, cy, k.rlk)), ev.rescale(ev.mul_const(cx, 0.5)))
    return [s, *ev.rotate_hoisted(s, [1, 2, -1], k.gks), ev.conjugate(s, k.gks)]


def test_set_and_get(restore_threads) -> None:
    heinfer.set_num_threads(1)
    assert heinfer.get_num_threads() == 1
    heinfer.set_num_threads(2)
    assert heinfer.get_num_threads() == 2
    for bad in (0, -1, 10**6):
        with pytest.raises(ValueError):
            heinfer.set_num_threads(bad)
    with pytest.raises(TypeError):
        heinfer.set_num_threads(1.5)  # type: ignore[arg-type]
    assert heinfer.get_num_threads() == 2


def test_thread_count_does_not_change_results(kit12: Kit, restore_threads) -> None:
    x, y = kit12.vector(1), kit12.vector(2)
    cx, cy = kit12.encrypt(x), kit12.encrypt(y)
    outs = {}
    for n in (1, 2):
        heinfer.set_num_threads(n)
        outs[n] = _pipeline(kit12, cx, cy)
    for a, b in zip(outs[1], outs[2], strict=True):
        # evaluation is deterministic: identical ciphertexts, hence identical decryptions
        assert a.to_bytes() == b.to_bytes()
        assert np.array_equal(kit12.decrypt(a), kit12.decrypt(b))
    assert_precision("pipeline", kit12.decrypt(outs[1][0]), x * y + 0.5 * x, 15.0)


@pytest.mark.parametrize("n", [1, 2])
def test_concurrent_python_threads(kit12: Kit, restore_threads, n: int) -> None:
    """Several Python threads drive the evaluator at once; every result is right (on one
    thread each caller runs its calls on its own one-thread pool, one call at a time)."""
    heinfer.set_num_threads(n)
    x = kit12.vector(3)
    ct = kit12.encrypt(x)
    results: dict[int, np.ndarray] = {}

    def work(k_: int) -> None:
        results[k_] = kit12.decrypt(kit12.ev.rotate(ct, k_, kit12.gks))

    threads = [threading.Thread(target=work, args=(k_,)) for k_ in (1, 2, 3, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k_, out in results.items():
        assert_precision(f"thread rotate {k_}", out, np.roll(x, -k_), 18.0)
    assert len(results) == 4


def test_gil_is_released(kit13: Kit, restore_threads) -> None:
    """While one long native call runs in a worker thread, a pure-Python loop keeps running.

    If the call held the GIL, the loop could not take a single step between the call's start
    and end (apart from at most one switch interval). We measure the span of the loop's
    timestamps inside the call's window: no fixed timing threshold, only a ratio.
    """
    heinfer.set_num_threads(1)  # leave a core for the Python loop
    # 160 Galois keys at logN=13 in one call: 40 took 44 ms on a quiet AMD EPYC (too short to
    # tell), so the call is made long enough for any machine
    steps = list(range(1, 161))
    window: list[float] = []
    done = threading.Event()

    def heavy() -> None:
        t0 = time.perf_counter()
        kit13.kg.galois_keys(steps)
        window.extend([t0, time.perf_counter()])
        done.set()

    stamps: list[float] = []
    worker = threading.Thread(target=heavy)
    worker.start()
    while not done.is_set():
        stamps.append(time.perf_counter())
    worker.join()
    t0, t1 = window
    inside = [t for t in stamps if t0 <= t <= t1]
    assert t1 - t0 > 0.05, "the native call was too short to tell"
    assert inside, "the Python loop never ran during the native call"
    coverage = (max(inside) - min(inside)) / (t1 - t0)
    assert coverage > 0.5, f"the Python loop ran during only {coverage:.0%} of the native call"


def test_parallel_map_keeps_order_and_raises_the_first_error() -> None:
    from heinfer.threads import parallel_map

    before = heinfer.get_num_threads()
    try:
        for n in (1, 2):
            heinfer.set_num_threads(n)
            assert parallel_map(lambda v: v * v, range(50)) == [v * v for v in range(50)]
            assert parallel_map(str, []) == []

            def boom(v: int) -> int:
                if v == 7:
                    raise ValueError("item 7")
                return v

            with pytest.raises(ValueError, match="item 7"):
                parallel_map(boom, range(20))
    finally:
        heinfer.set_num_threads(before)


def test_one_thread_runs_one_call_at_a_time(kit13: Kit, restore_threads) -> None:
    """With one engine thread, calls from several Python threads run one after another (each
    caller computes its own calls, on its own thread, under one lock). Two loops of calls are
    started together; each thread's CPU time is its own calls' work, so one after another the
    race lasts at least the sum of the two, while two cores would finish in about the larger.
    Other load only lengthens the race. Measured on the development VM: race / sum 1.0–1.1
    with the lock, 0.5–0.8 without it. A ratio, not a time limit."""
    heinfer.set_num_threads(1)
    ct = kit13.encrypt(kit13.vector(4))

    def loop() -> float:
        t0 = time.thread_time()
        for _ in range(20):
            kit13.ev.rotate_hoisted(ct, [1, 2, -1], kit13.gks)
        return time.thread_time() - t0

    def race() -> tuple[float, float]:
        start, cpu = threading.Barrier(2), []

        def racer() -> None:
            start.wait()
            cpu.append(loop())

        threads = [threading.Thread(target=racer) for _ in range(2)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0, sum(cpu)

    loop()  # warm-up: the caller's own pool, scratch buffers
    ratios = [wall / cpu for wall, cpu in (race() for _ in range(3))]
    assert min(ratios) > 0.9, f"races lasted {ratios} of their threads' summed CPU time: calls overlapped"


def _cpu_while_sleeping(seconds: float) -> float:
    """CPU time of the whole process (every thread) while the caller sleeps."""
    c = time.process_time()
    time.sleep(seconds)
    return time.process_time() - c


def test_a_worker_kept_awake_after_a_short_call_stops_at_the_next_call_or_its_window(kit12: Kit, restore_threads) -> None:
    """After a short call on the shared pool one worker spins for a window (the next call of a
    chain then finds it awake); it stops when the next call on the pool starts, or when the
    window ends — never a core burnt for longer."""
    from heinfer import _native

    heinfer.set_num_threads(2)
    ct = kit12.encrypt(kit12.vector(4))
    rotate = lambda: kit12.ev.rotate(ct, 1, kit12.gks)  # noqa: E731 - a key switch: the shared pool
    default = _native._set_warm_us(5_000_000)
    try:
        rotate()
        assert _cpu_while_sleeping(0.3) > 0.15  # one worker spins while nothing runs
        _native._set_warm_us(0)
        rotate()  # a new call ends the spin; with no window it starts none
        assert _cpu_while_sleeping(0.3) < 0.1
        _native._set_warm_us(100_000)
        rotate()
        assert 0.05 < _cpu_while_sleeping(0.5) < 0.3  # the window's 0.1 s, then nothing
    finally:
        _native._set_warm_us(default)


def test_the_warm_window_comes_from_the_environment() -> None:
    import os
    import subprocess
    import sys

    code = "from heinfer import _native; print(_native._set_warm_us(0))"
    run = lambda v: subprocess.run([sys.executable, "-c", code], env={**os.environ, "HEINFER_WARM_US": v}, capture_output=True, text=True)  # noqa: E731
    assert run("0").stdout.strip() == "0"
    assert run("250").stdout.strip() == "250"
    for bad in ("abc", "-1", "2000000"):
        r = run(bad)
        assert r.returncode != 0 and "HEINFER_WARM_US must be a whole number" in r.stderr
