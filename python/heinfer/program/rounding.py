"""How finely a segment's output must travel: the error budget of rounded outputs.

Layer: ``heinfer.program``. The client only decrypts what a segment returns, so the server
sends those ciphertexts rounded: the low bits of every coefficient dropped
(``heinfer_ckks::serialize::rounded``; ``Params.rounding_drop_bits`` turns a budget into bits).
Rounding is public post-processing of a ciphertext: it hides as much as before. The budget is
a bound on the standard deviation ``σ`` of the error rounding adds to each decrypted
coefficient (in the output's integer units, at its scale ``Δ_out``), derived from the public
program so that both parties compute the same one:

* **Before a step**, the client encrypts the step's results at the next segment's input scale
  ``Δ_in``, which rounds every coefficient to an integer: an error of standard deviation
  ``1/√12`` at ``Δ_in``. Rounding may add a quarter of that:
  ``σ ≤ Δ_out / (4·√12·Δ_in)``. Both errors pass through the same embedding when both
  layouts are slots or both are coefficients; when slots (the error of a value ≈ ``σ·√N/Δ``)
  feed coefficients, the bound is ``√N`` smaller.
* **The result** is released at ``precision`` (flooded with a deviation of ``precision/2``,
  then rounded to it); rounding may add ``precision/8`` to a value:
  ``σ ≤ precision·Δ_out / (8·√N)`` (``√N`` dropped for coefficient packing).

Only client-aided steps and results are rounded; a two-party step's ciphertexts are not.
"""

from __future__ import annotations

import math

__all__ = ["output_rounding_std", "output_drop_bits"]

#: Fraction of the next encoding's rounding (standard deviation) a rounded step may add.
STEP_SHARE = 0.25
#: Fraction of the released precision a rounded result may add to a value.
RESULT_SHARE = 0.125


def _in_coefficients(seg) -> bool:
    return seg.layout.packing == "coeff"


def _out_in_coefficients(seg) -> bool:
    """Whether a segment's outputs are coefficients (a batch-axis layout in coefficient
    packing keeps its items in coefficients from input to output)."""
    return seg.layout.kind == "batch" and seg.layout.packing == "coeff"


def output_rounding_std(program, k: int) -> float:
    """The bound on ``σ`` for segment ``k``'s output (see the module documentation); ``0.0``
    when it travels unrounded (a two-party step)."""
    segs, steps = program.segments, program.steps
    seg = segs[k]
    n = 1 << int(program.params["log_n"])
    if k == len(segs) - 1:
        embed = 1.0 if _out_in_coefficients(seg) else math.sqrt(n)
        return RESULT_SHARE * seg.precision * seg.output_scale / embed
    if steps[k].protocol != "client-aided":
        return 0.0
    nxt = segs[k + 1]
    embed = math.sqrt(n) if (not _out_in_coefficients(seg) and _in_coefficients(nxt)) else 1.0
    return STEP_SHARE * seg.output_scale / (math.sqrt(12.0) * nxt.input_scale * embed)


def output_drop_bits(params, program, k: int) -> list[int]:
    """Low bits per polynomial segment ``k``'s output ciphertexts drop on the wire
    (``params``: the native parameters; all zeros when nothing may be dropped)."""
    seg = program.segments[k]
    return list(params.rounding_drop_bits(seg.output_level, seg.output_parts, output_rounding_std(program, k)))
