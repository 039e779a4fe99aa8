"""Latency mode's stated error and released precision, from a simulation of the plan.

Layer: ``heinfer.compiler``. A latency-mode plan has no analytic error bound (throughput mode
carries one per segment); :func:`state_noise` simulates the compiled program on a few inputs
(:func:`heinfer.compiler.simulate.output_noise`: the encryption, each diagonal's encoding, the
key switches of the rotations, the rescales and the server's rounding of the result, drawn
twice) and records the largest error of the outputs as ``meta["predicted_error"]`` (with
``meta["predicted_error_source"] = "simulated"``: an estimate, not a bound) and its root mean
square as ``meta["noise_rms"]``.

It also keeps the released precision above the noise. The client releases each output
flooded with Gaussian noise of half the stated precision and rounded to it, so that the low
bits, which carry the decryption error (key-dependent), are blurred; a stated precision finer
than the noise would blur nothing (``precision_bits`` is relative to the outputs' bound and
knows nothing of the noise: compiled at 22-bit scales with ``precision_bits=30``, the test
networks state 1e-8 against noise of 1e-4). The last segment's precision is raised to at
least :data:`NOISE_MARGIN` times the simulated RMS noise (the requested one kept in
``meta["precision_requested"]``). At the default options the bundled models keep theirs
(CryptoNets: noise 1.2e-3 RMS against a precision of 1.2e-2; LoLa-Small 8.2e-4 / 9.5e-3;
CryptoNets-ReLU 3.2e-4 / 3.8e-3; simulated with the key's per-slot factor, 2026-11-28); LoLa's CIFAR network's rises by 1–2 % (2.24e-5 → 2.26e-5).
The simulation adds 2.1 s to MobileNetV2-0.35-96's 15 s compile and 4.4 s to LoLa CIFAR's 12 s.
"""

from __future__ import annotations

import numpy as np

from heinfer.compiler.simulate import output_noise
from heinfer.program.model import Program

__all__ = ["MAX_ITEMS", "MAX_TERMS", "NOISE_MARGIN", "SIMULATION_BUDGET", "state_noise"]

#: The released precision is at least this many times the simulated RMS noise of the outputs:
#: the client's flooding (deviation precision/2) is then at least twice the noise.
NOISE_MARGIN = 4.0

#: Multiply-adds of slot values the compile-time simulation may spend (three runs of the
#: program's transforms over its inputs): inputs are dropped to fit, down to one, and a
#: program beyond it even so is not simulated (no predicted error; the precision as asked).
SIMULATION_BUDGET = 1e9

#: Inputs simulated at most.
MAX_ITEMS = 4

#: Plaintext terms (diagonals) beyond which a program is not simulated at compile time: the
#: simulation runs each term in NumPy, ~60 µs a term and run (MobileNetV2-0.35-96: 11,914 terms,
#: 2.1 s; LoLa's CIFAR network: 32,784, 4.4 s).
MAX_TERMS = 50_000


def state_noise(program: Program, inputs: np.ndarray) -> Program:
    """Records ``program``'s simulated output error in its ``meta`` and raises its released
    precision to :data:`NOISE_MARGIN` × the RMS noise where it is finer (see the module
    documentation); ``inputs`` ``(n, *input_shape)``: calibration inputs. Returns ``program``."""
    transforms = [t for t in program.layers if hasattr(t, "terms")]
    per_item = sum(len(t.terms) * t.slots for t in transforms)
    items = int(min(MAX_ITEMS, len(inputs), SIMULATION_BUDGET // max(3 * per_item, 1)))
    if items < 1 or sum(len(t.terms) for t in transforms) > MAX_TERMS:
        program.meta["predicted_error_source"] = "not simulated (over the compile-time budget)"
        return program
    err = output_noise(program, inputs[:items])
    rms = float(np.sqrt(np.mean(err**2)))
    program.meta["predicted_error"] = [float(np.abs(err).max())]
    program.meta["predicted_error_source"] = "simulated"
    program.meta["noise_rms"] = rms
    seg = program.segments[-1]
    if seg.precision < NOISE_MARGIN * rms:
        program.meta["precision_requested"] = seg.precision
        seg.precision = NOISE_MARGIN * rms
    return program
