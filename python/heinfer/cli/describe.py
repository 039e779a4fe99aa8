"""What ``heinfer inspect`` shows about a compiled program (layer: ``heinfer.cli``).

:func:`describe` turns a program of either kind (the server's :class:`~heinfer.Program` or
the clients' :class:`~heinfer.PublicProgram`) into a plain, JSON-ready dict: its kind and id,
parameters, mode and packing, segments with their layouts, levels and ops, client-aided
steps, the server's plan (:func:`heinfer.explain`; full programs only), the message size
bounds and the evaluation keys of the key manifest with their sizes. :func:`render` prints it
with rich tables.

Key sizes come from the parameters (see :func:`switching_key_bytes`); on the wire a key is
seed-compressed (its uniform half is a 32-byte seed) and bit-packed at each prime's width, in
memory it holds ``β`` digits × 2 polynomials × ``(ℓ+1+k)`` limbs × ``N`` × 8 bytes.
"""

from __future__ import annotations

import io
import math
from typing import Any

from heinfer.explanation import auto_summary
from heinfer.features import META_KEY as FEATURES_KEY
from heinfer.program.model import Program, PublicProgram

__all__ = ["describe", "galois_keys_bytes", "render", "switching_key_bytes"]

#: Bytes of an engine object's header: magic, version, kind, flags, parameter id.
HEADER_BYTES = 16
#: Bytes of the seed that replaces the uniform half of a key or fresh ciphertext.
SEED_BYTES = 32


def _moduli(params: Any) -> list[int]:
    return list(params.q) + list(params.p)


def _digit_wire_bytes(params: Any) -> int:
    """One key-switching digit on the wire: ``b`` bit-packed over Q·P, plus the seed of ``a``."""
    n = int(params.n)
    return sum(math.ceil(n * int(m).bit_length() / 8) for m in _moduli(params)) + SEED_BYTES


def switching_key_bytes(params: Any) -> dict[str, int]:
    """Sizes of one relinearization key: ``{"wire": serialized bytes, "memory": bytes held}``.

    ``params``: native or :class:`~heinfer.ckks.CkksParameters` (anything with ``n``, ``q``,
    ``p`` and ``beta``). The wire size is exact (header, digit count, ``β`` digits); memory is
    ``β × 2 × (ℓ+1+k) × N × 8``.
    """
    beta = int(params.beta)
    wire = HEADER_BYTES + 4 + beta * _digit_wire_bytes(params)
    memory = beta * 2 * len(_moduli(params)) * int(params.n) * 8
    return {"wire": wire, "memory": memory}


def galois_keys_bytes(params: Any, count: int) -> dict[str, int]:
    """Sizes of a set of ``count`` Galois keys (each: element, digit count, ``β`` digits)."""
    one = switching_key_bytes(params)
    wire = HEADER_BYTES + 4 + count * (8 + 4 + int(params.beta) * _digit_wire_bytes(params))
    return {"wire": wire, "memory": count * one["memory"]}


def _params(program: PublicProgram) -> tuple[dict, Any]:
    from heinfer.runtime.executor import native_params

    p = program.params
    raw = native_params(p)
    return {
        "log_n": int(p["log_n"]),
        "n": int(raw.n),
        "log_q": list(p["log_q"]),
        "log_p": list(p["log_p"]),
        "log_scale": int(p["log_scale"]),
        "log_qp": round(float(raw.log_qp), 2),
        "levels": len(p["log_q"]),
        "key_switching_digits": int(raw.beta) if p["log_p"] else 0,  # no P: no key switching
        "security_bits": int(p["security"]),
        "params_id": f"{raw.id:016x}",
    }, raw


def _op(program: PublicProgram, op: Any) -> str:
    name = type(op).__name__.lower()
    if name == "linear" and isinstance(program, Program):
        return f"linear({getattr(program.layers[op.layer], 'name', op.layer)})"
    if name == "rescale":
        return f"rescale({op.primes})"
    if name == "dropto":
        return f"drop_to({op.level})"
    return name


def _segments(program: PublicProgram) -> list[dict]:
    return [
        {
            "index": i,
            "layout": s.layout.kind,
            "in_size": s.in_size,
            "out_size": s.out_size,
            "input_ciphertexts": s.n_input_cts,
            "output_ciphertexts": s.n_output_cts,
            "input_level": s.input_level,
            "output_level": s.output_level,
            "input_scale_bits": round(math.log2(s.input_scale), 2),
            "output_bound": s.output_bound,
            "precision": s.precision,
            "predicted_s": s.predicted_s,
            "ops": [_op(program, op) for op in s.ops],
        }
        for i, s in enumerate(program.segments)
    ]


