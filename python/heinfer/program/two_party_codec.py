"""Two-party programs to and from (manifest, arrays) sections (program kinds 2 and 3).

Layer: ``heinfer.program``. The public section holds the BFV parameters, shapes, fixed-point
fractions, layouts (gather maps, output placements, folds on shares, row pairs), circuit steps
(kind, shift, windows, pools), flooding exponents, trailing client functions and rotation
steps; the weights section the transforms. Every field is type-checked, every index array range-checked against the sizes
it indexes, before a program is built.
"""

from __future__ import annotations

import numpy as np

from heinfer.errors import SerializationError
from heinfer.program.codec import _arr, _f, _fn, _fn_to_json, _i, gemm_from_json, gemm_to_json
from heinfer.program.validate import check_io
from heinfer.program.placement import Placement
from heinfer.program.share_folds import fold_problem
from heinfer.program.transform import Transform
from heinfer.program.two_party import TwoPartyProgram, TwoPartySegment, TwoPartyStep, clip_range

__all__ = ["two_party_public_to_json", "two_party_public_from_json", "two_party_weights_to_json", "two_party_weights_from_json"]

_BFV_KEYS = ("log_n", "log_q", "log_p", "plain_modulus", "security")
_STEP_KINDS = ("relu", "maxpool_relu", "clip", "square")
_MODES = ("latency", "throughput")


def two_party_public_to_json(p: TwoPartyProgram) -> tuple[dict, dict]:
    """The public section's manifest and arrays."""
    arrays: dict[str, np.ndarray] = {}
    segs = []
    for i, s in enumerate(p.segments):
        arrays[f"seg{i}.gather"] = np.asarray(s.gather, dtype=np.int64)
        arrays[f"seg{i}.out_ct"] = s.output.ct
        arrays[f"seg{i}.out_slot"] = s.output.slot
        segs.append({"in_size": s.in_size, "out_size": s.out_size, "flood_bits": s.flood_bits, "out_cts": s.output.n_cts, "slots": s.output.slots})
        if s.fold:  # written only when present: programs without keep their bytes (and id)
            segs[-1]["fold"] = [int(x) for x in s.fold]
        if s.row_pairs:
            segs[-1]["row_pairs"] = True
    steps = []
    for i, st in enumerate(p.steps):
        arrays[f"step{i}.groups"] = np.asarray(st.groups, dtype=np.int64)
        if st.pool is not None:
            arrays[f"step{i}.pool"] = np.asarray(st.pool, dtype=np.int64)
        steps.append({"kind": st.kind, "shift": st.shift, "in_size": st.in_size, "pool": st.pool is not None})
        if st.kind == "clip":  # written only for clips: other steps keep their bytes (and id)
            steps[-1].update(lo=st.lo, hi=st.hi)
        if sum(st.keep):  # likewise, only where values pass through
            steps[-1]["keep"] = list(st.keep)
    manifest = {
        "protocol": "two-party",
        "bfv": {k: p.bfv[k] for k in _BFV_KEYS},
        "input_name": p.input_name,
        "input_shape": list(p.input_shape),
        "output_name": p.output_name,
        "output_shape": list(p.output_shape),
        "input_frac": p.input_frac,
        "output_frac": p.output_frac,
        "input_bound": p.input_bound,
        "segments": segs,
        "steps": steps,
        "pre": [_fn_to_json(f, arrays, f"pre{i}.groups") for i, f in enumerate(p.pre)],
        "post": [_fn_to_json(f, arrays, f"post{i}.groups") for i, f in enumerate(p.post)],
        "rotation_steps": list(p.rotation_steps),
    }
    if p.batch_axis:  # latency programs keep the manifest (and the id) they had before
        manifest.update(mode=p.mode, batch_capacity=p.batch_capacity)
    if "auto" in p.meta:  # mode="auto"'s record (public: predicted times, refusals); only when present
        manifest["meta"] = {"auto": p.meta["auto"]}
    return manifest, arrays


