"""Microsoft SEAL built from source with Intel HEXL: the third column of the CKKS comparison.

Usage (main venv; the binary built by bench/setup_compare.sh into .seal-hexl/):
  python bench/compare/seal_hexl_runner.py --logn 14 --levels 7 --scale-bits 40 \
      --max-logqp 438 --reps 20 --hoist 16
Prints exactly one JSON line on stdout (the contract of seal_runner.py); diagnostics go to
stderr. The parameters are seal_runner.py's (`choose_bits`: one special prime, one digit per
prime) and the ops the same, timed in C++ (seal_hexl_runner.cpp) instead of through tenseal's
Python bindings. SEAL has no hoisted rotation: those entries are null.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from seal_runner import choose_bits  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Where bench/setup_compare.sh puts the runner (``SEAL_HEXL_RUNNER`` overrides it).
BINARY = os.environ.get("SEAL_HEXL_RUNNER", os.path.join(ROOT, ".seal-hexl", "bin", "seal_hexl_runner"))


def main(argv=None) -> None:
    args = common.parse_args(argv)
    if not os.access(BINARY, os.X_OK):
        raise SystemExit(f"seal-hexl: no runner at {BINARY} (run `make bench-deps`)")
    n = 1 << args.logn
    bits = choose_bits(args.levels, args.scale_bits, args.max_logqp)
    x, y = common.inputs(n // 2)
    with tempfile.NamedTemporaryFile(suffix=".f64") as f:
        np.concatenate([x, y]).astype("<f8").tofile(f.name)
        out = subprocess.run([BINARY, str(args.logn), str(args.scale_bits), str(args.reps), f.name, *map(str, bits)],
                             capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"seal-hexl: runner exited {out.returncode}: {out.stderr.strip()}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not got["hexl"]:
        raise SystemExit("seal-hexl: the runner was built without Intel HEXL")
    res = common.skeleton("seal-hexl", f"SEAL {got['version']} + Intel HEXL (source build, C++ runner)")
    res["timings_us"].update({k: round(v, 2) for k, v in got["timings_us"].items()})
    res["precision_bits"].update(got["precision_bits"])
    res["sizes"] = got["sizes"]
    res["params"] = {
        "logN": args.logn,
        "log_qp": sum(got["prime_bits"]),
        "primes_bits": got["prime_bits"][:-1],
        "special_primes_bits": got["prime_bits"][-1:],
        "levels": args.levels,
        "scale_bits": args.scale_bits,
        "dnum": len(got["prime_bits"]) - 1,
    }
    common.emit(res)


if __name__ == "__main__":
    main()
