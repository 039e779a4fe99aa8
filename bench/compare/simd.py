"""Which vector instructions the compared builds contain, so every ratio says what it compares.

    python bench/compare/simd.py        # prints one JSON object

The SEAL (tenseal) and OpenFHE wheels from PyPI are generic x86-64 builds; heinfer's kernels
use AVX-512 (and IFMA where the CPU has it) chosen at run time, as does the source build of
SEAL with Intel HEXL (its runner, statically linked). This disassembles each
library's shared objects with `objdump -d` and counts instructions that name a 512-bit
register (`zmm`), a 256-bit one (`ymm`, AVX/AVX2) and IFMA multiplies (`vpmadd52`). A build
with no `zmm` instruction cannot run AVX-512 code whatever the CPU. Counting is static (code
present, not code executed).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def shared_objects() -> dict[str, list[str]]:
    """The shared objects holding each library's arithmetic (missing libraries are left out)."""
    found: dict[str, list[str]] = {}
    for lib, module in (("heinfer", "heinfer._native"), ("seal", "_sealapi_cpp")):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and spec.origin.endswith(".so"):
            found[lib] = [spec.origin]
    ofhe = sorted(glob.glob(os.path.join(
        ROOT, ".venv-openfhe", "lib", "python3*", "site-packages", "openfhe", "lib", "libOPENFHE*.so*")))
    if ofhe:
        found["openfhe"] = ofhe
    hexl = os.environ.get("SEAL_HEXL_RUNNER", os.path.join(ROOT, ".seal-hexl", "bin", "seal_hexl_runner"))
    if os.access(hexl, os.X_OK):  # SEAL + HEXL linked statically into its runner
        found["seal-hexl"] = [hexl]
    return found


def count(path: str) -> dict[str, int]:
    """Instruction counts of one shared object: `zmm`, `ymm` and `vpmadd52` (IFMA)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                         text=True, check=True, timeout=600).stdout
    counts = {"zmm": 0, "ymm": 0, "ifma": 0}
    for line in out.splitlines():
        if "\t" not in line:
            continue
        counts["zmm"] += "zmm" in line
        counts["ymm"] += "ymm" in line
        counts["ifma"] += "vpmadd52" in line
    return counts


def audit() -> dict:
    """Per library: the files scanned, the summed counts and a one-word verdict."""
    if shutil.which("objdump") is None:
        return {"unavailable": "objdump not found (binutils)"}
    result = {}
    for lib, paths in shared_objects().items():
        total = {"zmm": 0, "ymm": 0, "ifma": 0}
        try:
            for p in paths:
                for k, v in count(p).items():
                    total[k] += v
        except (OSError, subprocess.SubprocessError) as e:
            result[lib] = {"unavailable": f"objdump failed on {p}: {e}"}
            continue
        build = ("AVX-512 + IFMA" if total["ifma"] else "AVX-512") if total["zmm"] else (
            "AVX2 at most, no AVX-512" if total["ymm"] else "SSE only, no AVX")
        result[lib] = {"files": [os.path.basename(p) for p in paths], **total, "build": build}
    return result


def summary(a: dict) -> str:
    """One line for a report: `heinfer AVX-512 + IFMA (…); SEAL AVX2 at most, no AVX-512 (…)`."""
    if "unavailable" in a:
        return f"SIMD audit unavailable: {a['unavailable']}"
    names = {"heinfer": "heinfer", "seal": "SEAL", "openfhe": "OpenFHE", "seal-hexl": "SEAL + HEXL"}
    parts = []
    for lib, r in a.items():
        if "unavailable" in r:
            parts.append(f"{names[lib]} ?")
        else:
            parts.append(f"{names[lib]} {r['build']} ({r['zmm']:,} zmm / {r['ymm']:,} ymm / "
                         f"{r['ifma']:,} IFMA instructions)")
    return "; ".join(parts)


if __name__ == "__main__":
    print(json.dumps(audit()))
