"""Programs to and from (manifest, arrays) pairs: the content of format-3 sections.

Layer: ``heinfer.program``. :func:`public_to_json` / :func:`public_from_json` handle the
public part (parameters, layouts, ops, steps, functions, bounds, key manifest);
:func:`weights_to_json` / :func:`weights_from_json` the server's layers. Every field read is
type-checked here or by the dataclasses' validation; arrays by dtype, shape and range.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp

from heinfer.errors import SerializationError
from heinfer.program.functions import ClientFunction
from heinfer.program.model import PUBLIC_META, Layout, Program, PublicProgram, Segment, Step
from heinfer.program.ops import op_from_json, op_to_json
from heinfer.program.placement import Placement
from heinfer.program.transform import HOISTINGS, Transform
from heinfer.program.weights import LinearStep

__all__ = ["public_to_json", "public_from_json", "weights_to_json", "weights_from_json"]

_PARAM_KEYS = ("log_n", "log_q", "log_p", "log_scale", "security")


def _fn_to_json(f: ClientFunction, arrays: dict, key: str) -> dict:
    if f.groups is not None:
        arrays[key] = np.asarray(f.groups, dtype=np.int64)
    return {"name": f.name, "kind": f.kind, "attrs": f.attrs, "in_shape": list(f.in_shape), "out_shape": list(f.out_shape), "groups": key if f.groups is not None else None, "keep": list(f.keep)}


def _fn(j: dict, arrays: dict) -> ClientFunction:
    groups = _arr(arrays, j["groups"], np.int64) if j["groups"] is not None else None
    return ClientFunction(str(j["name"]), str(j["kind"]), dict(j["attrs"]), tuple(j["in_shape"]), tuple(j["out_shape"]), groups, _keep(j["keep"]))


def _keep(v: object) -> tuple[int, int]:
    if not isinstance(v, list) or len(v) != 2:
        raise TypeError(f"keep must be a list of two integers, got {v!r}")
    return (_i(v[0]), _i(v[1]))


def _arr(arrays: dict, key: str, dtype) -> np.ndarray:
    a = arrays[key]
    if a.dtype != np.dtype(dtype):
        raise SerializationError(f"cannot read program: array {key!r} has dtype {a.dtype}, expected {np.dtype(dtype)}")
    return a


def public_to_json(p: PublicProgram) -> tuple[dict, dict]:
    """The public section's manifest and arrays."""
    arrays: dict[str, np.ndarray] = {}
    segs = []
    for i, s in enumerate(p.segments):
        layout = {"kind": s.layout.kind, "packing": s.layout.packing}
        if s.layout.gather is not None:
            arrays[f"seg{i}.gather"] = s.layout.gather
            layout["gather"] = f"seg{i}.gather"
        out = None
        if s.output is not None:
            arrays[f"seg{i}.out_ct"], arrays[f"seg{i}.out_slot"] = s.output.ct, s.output.slot
            out = {"n_cts": s.output.n_cts}
        segs.append({
            "layout": layout, "in_size": s.in_size, "input_level": s.input_level, "input_scale": s.input_scale,
            "ops": [op_to_json(op) for op in s.ops], "out_size": s.out_size, "output_level": s.output_level,
            "output_scale": s.output_scale, "output_bound": s.output_bound, "precision": s.precision,
            "output": out, "predicted_s": s.predicted_s,
        })
    manifest = {
        "format": "heinfer-program",
        "params": {k: p.params[k] for k in _PARAM_KEYS},
        "input_name": p.input_name,
        "input_shape": list(p.input_shape),
        "output_name": p.output_name,
        "output_shape": list(p.output_shape),
        "input_bound": p.input_bound,
        "pre": [_fn_to_json(f, arrays, f"pre{j}") for j, f in enumerate(p.pre)],
        "post": [_fn_to_json(f, arrays, f"post{j}") for j, f in enumerate(p.post)],
        "segments": segs,
        "steps": [
            {"protocol": st.protocol, "in_size": st.in_size, "out_size": st.out_size,
             "functions": [_fn_to_json(f, arrays, f"step{i}.f{j}") for j, f in enumerate(st.functions)]}
            for i, st in enumerate(p.steps)
        ],
        "needs_relin_key": p.needs_relin_key,
        "rotation_steps": list(p.rotation_steps),
        "meta": {k: v for k, v in p.meta.items() if k in PUBLIC_META},
        "lanes": p.lanes,
    }
    return manifest, arrays