def _index(a: np.ndarray, lo: int, hi: int, what: str) -> np.ndarray:
    if a.size and (a.min() < lo or a.max() >= hi):
        raise SerializationError(f"cannot read program: {what} indexes outside [{lo}, {hi})")
    return a


def two_party_public_from_json(m: dict, arrays) -> TwoPartyProgram:
    """Decodes and checks the public section."""
    if m["protocol"] != "two-party":
        raise SerializationError("cannot read program: not a two-party program")
    b = m["bfv"]
    bfv = {"log_n": _i(b["log_n"]), "log_q": [_i(x) for x in b["log_q"]], "log_p": [_i(x) for x in b["log_p"]],
           "plain_modulus": _i(b["plain_modulus"]), "security": _i(b["security"])}
    if not 10 <= bfv["log_n"] <= 16:
        raise SerializationError(f"cannot read program: log_n = {bfv['log_n']}")
    mode = str(m.get("mode", "latency"))  # programs written before throughput mode: latency
    capacity = _i(m.get("batch_capacity", 1))
    if mode not in _MODES:
        raise SerializationError(f"cannot read program: mode {mode!r}")
    if not 1 <= capacity <= (1 << bfv["log_n"]) or (mode == "latency" and capacity != 1):
        raise SerializationError(f"cannot read program: {capacity} items per query in {mode} mode")
    n_slots = 1 << (bfv["log_n"] - 1) if mode == "latency" else 1
    segments = []
    for i, s in enumerate(m["segments"]):
        in_size, out_size, slots = _i(s["in_size"]), _i(s["out_size"]), _i(s["slots"])
        if slots != n_slots:
            raise SerializationError(f"cannot read program: segment {i} has {slots} slots, the {mode} layout {n_slots}")
        gather = _index(_arr(arrays, f"seg{i}.gather", np.int64), -1, in_size, f"segment {i}'s gather map")
        if gather.ndim != 2 or gather.shape[1] != n_slots:
            raise SerializationError(f"cannot read program: segment {i}'s gather map has shape {gather.shape}")
        out = Placement(_i(s["out_cts"]), slots, _arr(arrays, f"seg{i}.out_ct", np.int64), _arr(arrays, f"seg{i}.out_slot", np.int64))
        if out.size != out_size:
            raise SerializationError(f"cannot read program: segment {i} places {out.size} outputs, declares {out_size}")
        fold = tuple(_i(x) for x in s.get("fold", []))
        if fold and (mode != "latency" or (why := fold_problem(out, fold)) is not None):
            raise SerializationError(f"cannot read program: segment {i}'s folds on shares: {why if mode == 'latency' else 'latency mode only'}")
        pairs = s.get("row_pairs", False)
        if pairs is not False and (pairs is not True or mode != "latency" or gather.shape[0] < 2):
            raise SerializationError(f"cannot read program: segment {i}'s row pairs ({pairs!r}) need latency mode and two inputs or more")
        seg = TwoPartySegment(gather, in_size, out_size, out, _i(s["flood_bits"]), fold, pairs)
        if mode == "throughput":  # one ciphertext per element, in order: nothing else is built
            want = TwoPartySegment.batch_axis(in_size, out_size, seg.flood_bits)
            if out.n_cts != out_size or not (np.array_equal(gather, want.gather) and np.array_equal(out.ct, want.output.ct)):
                raise SerializationError(f"cannot read program: segment {i} is not a batch-axis layout")
        segments.append(seg)
    steps = []
    for i, st in enumerate(m["steps"]):
        kind = str(st["kind"])
        if kind not in _STEP_KINDS or i + 1 >= len(segments):
            raise SerializationError(f"cannot read program: step {i} of kind {kind!r}")
        in_size = _i(st["in_size"])
        if in_size != segments[i].out_size:
            raise SerializationError(f"cannot read program: step {i} takes {in_size} values, segment {i} yields {segments[i].out_size}")
        groups = _index(_arr(arrays, f"step{i}.groups", np.int64), 0, in_size, f"step {i}'s windows")
        pool = _arr(arrays, f"step{i}.pool", np.int64) if st["pool"] is True else None
        if groups.ndim != 2 or (pool is not None and pool.ndim != 2):
            raise SerializationError(f"cannot read program: step {i}'s windows are not 2-D")
        if pool is not None:
            _index(pool, 0, groups.shape[0], f"step {i}'s pool")
        if kind != "maxpool_relu" and groups.shape[1] != 1:
            raise SerializationError(f"cannot read program: step {i} ({kind}) has windows of {groups.shape[1]} values")
        if kind == "square" and pool is not None:
            raise SerializationError(f"cannot read program: step {i} (square) has a pool")
        lo, hi = (_i(st["lo"]), _i(st["hi"])) if kind == "clip" else (0, 0)
        shift = _i(st["shift"])
        if kind == "clip" and not _clip_fits(bfv["plain_modulus"], shift, lo, hi):
            raise SerializationError(f"cannot read program: step {i} clips to [{lo}, {hi}], outside what the circuit holds modulo p")
        keep = st.get("keep", [0, 0])
        if not isinstance(keep, list) or len(keep) != 2:
            raise SerializationError(f"cannot read program: step {i}'s kept values {keep!r}")
        keep = (_i(keep[0]), _i(keep[1]))
        if sum(keep) and (min(keep) < 0 or sum(keep) >= in_size or kind == "square"):
            raise SerializationError(f"cannot read program: step {i} ({kind}) keeps {keep} of {in_size} values")
        if sum(keep):
            _index(groups, keep[0], in_size - keep[1], f"step {i}'s windows (beside the kept values)")
        step = TwoPartyStep(kind, shift, in_size, groups, pool, lo, hi, keep)
        if step.out_size != segments[i + 1].in_size:
            raise SerializationError(f"cannot read program: step {i} yields {step.out_size} values, segment {i + 1} takes {segments[i + 1].in_size}")
        steps.append(step)
    if len(steps) != len(segments) - 1:
        raise SerializationError(f"cannot read program: {len(steps)} steps between {len(segments)} segments")
    prog = TwoPartyProgram(
        bfv=bfv,
        input_name=str(m["input_name"]),
        input_shape=tuple(_i(d) for d in m["input_shape"]),
        output_name=str(m["output_name"]),
        output_shape=tuple(_i(d) for d in m["output_shape"]),
        input_frac=_i(m["input_frac"]),
        output_frac=_i(m["output_frac"]),
        input_bound=_f(m["input_bound"]),
        pre=[_fn(f, arrays) for f in m.get("pre", [])],  # none in programs written before they ran
        segments=segments,
        steps=steps,
        post=[_fn(f, arrays) for f in m["post"]],
        rotation_steps=[_i(s) for s in m["rotation_steps"]],
        mode=mode,
        batch_capacity=capacity,
    )
    prog.meta = _public_meta(m.get("meta", {}))
    if any(s.row_pairs and prog.squared_input(k) for k, s in enumerate(segments)):
        raise SerializationError("cannot read program: a squared input fills both rows already; it cannot travel in row pairs")
    # the client functions chain from the input to the first layer and from the last to the output
    check_io(prog, segments[0].in_size, segments[-1].out_size)
    return prog


