"""``heinfer.explain``: the compiled plan of a program, layer by layer, as text.

For a latency program: per segment and layer, the kernel the packing search chose (method,
giant-step modulus, input layout), the rotations and key switches it performs, its
plaintexts and its predicted time from the measured cost table; then the rotation keys (count,
bytes on the wire and in the server's memory). For a throughput program: parameters,
packing, capacity and the ops of every segment. Layer: top level (reads a full program).
"""

from __future__ import annotations

import sys
from typing import TextIO

from heinfer.compiler.cost import key_bytes
from heinfer.program.model import Program
from heinfer.program.ops import Linear, Square

__all__ = ["explain"]


def _mb(b: float) -> str:
    return f"{b / 1e6:.1f} MB"


def explain(program: Program, file: TextIO | None = None) -> str:
    """Prints (to ``file``, default stdout) and returns a description of ``program``'s plan."""
    p = program.params
    lines = [
        f"mode {program.mode}: N = 2^{p['log_n']}, q = {p['log_q']} bits, P = {p['log_p'] or 'none'} bits, "
        f"scale 2^{p['log_scale']}, {p['security']}-bit security",
    ]
    if not isinstance(program, Program):
        lines.append("a public program holds no weights and no plan: explain the server's program")
    elif program.mode == "latency":
        lines += _latency(program)
    else:
        lines.append(f"packing {program.packing}: {program.batch_capacity} items per query")
        for i, seg in enumerate(program.segments):
            ops = " ".join(type(op).__name__.lower() + (f"({program.layers[op.layer].name})" if isinstance(op, Linear) else "") for op in seg.ops)
            lines.append(f"segment {i}: level {seg.input_level} → {seg.output_level}: {ops}")
            if i < len(program.steps):
                lines.append(f"client step {i}: " + ", ".join(f.kind for f in program.steps[i].functions))
    text = "\n".join(lines) + "\n"
    (file or sys.stdout).write(text)
    return text


def _latency(program: Program) -> list[str]:
    out = [f"one item per query; predicted server time {program.predicted_s * 1e3:.1f} ms ({program.meta.get('cost_source', 'analytic')})"]
    head = f"  {'layer':<22}{'kernel':<24}{'level':>5}{'cts in→out':>12}{'rot':>6}{'ks':>5}{'pts':>6}{'ms':>9}"
    for i, seg in enumerate(program.segments):
        out.append(f"segment {i}: client encrypts {seg.n_input_cts} ciphertext(s) at level {seg.input_level}")
        out.append(head)
        level = seg.input_level
        for j, op in enumerate(seg.ops):
            pl = program.plans.get(f"{i}.{j}", {})
            if isinstance(op, Square):
                out.append(f"  {pl.get('layer', 'square'):<22}{'square+relin':<24}{level:>5}{pl.get('cts', 0):>12}{'':>6}{pl.get('cts', 0):>5}{'':>6}{pl.get('predicted_s', 0) * 1e3:>9.2f}")
                level -= 1
                continue
            if not isinstance(op, Linear):
                continue
            kernel = pl.get("method", "?")
            if kernel == "expanded":
                kernel += f" t={pl.get('taps_per_ct')}"
            kernel += f" M={pl.get('giant_modulus')}"
            cts = f"{pl.get('in_cts')}→{pl.get('out_cts')}"
            out.append(
                f"  {pl.get('layer', '?')[:21]:<22}{kernel:<24}{level:>5}{cts:>12}{pl.get('rotations', 0):>6}"
                f"{pl.get('key_switches', 0):>5}{pl.get('plaintexts', 0):>6}{pl.get('predicted_s', 0) * 1e3:>9.2f}"
            )
            level -= 1
        if i < len(program.steps):
            out.append(f"client step {i}: " + ", ".join(f.kind for f in program.steps[i].functions))
    kb = program_key_bytes(program)
    out.append(
        f"rotation keys: {kb['count']} ({_mb(kb['rotation_wire'])} on the wire, {_mb(kb['rotation_memory'])} in server memory); "
        f"relinearization key: {_mb(kb['relinearization_wire'])}"
    )
    if "auto" in program.meta:
        a = program.meta["auto"]
        out.append(f"auto mode for {a['batch_size']} items: latency {a['latency_s']:.3f} s vs throughput {a['throughput_s']:.3f} s predicted")
    return out


def program_key_bytes(program) -> dict:
    """Sizes of a program's evaluation keys: rotation-key ``count``, and bytes on the wire and
    in the server's memory for the rotation and relinearization keys."""
    p = program.params
    wire, mem = key_bytes(int(p["log_n"]), list(p["log_q"]), list(p["log_p"]))
    n, r = len(program.rotation_steps), int(program.needs_relin_key)
    return {"count": n, "rotation_wire": wire * n, "rotation_memory": mem * n, "relinearization_wire": wire * r, "relinearization_memory": mem * r}
