"""The archive format of a :class:`~heinfer.program.latency.LatencyProgram`.

Same container as throughput programs (:mod:`heinfer.program.serialize`: a ``.npz`` with a
JSON ``manifest``, read with ``allow_pickle=False`` and size limits); the manifest says
``"mode": "latency"``. Arrays: per segment ``g{i}`` (gather map) and ``o{i}_ct``/``o{i}_slot``
(output placement); per transform ``t{i}_{j}_terms``, ``_vectors`` and ``_bias``. Every
array is checked for dtype, shape, range and finiteness by the dataclasses' validation.
"""

from __future__ import annotations


import numpy as np

from heinfer.compiler.latency.layout import Placement
from heinfer.compiler.latency.transform import Transform
from heinfer.errors import SerializationError
from heinfer.program.latency import LatencyProgram, LatencySegment, LatencyStep

__all__ = ["dump", "build"]


def dump(program: LatencyProgram) -> bytes:
    """The program as archive bytes."""
    from heinfer.program.serialize import _fn_to_json, manifest_header, pack

    arrays: dict[str, np.ndarray] = {}
    segs = []
    for i, seg in enumerate(program.segments):
        arrays[f"g{i}"] = seg.gather
        arrays[f"o{i}_ct"], arrays[f"o{i}_slot"] = seg.output.ct, seg.output.slot
        steps = []
        for j, st in enumerate(seg.steps):
            sj = {"op": st.op, "level": st.level, "plan": st.plan}
            t = st.transform
            if t is not None:
                k = f"t{i}_{j}"
                arrays[f"{k}_terms"], arrays[f"{k}_vectors"] = t.terms, t.vectors
                if t.bias is not None:
                    arrays[f"{k}_bias"] = t.bias
                sj["transform"] = {
                    "n_in": t.n_in, "n_out": t.n_out, "fold": list(t.fold), "replicate": list(t.replicate), "bias": t.bias is not None,
                }
            steps.append(sj)
        segs.append({
            "in_size": seg.in_size, "input_level": seg.input_level, "steps": steps,
            "output_cts": seg.output.n_cts, "output_bound": seg.output_bound, "predicted_s": seg.predicted_s,
        })
    manifest = {
        **manifest_header(program, arrays),
        "steps": [[_fn_to_json(f, arrays, f"s{i}_f{j}") for j, f in enumerate(fns)] for i, fns in enumerate(program.steps)],
        "segments": segs,
        "galois_steps": list(program.galois_steps),
        "needs_relin_key": program.needs_relin_key,
    }
    return pack(manifest, arrays)


def build(m: dict, arrays: dict) -> LatencyProgram:
    """A program from a validated-container manifest ``m`` and its arrays (every field and
    array checked here or by the dataclasses)."""
    from heinfer.program.serialize import _arr, _fn

    params = {k: m["params"][k] for k in ("log_n", "log_q", "log_p", "log_scale", "security")}
    slots = 1 << (int(params["log_n"]) - 1)
    segments = []
    for i, sj in enumerate(m["segments"]):
        steps = []
        for j, st in enumerate(sj["steps"]):
            t = None
            if "transform" in st:
                tj, k = st["transform"], f"t{i}_{j}"
                vectors = _arr(arrays, f"{k}_vectors", np.float64)
                bias = _arr(arrays, f"{k}_bias", np.float64) if tj["bias"] else None
                if not np.isfinite(vectors).all() or (bias is not None and not np.isfinite(bias).all()):
                    raise SerializationError(f"cannot read program: transform {k} has non-finite weights")
                t = Transform(
                    int(tj["n_in"]), int(tj["n_out"]), slots, _arr(arrays, f"{k}_terms", np.int64), vectors, bias,
                    tuple(int(s) for s in tj["fold"]), tuple(int(s) for s in tj.get("replicate", ())),
                )
            plan = st.get("plan", {})
            if not isinstance(plan, dict):
                raise SerializationError("cannot read program: a step's plan is not an object")
            steps.append(LatencyStep(str(st["op"]), int(st["level"]), t, plan))
        out = Placement(int(sj["output_cts"]), slots, _arr(arrays, f"o{i}_ct", np.int64), _arr(arrays, f"o{i}_slot", np.int64))
        segments.append(LatencySegment(
            int(sj["in_size"]), int(sj["input_level"]), _arr(arrays, f"g{i}", np.int64), steps, out,
            float(sj["output_bound"]), float(sj["predicted_s"]),
        ))
    return LatencyProgram(
        params=params,
        input_name=str(m["input_name"]),
        input_shape=tuple(int(v) for v in m["input_shape"]),
        output_name=str(m["output_name"]),
        output_shape=tuple(int(v) for v in m["output_shape"]),
        input_bound=float(m["input_bound"]),
        pre=[_fn(f, arrays) for f in m["pre"]],
        segments=segments,
        steps=[[_fn(f, arrays) for f in fns] for fns in m["steps"]],
        post=[_fn(f, arrays) for f in m["post"]],
        galois_steps=[int(s) for s in m["galois_steps"]],
        needs_relin_key=bool(m["needs_relin_key"]),
        meta=dict(m.get("meta", {})),
    )