def _clip_fits(p: int, shift: int, lo: int, hi: int) -> bool:
    """Whether ``heinfer.twoparty.LayerCircuit("clip", p, shift, lo=lo, hi=hi)`` exists."""
    low, high = clip_range(p, shift)
    return low <= lo <= hi <= high


def _public_meta(meta) -> dict:
    """The public metadata of a manifest: ``{"auto": record}`` or nothing (checked as JSON
    objects and numbers; the record is informative, it changes nothing the parties run)."""
    if not isinstance(meta, dict) or set(meta) - {"auto"}:
        raise SerializationError("cannot read program: meta must be an object with at most the key 'auto'")
    auto = meta.get("auto")
    if auto is None:
        return {}
    if not isinstance(auto, dict) or not isinstance(auto.get("batch_size"), int) or not all(
        isinstance(auto.get(f"{m}_s", 0.0), (int, float)) for m in ("latency", "throughput")
    ):
        raise SerializationError("cannot read program: meta.auto is not a record of mode='auto'")
    return {"auto": auto}


def two_party_weights_to_json(p: TwoPartyProgram) -> tuple[dict, dict]:
    """The weights section: one transform (latency) or batch-axis layer (throughput) per
    segment."""
    assert p.layers is not None
    arrays: dict[str, np.ndarray] = {}
    layers = []
    if p.batch_axis:
        return {"layers": [gemm_to_json(t, arrays, f"layer{i}") for i, t in enumerate(p.layers)]}, arrays
    for i, t in enumerate(p.layers):
        arrays[f"layer{i}.terms"] = np.asarray(t.terms, dtype=np.int64)
        arrays[f"layer{i}.vectors"] = np.asarray(t.vectors, dtype=np.float64)
        if t.bias is not None:
            arrays[f"layer{i}.bias"] = np.asarray(t.bias, dtype=np.float64)
        layers.append({"n_in": t.n_in, "n_out": t.n_out, "slots": t.slots, "fold": list(t.fold), "replicate": list(t.replicate), "bias": t.bias is not None})
    return {"layers": layers}, arrays