def _keys(program: PublicProgram, raw: Any) -> dict:
    manifest = dict(program.key_manifest)
    galois = len(manifest.get("galois_elements", []))
    keys: dict[str, Any] = {"manifest": manifest, "total_wire_bytes": 0, "total_memory_bytes": 0}
    if manifest.get("relinearization"):
        keys["relinearization"] = switching_key_bytes(raw)
    if galois:
        keys["galois"] = {"count": galois, **galois_keys_bytes(raw, galois)}
    for k in ("relinearization", "galois"):
        if k in keys:
            keys["total_wire_bytes"] += keys[k]["wire"]
            keys["total_memory_bytes"] += keys[k]["memory"]
    return keys


def _function(f: Any) -> dict:
    return {"name": f.name, "kind": f.kind}


def _step(i: int, st: Any) -> dict:
    functions = [_function(f) for f in st.functions]
    return {
        "index": i,
        "protocol": st.protocol,
        "functions": functions,
        "in_size": st.in_size,
        "out_size": st.out_size,
    }


def describe(program: PublicProgram, size_bytes: int | None = None, ray_workers: int | None = None, ray_split: str = "auto") -> dict:
    """Everything ``heinfer inspect`` reports about ``program`` (either kind, either mode),
    as a JSON-ready dict. A full program adds ``plan``: the text of :func:`heinfer.explain`,
    and with ``ray_workers`` ``shards``: its shard plan on that many Ray workers
    (:func:`heinfer.cluster.shard_plan` with ``ray_split``, default ``auto``)."""
    from heinfer.protocol.limits import message_limits

    params, raw = _params(program)
    full = isinstance(program, Program)
    desc: dict[str, Any] = {
        "kind": "server (with weights)" if full else "public (no weights)",
        "program_id": program.id,
        "mode": program.mode,
        "packing": program.packing,
        "batch_capacity": program.batch_capacity,
        "slots": program.slots,
        "lanes": program.lanes,
        "params": params,
        "input": {
            "name": program.input_name,
            "shape": list(program.input_shape),
            "bound": program.input_bound,
        },
        "output": {"name": program.output_name, "shape": list(program.output_shape)},
        "pre": [_function(f) for f in program.pre],
        "post": [_function(f) for f in program.post],
        "segments": _segments(program),
        "client_steps": [_step(i, st) for i, st in enumerate(program.steps)],
        "predicted_s": program.predicted_s,
        "predicted_error": (program.meta.get("predicted_error") or [None])[-1],
        "predicted_error_source": program.meta.get("predicted_error_source", "bound" if program.meta.get("predicted_error") else None),
        "message_limits": message_limits(program.public()),
        "keys": _keys(program, raw),
    }
    if size_bytes is not None:
        desc["program_bytes"] = size_bytes
    if full:
        desc["plan"] = _explain(program)
    if full and ray_workers:
        from heinfer.cluster import shard_plan

        sp = shard_plan(program, ray_workers, ray_split)
        desc["shards"] = {
            "workers": ray_workers,
            "split": ray_split,
            "network": {"bandwidth_bytes_s": sp.network.bandwidth, "latency_s": sp.network.latency},
            "segments": [
                {"segment": s.segment, "how": s.how, "output_groups": [list(g) for g in s.groups], "worker": s.worker, "why": s.why}
                for s in sp.segments
            ],
            "text": sp.describe(),
        }
    if "auto" in program.meta:
        desc["auto"] = dict(program.meta["auto"])
    if FEATURES_KEY in program.meta:
        desc["features_sha256"] = program.meta[FEATURES_KEY]
    return desc


def _explain(program: Program) -> str:
    """The plan of :func:`heinfer.explain`, without its first line (the parameters, which
    ``inspect`` shows itself)."""
    from heinfer.explanation import explain

    text = explain(program, file=io.StringIO())
    return "\n".join(text.splitlines()[1:])


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover - the loop returns