def public_from_json(m: dict, arrays) -> PublicProgram:
    """The public program of a manifest (every array used exactly as named)."""
    if m.get("format") != "heinfer-program":
        raise SerializationError("cannot read program: not a heinfer program")
    params = {k: m["params"][k] for k in _PARAM_KEYS}
    slots = 1 << (_log_n(params["log_n"]) - 1)
    segments = []
    for s in m["segments"]:
        lj = s["layout"]
        gather = _arr(arrays, lj["gather"], np.int64) if "gather" in lj else None
        out = None
        if s["output"] is not None:
            i = len(segments)
            out = Placement(_i(s["output"]["n_cts"]), slots, _arr(arrays, f"seg{i}.out_ct", np.int64), _arr(arrays, f"seg{i}.out_slot", np.int64))
        segments.append(Segment(
            Layout(str(lj["kind"]), str(lj["packing"]), gather), _i(s["in_size"]), _i(s["input_level"]),
            _f(s["input_scale"]), [op_from_json(o) for o in s["ops"]], _i(s["out_size"]), _i(s["output_level"]),
            _f(s["output_scale"]), _f(s["output_bound"]), _f(s["precision"]), out, _f(s["predicted_s"]),
        ))
    steps = [Step([_fn(f, arrays) for f in st["functions"]], _i(st["in_size"]), _i(st["out_size"]), str(st["protocol"])) for st in m["steps"]]
    meta = m.get("meta", {})
    if not isinstance(meta, dict):
        raise SerializationError("cannot read program: meta is not an object")
    program = PublicProgram(
        params=params, input_name=str(m["input_name"]), input_shape=tuple(_i(v) for v in m["input_shape"]),
        output_name=str(m["output_name"]), output_shape=tuple(_i(v) for v in m["output_shape"]),
        input_bound=_f(m["input_bound"]), pre=[_fn(f, arrays) for f in m["pre"]], segments=segments, steps=steps,
        post=[_fn(f, arrays) for f in m["post"]], needs_relin_key=_bool(m["needs_relin_key"]),
        rotation_steps=[_i(v) for v in m["rotation_steps"]], meta=dict(meta), lanes=_i(m["lanes"]),
    )
    arrays.done()
    return program


def weights_to_json(p: Program) -> tuple[dict, dict]:
    """The weights section: every layer, the search's plans and the private meta."""
    arrays: dict[str, np.ndarray] = {}
    layers = []
    for i, lay in enumerate(p.layers):
        k = f"layer{i}"
        if isinstance(lay, LinearStep):
            layers.append(gemm_to_json(lay, arrays, k))
        else:
            arrays[f"{k}.terms"], arrays[f"{k}.vectors"] = lay.terms, lay.vectors
            if lay.bias is not None:
                arrays[f"{k}.bias"] = lay.bias
            layers.append({"kind": "diagonals", "n_in": lay.n_in, "n_out": lay.n_out, "fold": list(lay.fold), "replicate": list(lay.replicate), "bias": lay.bias is not None, "hoisting": lay.hoisting})
    manifest = {"layers": layers, "plans": p.plans, "meta": p.meta}
    return manifest, arrays


def weights_from_json(public: PublicProgram, m: dict, arrays) -> Program:
    """The full program: ``public`` plus the weights section."""
    layers: list = []
    for i, lj in enumerate(m["layers"]):
        k = f"layer{i}"
        if lj["kind"] == "gemm":
            layers.append(gemm_from_json(i, lj, arrays))
        elif lj["kind"] == "diagonals":
            vectors = _arr(arrays, f"{k}.vectors", np.float64)
            bias = _arr(arrays, f"{k}.bias", np.float64) if _bool(lj["bias"]) else None
            if not np.isfinite(vectors).all() or (bias is not None and not np.isfinite(bias).all()):
                raise SerializationError(f"cannot read program: layer {i} has non-finite weights")
            layers.append(Transform(
                _i(lj["n_in"]), _i(lj["n_out"]), public.slots, _arr(arrays, f"{k}.terms", np.int64), vectors, bias,
                tuple(_i(s) for s in lj["fold"]), tuple(_i(s) for s in lj["replicate"]), _hoisting(i, lj),
            ))
        else:
            raise SerializationError(f"cannot read program: layer {i} of unknown kind {lj['kind']!r}")
    plans, meta = m["plans"], m["meta"]
    if not isinstance(plans, dict) or not isinstance(meta, dict):
        raise SerializationError("cannot read program: plans and meta must be objects")
    fields = {f.name: getattr(public, f.name) for f in dataclasses.fields(PublicProgram)}
    fields["meta"] = {**meta, **public.meta}
    program = Program(**fields, layers=layers, plans=dict(plans))
    arrays.done()
    return program


