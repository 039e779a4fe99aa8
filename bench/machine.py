"""What every benchmark records about the machine and the build (imported by the scripts in
``bench/``, which put this directory on ``sys.path``)."""

from __future__ import annotations

import os

from heinfer.runtime.costs import cpu_model as _cpu_name
from heinfer.runtime.load import OthersLoad

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpuinfo_field(lines: list[str], key: str) -> str:
    return next((ln.split(":", 1)[1].strip() for ln in lines if ln.split(":", 1)[0].strip() == key), "")


def cpu_model() -> str:
    """CPU model name, family and model numbers (a virtual machine's name alone may not tell an
    AMD Zen 1 from a Zen 4), core count and the SIMD extensions the kernels can use."""
    simd, generation = [], ""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        flags = _cpuinfo_field(lines, "flags").split()
        simd = [x for x in ("avx2", "avx512f", "avx512dq", "avx512ifma", "vaes") if x in flags]
        family, model = _cpuinfo_field(lines, "cpu family"), _cpuinfo_field(lines, "model")
        if family and model:
            generation = f"family {family} model {model}, "
    except OSError:
        pass
    return f"{_cpu_name()} ({generation}{os.cpu_count()} cores{'; ' + ', '.join(simd) if simd else ''})"


def has_avx512() -> bool:
    """Whether this CPU has AVX-512F (heinfer's kernels then run their AVX-512 families;
    otherwise their AVX2 + FMA ones, or the portable loops)."""
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in next((ln for ln in f if ln.startswith("flags")), "")
    except OSError:
        return False


def build_profile() -> str:
    """The Rust release profile the native module is built with (from ``Cargo.toml``)."""
    try:
        with open(os.path.join(ROOT, "Cargo.toml")) as f:
            text = f.read()
        section = text.split("[profile.release]", 1)[1].split("\n[", 1)[0]
        keys = [ln.strip().replace(" ", "") for ln in section.splitlines() if "=" in ln]
        return "release (" + ", ".join(keys) + ")"
    except (OSError, IndexError):
        return "release"


#: The whole run of the script that imported this module (see :func:`others_load`).
_RUN = OthersLoad().start()


def others_load() -> str:
    """What other work took of the machine since this module was imported: the average CPUs
    busy outside this process and the children it has waited for, steal time included
    (:class:`heinfer.runtime.load.OthersLoad`). Figures measured beside other work are slower
    than the machine is; a reader can weigh them by this."""
    cores = _RUN.so_far()
    return "unknown" if cores is None else f"{cores:.2f} CPUs on average (steal included)"