def render(desc: dict, console: Any) -> None:
    """Prints a :func:`describe` dict on a rich ``console`` (titles and tables)."""
    p = desc["params"]
    console.print(
        f"[bold]{desc['mode']}[/bold] program, {desc['kind']}, {desc['packing']} packing: "
        f"{desc['batch_capacity']} item(s) per query"
        + (f" ({_fmt_bytes(desc['program_bytes'])})" if "program_bytes" in desc else "")
        + f"; id {desc['program_id'][:16]}…"
    )
    console.print(
        f"CKKS N = 2^{p['log_n']}, q = {p['log_q']} bits, P = {p['log_p'] or 'none'}, "
        f"log QP = {p['log_qp']}, scale 2^{p['log_scale']}, {p['levels']} levels, "
        + (f"{p['key_switching_digits']} key-switching digit(s), " if p["key_switching_digits"] else "no key switching, ")
        + f"{p['security_bits']}-bit security "
        f"(params id {p['params_id']})"
    )
    err = desc["predicted_error"]
    console.print(
        f"input {desc['input']['name']!r} {tuple(desc['input']['shape'])} "
        f"(|x| ≤ {desc['input']['bound']:.3g}) → output {desc['output']['name']!r} "
        f"{tuple(desc['output']['shape'])}"
        + (
            ""
            if err is None
            else f"; simulated error {err:.2e}" if desc.get("predicted_error_source") == "simulated" else f"; predicted error ≤ {err:.2e}"
        )
        + (
            f"; predicted server time {1e3 * desc['predicted_s']:.1f} ms per query"
            if desc["predicted_s"]
            else ""
        )
    )
    if "features_sha256" in desc:
        console.print(
            f"input: the features of a public extractor (SHA-256 {desc['features_sha256'][:16]}…), "
            "run by the client in the clear (heinfer predict --features EXTRACTOR.onnx)"
        )
    _render_segments(desc, console)
    if "plan" in desc:
        console.print("plan (heinfer.explain):", style="bold")
        console.print(desc["plan"], markup=False, highlight=False)
    if "shards" in desc:
        console.print(f"shard plan on {desc['shards']['workers']} Ray worker(s):", style="bold")
        for line in desc["shards"]["text"]:
            console.print(f"  {line}", markup=False, highlight=False)
    lim = desc["message_limits"]
    console.print(
        "message size bounds: " + ", ".join(f"{k} {_fmt_bytes(v)}" for k, v in lim.items())
    )
    _render_keys(desc["keys"], console)
    if "auto" in desc:
        console.print(auto_summary(desc["auto"]))


def _render_segments(desc: dict, console: Any) -> None:
    from rich.table import Table

    t = Table(title="server segments", title_justify="left")
    for col in ("#", "layout", "in → out", "ciphertexts", "levels", "scale", "ops"):
        t.add_column(col)
    for s in desc["segments"]:
        t.add_row(
            str(s["index"]), s["layout"], f"{s['in_size']} → {s['out_size']}",
            f"{s['input_ciphertexts']} → {s['output_ciphertexts']}",
            f"{s['input_level']} → {s['output_level']}", f"2^{s['input_scale_bits']:g}", ", ".join(s["ops"]),
        )  # fmt: skip
    console.print(t)
    if desc["client_steps"] or desc["pre"] or desc["post"]:
        t = Table(title="client-side steps", title_justify="left")
        for col in ("where", "protocol", "functions", "in → out"):
            t.add_column(col)
        if desc["pre"]:
            t.add_row("before", "", ", ".join(f["kind"] for f in desc["pre"]), "")
        for st in desc["client_steps"]:
            t.add_row(
                f"after segment {st['index']}", st["protocol"], ", ".join(f["kind"] for f in st["functions"]),
                f"{st['in_size']} → {st['out_size']}",
            )  # fmt: skip
        if desc["post"]:
            t.add_row("after", "", ", ".join(f["kind"] for f in desc["post"]), "")
        console.print(t)


def _render_keys(keys: dict, console: Any) -> None:
    m = keys["manifest"]
    count = keys.get("galois", {}).get("count", 0)
    rotations = m.get("rotation_steps", [])
    console.print(
        f"evaluation keys: relinearization {'yes' if m.get('relinearization') else 'no'}, "
        f"{count} Galois key(s)" + (f" (rotations {rotations})" if rotations else "")
    )
    for name in ("relinearization", "galois"):
        if name in keys:
            k = keys[name]
            console.print(
                f"  {name}: {_fmt_bytes(k['wire'])} on the wire, {_fmt_bytes(k['memory'])} in server memory"
            )
    if "relinearization" not in keys and "galois" not in keys:
        console.print("  (none: a session uploads no key material)")
