"""How much the client's release noise covers the decryption error, on the bundled models.

    .venv/bin/python bench/release_noise.py [--quick]

The client releases each result with Gaussian noise of deviation ``precision/2`` (from the OS)
and rounds it to ``precision`` (README, "Privacy and threat model"): the
noise blurs the low bits of the decrypted value, which depend on the secret key. This script
runs CryptoNets-ReLU and CryptoNets (x²) in throughput mode (batch axis) and in latency mode
(slots) through a real client and server (``heinfer.infer``), takes the decrypted results just
before the release, and compares them with the program's exact arithmetic
(:func:`heinfer.compiler.simulate.simulate` with ``errors=False``: the same plan, weights and
steps, nothing rounded). Printed per model: the stated precision, the noise's deviation, the
median and RMS of ``|decrypted − exact|``, and their ratio (noise deviation ÷ median error).
No timing. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import heinfer
import heinfer.protocol.client as client_module
from heinfer.compiler.simulate import simulate

CASES = [  # (model, mode, items of a full run: all 360 held-out digits, one batch, in throughput mode)
    ("cryptonets_relu", "throughput", 360),
    ("cryptonets", "throughput", 360),
    ("cryptonets", "latency", 16),
    ("cryptonets_relu", "latency", 16),
]


def released(prog, x: np.ndarray) -> tuple[np.ndarray, float]:
    """The results the client decrypts for ``x`` (before its release noise) and their stated
    precision: ``heinfer.infer`` with the client's release function wrapped to record its input."""
    seen: list[tuple[np.ndarray, float]] = []
    release = client_module._flood_and_round

    def spy(vals: np.ndarray, precision: float) -> np.ndarray:
        seen.append((vals.copy(), precision))
        return release(vals, precision)

    client_module._flood_and_round = spy
    try:
        heinfer.infer(prog, x)
    finally:
        client_module._flood_and_round = release
    return np.concatenate([v.reshape(-1) for v, _ in seen]), seen[-1][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 items in latency mode instead of 16")
    args = ap.parse_args()
    digits = np.load(os.path.join(ROOT, "models", "digits_test.npz"))["x"]
    out = {}
    for model, mode, items in CASES:
        prog = heinfer.compile(os.path.join(ROOT, "models", f"{model}.onnx"), mode=mode, calibration=digits[:64])
        if prog.post:  # the client's last functions run after the release: not these models
            raise SystemExit(f"{model} ({mode}) has post functions; the comparison needs raw outputs")
        x = digits[: 4 if args.quick and mode == "latency" else items]
        vals, precision = released(prog, x)
        exact = simulate(prog, x, errors=False).reshape(-1)
        err = np.abs(vals - exact)
        row = {
            "precision": float(precision),
            "noise_std": float(precision / 2),
            "median_error": float(np.median(err)),
            "rms_error": float(np.sqrt(np.mean(err**2))),
            "ratio": float(precision / 2 / np.median(err)),
            "items": int(x.shape[0]),
        }
        out[f"{model}/{mode}"] = row
        print(
            f"{model} ({mode}, {row['items']} items): precision {precision:.3g}, noise deviation "
            f"{precision / 2:.3g}, |decrypted − exact| median {row['median_error']:.3g}, RMS "
            f"{row['rms_error']:.3g}: noise = {row['ratio']:.1f}× the median error",
            flush=True,
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
