"""``heinfer inspect`` for a two-party program: parameters, layers, circuits, bytes and keys.

Layer: the command line (reads a :class:`~heinfer.program.two_party.TwoPartyProgram`, public
or not; sizes from the engine's own wire formats and circuit builders, nothing is run).
Everything shown is in the public part, so a client's file shows the same as the server's but
for ``has_weights``. Per query: the ciphertexts of each linear layer (the client's inputs
seed-compressed, the server's results switched down to one prime and rounded as far as their
flooding allows: :func:`~heinfer.compiler.two_party_cost.query_ciphertexts`) and the garbled tables of each
step (half-gates: 32 bytes per AND gate, per circuit instance); the oblivious transfers, the
garbler's input labels and the output tables come on top and are not counted here.
"""

from __future__ import annotations

from typing import Any

from heinfer import _native
from heinfer.compiler.two_party_cost import ciphertext_bytes, query_ciphertexts
from heinfer.explanation import auto_summary
from heinfer.program.two_party import TwoPartyProgram

__all__ = ["describe_two_party", "render_two_party"]

#: Bytes of one garbled AND gate (half-gates: two 128-bit ciphertexts; XOR gates are free).
AND_GATE_BYTES = 32


def describe_two_party(program: TwoPartyProgram, size_bytes: int | None = None) -> dict:
    """A JSON-able description of ``program`` (see the module documentation)."""
    bfv = dict(program.bfv)
    p = int(bfv["plain_modulus"])
    params = _native.BfvParams(int(bfv["log_n"]), list(bfv["log_q"]), list(bfv["log_p"]), p, int(bfv["security"]))
    fresh = ciphertext_bytes(bfv) / 2
    layers = []
    for k, (seg, (n_in, n_out)) in enumerate(zip(program.segments, query_ciphertexts(program))):
        layers.append({
            "index": k, "in_size": seg.in_size, "out_size": seg.out_size, "input_ciphertexts": n_in,
            "output_ciphertexts": n_out, "flood_bits": seg.flood_bits,
            # a result's size depends on its flooding: the low bits it leaves free are not sent
            "bytes_up": round(n_in * fresh), "bytes_down": n_out * params.result_wire_bytes(seg.flood_bits),
        })  # fmt: skip
    steps = []
    for k, st in enumerate(program.steps):
        gates = [(_native.LayerCircuit(*args).and_gates, len(entries)) for args, entries in st.parts(p)]
        steps.append({
            "after_layer": k, "kind": st.kind, "instances_per_item": st.instances, "window": st.window,
            "shift": st.shift, "pooled": st.pool is not None, "and_gates_per_instance": gates[0][0],
            # values passing through (a residual's skip): a truncation circuit each
            "kept_per_item": sum(st.keep), "and_gates_per_kept": gates[1][0] if len(gates) > 1 else 0,
            "garbled_bytes_per_item": sum(g * n for g, n in gates) * AND_GATE_BYTES,
        })  # fmt: skip
    keys = program.galois_key_count
    desc: dict[str, Any] = {
        "program_id": program.id,
        "protocol": "two-party",
        "mode": program.mode,
        "kind": "public (no weights)" if program.is_public else "server (with weights)",
        "has_weights": not program.is_public,
        "batch_capacity": program.batch_capacity,
        "bfv": bfv,
        "input": {"name": program.input_name, "shape": list(program.input_shape), "bound": program.input_bound, "frac_bits": program.input_frac},
        "output": {"name": program.output_name, "shape": list(program.output_shape), "frac_bits": program.output_frac},
        "layers": layers,
        "steps": steps,
        "query_bytes": {
            "ciphertexts_up": sum(lay["bytes_up"] for lay in layers),
            "ciphertexts_down": sum(lay["bytes_down"] for lay in layers),
            "garbled_tables": program.batch_capacity * sum(st["garbled_bytes_per_item"] for st in steps),
        },
        "session_keys": {"rotation_keys": keys, "bytes": params.rlwe.galois_keys_wire_bytes(keys) if keys else 0},
    }
    if size_bytes is not None:
        desc["program_bytes"] = int(size_bytes)
    if "auto" in program.meta:
        desc["auto"] = program.meta["auto"]
    return desc


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def render_two_party(desc: dict, console: Any) -> None:
    """Prints a :func:`describe_two_party` dict on a rich ``console``."""
    from rich.table import Table

    b = desc["bfv"]
    items = desc["batch_capacity"]
    console.print(
        f"[bold]two-party[/bold] program (GAZELLE), {desc['mode']} mode, {desc['kind']}: {items} item(s) per query"
        + (f" ({_mb(desc['program_bytes'])})" if "program_bytes" in desc else "")
        + f"; id {desc['program_id'][:16]}…"
    )
    console.print(
        f"BFV N = 2^{b['log_n']}, q = {b['log_q']} bits, P = {b['log_p']} bits, p = {b['plain_modulus']}, "
        f"{b['security']}-bit security"
    )
    i, o = desc["input"], desc["output"]
    console.print(
        f"input {i['name']!r} {tuple(i['shape'])} (|x| ≤ {i['bound']:.3g}, {i['frac_bits']} fractional bits) → "
        f"output {o['name']!r} {tuple(o['shape'])} ({o['frac_bits']} fractional bits)"
    )
    t = Table(title="linear layers (BFV, on the server)", title_justify="left")
    for col in ("#", "in → out", "ciphertexts in → out", "flooding", "bytes per query up / down"):
        t.add_column(col)
    for lay in desc["layers"]:
        t.add_row(
            str(lay["index"]), f"{lay['in_size']} → {lay['out_size']}",
            f"{lay['input_ciphertexts']} → {lay['output_ciphertexts']}", f"2^{lay['flood_bits']}",
            f"{_mb(lay['bytes_up'])} / {_mb(lay['bytes_down'])}",
        )  # fmt: skip
    console.print(t)
    if desc["steps"]:
        t = Table(title="garbled-circuit steps, per item (kept: values passing through, × AND gates of their truncation)", title_justify="left")
        for col in ("after layer", "kind", "instances", "AND each", "kept", "shift", "tables"):
            t.add_column(col)
        for st in desc["steps"]:
            kind = st["kind"] + (f" (window {st['window']})" if st["window"] > 1 else "") + (", pooled" if st["pooled"] else "")
            kept = f"{st['kept_per_item']} × {st['and_gates_per_kept']}" if st["kept_per_item"] else "—"
            t.add_row(
                str(st["after_layer"]), kind, str(st["instances_per_item"]), str(st["and_gates_per_instance"]), kept,
                f"{st['shift']} bits", _mb(st["garbled_bytes_per_item"]),
            )  # fmt: skip
        console.print(t)
    q = desc["query_bytes"]
    console.print(
        f"per query of {items} item(s): ciphertexts {_mb(q['ciphertexts_up'])} up, {_mb(q['ciphertexts_down'])} down; "
        f"garbled tables {_mb(q['garbled_tables'])} (offline; oblivious transfers, input labels and output tables not counted)"
    )
    k = desc["session_keys"]
    console.print(
        f"session keys: {k['rotation_keys']} rotation key(s), {_mb(k['bytes'])} on the wire" if k["rotation_keys"]
        else "session keys: none (no rotations)"
    )
    if "auto" in desc:
        console.print(auto_summary(desc["auto"]), markup=False, highlight=False)
