"""What every benchmark records about the machine and the build (imported by the scripts in
``bench/``, which put this directory on ``sys.path``)."""

from __future__ import annotations

import os

from heinfer.runtime.costs import cpu_model as _cpu_name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_model() -> str:
    """CPU model name, core count and the SIMD extensions the kernels use."""
    simd = []
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln for ln in f if ln.startswith("flags")), "")
        simd = [x for x in ("avx2", "avx512f", "avx512dq", "avx512ifma", "vaes") if f" {x}" in flags]
    except OSError:
        pass
    return f"{_cpu_name()} ({os.cpu_count()} cores{'; ' + ', '.join(simd) if simd else ''})"


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
