"""The load probe counts the CPU time other processes take, and not this process's own."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from heinfer.runtime.load import OthersLoad, machine_busy_seconds

pytestmark = pytest.mark.skipif(machine_busy_seconds() is None, reason="no /proc/stat here")

BURN = "import time\nend = time.perf_counter() + {s}\nwhile time.perf_counter() < end:\n    pass\n"


def test_another_process_burning_a_core_reads_as_about_one_core() -> None:
    """Another process (here a child not yet waited for, whose time ``os.times`` does not
    count yet) keeping one CPU busy reads as about one CPU."""
    with OthersLoad() as load:
        burner = subprocess.Popen([sys.executable, "-c", BURN.format(s=3.0)])
        try:
            time.sleep(1.5)
            cores = load.so_far()
        finally:
            burner.kill()
            burner.wait()
    assert cores is not None and cores >= 0.6  # one core, less start-up and ticks


def test_this_process_burning_a_core_is_not_counted() -> None:
    with OthersLoad() as load:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:
            pass
    assert load.cores is not None and load.cores < 0.6  # not the core this process used


def test_a_few_milliseconds_do_not_read_as_whole_cores() -> None:
    with OthersLoad() as load:
        pass
    assert load.cores is not None and load.cores < 0.6


def test_a_child_this_process_waited_for_is_its_own_work() -> None:
    """A benchmark's runner subprocesses are its own work: once reaped, they are not counted."""
    with OthersLoad() as load:
        subprocess.run([sys.executable, "-c", BURN.format(s=1.5)], check=True)
        mid = load.so_far()
    assert mid is not None and mid < 0.6


def test_reading_before_the_interval_starts_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="before the interval"):
        OthersLoad().so_far()


def test_start_opens_an_interval_without_a_with_block() -> None:
    """A benchmark's whole-run interval: started at import, read at the end."""
    load = OthersLoad().start()
    subprocess.run([sys.executable, "-c", BURN.format(s=0.5)], check=True)
    cores = load.so_far()
    assert cores is not None and cores < 0.6