def two_party_weights_from_json(public: TwoPartyProgram, m: dict, arrays) -> TwoPartyProgram:
    """The full program: ``public`` with the transforms decoded and checked against its layouts."""
    if public.batch_axis:
        return _gemms_from_json(public, m, arrays)
    layers = []
    for i, lj in enumerate(m["layers"]):
        t = Transform(
            _i(lj["n_in"]), _i(lj["n_out"]), _i(lj["slots"]),
            _arr(arrays, f"layer{i}.terms", np.int64), _arr(arrays, f"layer{i}.vectors", np.float64),
            _arr(arrays, f"layer{i}.bias", np.float64) if lj["bias"] is True else None,
            tuple(_i(s) for s in lj["fold"]), tuple(_i(s) for s in lj["replicate"]),
        )
        if not np.array_equal(t.vectors, np.rint(t.vectors)) or (t.bias is not None and not np.array_equal(t.bias, np.rint(t.bias))):
            raise SerializationError(f"cannot read program: layer {i}'s weights are not integers")
        layers.append(t)
    if len(layers) != len(public.segments) or any(
        t.n_in != s.n_inputs or t.n_out != s.output.n_cts for t, s in zip(layers, public.segments)
    ):
        raise SerializationError("cannot read program: the transforms do not match the segments' layouts")
    public.layers = layers
    return public


def _gemms_from_json(public: TwoPartyProgram, m: dict, arrays) -> TwoPartyProgram:
    """Throughput mode's layers: integer matrices at weight scale 1 matching the segments."""
    layers = []
    for i, lj in enumerate(m["layers"]):
        if lj.get("kind") != "gemm":
            raise SerializationError(f"cannot read program: layer {i} is not a batch-axis layer")
        t = gemm_from_json(i, lj, arrays)
        if t.weight_scale != 1.0 or not np.array_equal(t.matrix.data, np.rint(t.matrix.data)) or (
            t.bias is not None and not np.array_equal(t.bias, np.rint(t.bias))
        ):
            raise SerializationError(f"cannot read program: layer {i}'s weights are not integers at scale 1")
        layers.append(t)
    if len(layers) != len(public.segments) or any(
        (t.in_size, t.out_size) != (s.in_size, s.out_size) for t, s in zip(layers, public.segments)
    ):
        raise SerializationError("cannot read program: the layers do not match the segments")
    public.layers = layers
    return public