def gemm_to_json(lay: LinearStep, arrays: dict, k: str) -> dict:
    """A batch-axis layer's manifest entry; its sparse matrix and bias go to ``arrays`` under
    the prefix ``k`` (read back by :func:`gemm_from_json`)."""
    m = lay.matrix.tocsr()
    arrays[f"{k}.data"], arrays[f"{k}.indices"], arrays[f"{k}.indptr"] = m.data.astype(np.float64), m.indices.astype(np.int64), m.indptr.astype(np.int64)
    if lay.bias is not None:
        arrays[f"{k}.bias"] = lay.bias
    return {"kind": "gemm", "name": lay.name, "shape": list(m.shape), "weight_scale": lay.weight_scale, "digits": lay.digits, "bias": lay.bias is not None}


def gemm_from_json(i: int, lj: dict, arrays) -> LinearStep:
    """Layer ``i`` written by :func:`gemm_to_json`, checked (consistent sparse structure,
    indices in range, finite values) before it is built."""
    k = f"layer{i}"
    rows, cols = (_i(v) for v in lj["shape"])
    data = _arr(arrays, f"{k}.data", np.float64)
    indices, indptr = _arr(arrays, f"{k}.indices", np.int64), _arr(arrays, f"{k}.indptr", np.int64)
    if indptr.shape != (rows + 1,) or indptr[0] != 0 or indptr[-1] != len(data) or len(indices) != len(data) or np.any(np.diff(indptr) < 0):
        raise SerializationError(f"cannot read program: layer {i} has an inconsistent sparse matrix")
    if len(indices) and (indices.min() < 0 or indices.max() >= cols):
        raise SerializationError(f"cannot read program: layer {i} has a column index out of range")
    if not np.isfinite(data).all():
        raise SerializationError(f"cannot read program: layer {i} has non-finite weights")
    bias = _arr(arrays, f"{k}.bias", np.float64) if _bool(lj["bias"]) else None
    if bias is not None and (bias.shape != (rows,) or not np.isfinite(bias).all()):
        raise SerializationError(f"cannot read program: layer {i} has a malformed bias")
    matrix = sp.csr_matrix((data, indices, indptr), shape=(rows, cols))
    return LinearStep(str(lj["name"]), matrix, bias, _f(lj["weight_scale"]), _i(lj["digits"]))


def _log_n(v: object) -> int:
    """A ring degree's log, checked before anything is sized by it (a forged ``2^62`` would
    ask for exabytes): the engine's 11 to 16."""
    log_n = _i(v)
    if not 11 <= log_n <= 16:
        raise SerializationError(f"cannot read program: ring degree 2^{log_n} (2^11 to 2^16)")
    return log_n


def _i(v: object) -> int:
    """A manifest integer (no float, string or bool where an integer belongs)."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise SerializationError(f"cannot read program: expected an integer, got {v!r}")
    return v


def _f(v: object) -> float:
    """A manifest number (no string or bool where a number belongs)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise SerializationError(f"cannot read program: expected a number, got {v!r}")
    return float(v)


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise SerializationError(f"cannot read program: expected true/false, got {v!r}")
    return v


def _hoisting(i: int, lj: dict) -> str:
    """Layer ``i``'s hoisting (``"double"`` where a program written before it existed has none)."""
    h = lj.get("hoisting", "double")
    if h not in HOISTINGS:
        raise SerializationError(f"cannot read program: layer {i} has hoisting {h!r}, expected one of {HOISTINGS}")
    return h
