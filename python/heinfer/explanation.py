"""``heinfer.explain``: the compiled plan of a program, layer by layer, as text.

For a latency program: per segment and layer, the kernel the packing search chose (method,
giant-step modulus, input layout), the rotations and key switches it performs, its
plaintexts and its predicted time from the measured cost table; then the rotation keys (count,
bytes on the wire and in the server's memory). For a throughput program: parameters,
packing, capacity and the ops of every segment. For a two-party program: the BFV parameters,
every linear layer's ciphertexts and flooding, every garbled-circuit step and the rotation
keys. Layer: top level (reads a full program).
"""

from __future__ import annotations

import sys
from typing import TextIO

from heinfer.compiler.cost import key_bytes
from heinfer.program.model import Program
from heinfer.program.ops import Linear, Square
from heinfer.program.two_party import TwoPartyProgram

__all__ = ["auto_summary", "bfv_choice_summary", "explain"]


def _mb(b: float) -> str:
    return f"{b / 1e6:.1f} MB"


def explain(program: Program | TwoPartyProgram, file: TextIO | None = None) -> str:
    """Prints (to ``file``, default stdout) and returns a description of ``program``'s plan."""
    if getattr(program, "protocol", None) == "two-party":
        text = "\n".join(_two_party(program)) + "\n"
        (file or sys.stdout).write(text)
        return text
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
        if "auto" in program.meta:
            lines.append(auto_summary(program.meta["auto"]))
    text = "\n".join(lines) + "\n"
    (file or sys.stdout).write(text)
    return text


def _two_party(program: TwoPartyProgram) -> list[str]:
    """A :class:`~heinfer.program.two_party.TwoPartyProgram`: its BFV parameters, each linear
    layer's ciphertexts and flooding, each garbled-circuit step, the rotation keys (all public:
    a public program shows the same, without the layers' names)."""
    b = program.bfv
    out = [
        f"two-party protocol (GAZELLE), {program.mode} mode, {program.batch_capacity} item(s) per query: BFV N = 2^{b['log_n']}, "
        f"q = {b['log_q']} bits, P = {b['log_p']} bits, p = {b['plain_modulus']}, {b['security']}-bit security",
    ]
    per = "per query" if program.batch_axis else "per item"
    for k, seg in enumerate(program.segments):
        name = f" {program.layers[k].name!r}" if program.layers is not None and hasattr(program.layers[k], "name") else ""
        lists = program.input_lists(k)
        sent = f"{seg.n_input_cts} ciphertext(s)" + (f" × {lists} (a and a² after the square)" if lists > 1 else "")
        n_out = seg.out_size if program.batch_axis else seg.output.n_cts
        out.append(
            f"layer {k}{name}: {seg.in_size} → {seg.out_size} values; the client sends {sent} {per}, the server returns "
            f"{n_out} flooded with 2^{seg.flood_bits}" + (f", folded by {len(seg.fold)} rotate-and-add step(s) on the shares" if seg.fold else "")
        )
        if k < len(program.steps):
            st = program.steps[k]
            window = f", windows of {st.window}" if st.window > 1 else ""
            pool = f", then {st.pool.shape[0]} sum-pooled outputs" if st.pool is not None else ""
            kind = {"relu": "ReLU", "maxpool_relu": "max-pool and ReLU", "square": "truncation (then GAZELLE's AHE square)"}.get(st.kind, st.kind)
            if st.kind == "clip":
                kind = f"clip to [{st.lo}, {st.hi}] (the layer's fixed-point integers)"
            kept = f", {sum(st.keep)} value(s) passing through (a truncation circuit each)" if sum(st.keep) else ""
            out.append(f"step {k}: {kind} in a garbled circuit, {st.instances} instance(s) per item{window}, truncating {st.shift} bit(s){pool}{kept}")
    wire, _ = key_bytes(int(b["log_n"]), list(b["log_q"]), list(b["log_p"]))
    out.append(f"rotation keys: {program.galois_key_count} ({_mb(wire * program.galois_key_count)} on the wire)")
    if "bfv_choice" in program.meta:  # the compiler's choice of the BFV parameters
        out.append(bfv_choice_summary(program.meta["bfv_choice"]))
    if "simulated_error" in program.meta:  # the compiler's exact simulation on calibration inputs
        e = program.meta["simulated_error"]
        agree = f", {e['agreement']:.0%} keep the model's largest output" if e["agreement"] is not None else ""
        out.append(f"fixed point, simulated exactly on {e['items']} calibration input(s): outputs off by up to {e['rel_error']:.1%} of the largest{agree}")
    if "auto" in program.meta:
        out.append(auto_summary(program.meta["auto"]))
    return out


def bfv_choice_summary(c: dict) -> str:
    """One line for the compiler's choice of the BFV parameters (``program.meta["bfv_choice"]``):
    the plaintext modulus kept, the sizes simulated before it, and the ring."""
    tried = ", ".join(
        f"{b} bits {v['rel_error']:.1%}" + (f" / {v['agreement']:.0%}" if v["agreement"] is not None else "")
        for b, v in c["simulated"].items()
    )
    why = f" (worst error / agreement on {c['items']} calibration inputs: {tried})" if tried else " (no calibration inputs: GAZELLE's)"
    return f"BFV parameters chosen: a {c['plain_bits']}-bit plaintext modulus{why}; N = 2^{c['log_n']}, {len(c['log_q'])} ciphertext primes"


def auto_summary(a: dict) -> str:
    """One line for ``mode="auto"``'s record (``program.meta["auto"]``): the predicted time of
    each mode that compiled, what was priced when it says, and why a mode was left out."""
    times = " vs ".join(f"{m} {a[m + '_s']:.3f} s" for m in ("latency", "throughput") if m + "_s" in a)
    line = f"mode chosen by auto for {a['batch_size']} item(s): {times} predicted"
    if "priced" in a:
        line += f" — {a['priced']}"
    for m, why in a.get("refused", {}).items():
        line += f"; {m} mode refused the network: {why}"
    return line


def _latency(program: Program) -> list[str]:
    m = program.lanes
    items = "one item per query" if m == 1 else f"{m} items per query, one per lane of the slots (the plans below are one item's, on N/{2 * m} slots)"
    out = [f"{items}; predicted server time {program.predicted_s * 1e3:.1f} ms per query ({program.meta.get('cost_source', 'analytic')})"]
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
        out.append(auto_summary(program.meta["auto"]))
    return out


def program_key_bytes(program) -> dict:
    """Sizes of a program's evaluation keys: rotation-key ``count``, and bytes on the wire and
    in the server's memory for the rotation and relinearization keys."""
    p = program.params
    wire, mem = key_bytes(int(p["log_n"]), list(p["log_q"]), list(p["log_p"]))
    n, r = len(program.rotation_steps), int(program.needs_relin_key)
    return {"count": n, "rotation_wire": wire * n, "rotation_memory": mem * n, "relinearization_wire": wire * r, "relinearization_memory": mem * r}
