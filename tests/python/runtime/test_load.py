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
    with OthersLoad() as load:
        subprocess.run([sys.executable, "-c", BURN.format(s=1.5)], check=True)
    assert load.cores is not None and load.cores >= 0.6  # one core, less start-up and ticks


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
