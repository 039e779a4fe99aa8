"""The versioned byte format of a :class:`~heinfer.program.model.Program`.

A program is a ``.npz`` archive (numpy's zip of arrays, read with ``allow_pickle=False``):
``manifest`` holds UTF-8 JSON (format version, parameters, segments, steps, shapes) and the
other members hold the arrays (weights as CSR triplets, biases, pooling groups, hiding
components). :func:`load` validates everything before building the program: version, JSON
types, array dtypes and shapes, index ranges; any failure is a
:class:`~heinfer.errors.SerializationError` naming the problem.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction
from heinfer.errors import CompileError, SerializationError
from heinfer.program.latency import LatencyProgram
from heinfer.program.model import FORMAT_VERSION, ClientStep, Instr, LinearStep, Program, Segment

__all__ = ["dump", "load", "MAX_PROGRAM_BYTES"]

#: Largest program accepted by :func:`load` (1 GiB).
MAX_PROGRAM_BYTES = 1 << 30
#: Largest ratio of inflated to stored size (weights compress about 4×; zip bombs far more).
INFLATION = 16


def _fn_to_json(f: ClientFunction, arrays: dict, key: str) -> dict:
    if f.groups is not None:
        arrays[key] = np.asarray(f.groups, dtype=np.int64)
    return {"name": f.name, "kind": f.kind, "attrs": f.attrs, "in_shape": list(f.in_shape), "out_shape": list(f.out_shape), "groups": key if f.groups is not None else None}


def dump(program: Program) -> bytes:
    """The program as bytes (see the module documentation)."""
    arrays: dict[str, np.ndarray] = {}
    layers = []
    for i, lay in enumerate(program.layers):
        m = lay.matrix.tocsr()
        arrays[f"l{i}_data"], arrays[f"l{i}_indices"], arrays[f"l{i}_indptr"] = m.data, m.indices.astype(np.int64), m.indptr.astype(np.int64)
        if lay.bias is not None:
            arrays[f"l{i}_bias"] = lay.bias
        layers.append({"name": lay.name, "shape": list(m.shape), "weight_scale": lay.weight_scale, "digits": lay.digits, "bias": lay.bias is not None})
    steps = []
    for i, st in enumerate(program.steps):
        arrays[f"s{i}_comp"], arrays[f"s{i}_outcomp"] = st.components.astype(np.int64), st.out_components.astype(np.int64)
        steps.append({"functions": [_fn_to_json(f, arrays, f"s{i}_f{j}") for j, f in enumerate(st.functions)], "in_size": st.in_size, "out_size": st.out_size, "hide_scale": st.hide_scale})
    manifest = {
        **manifest_header(program, arrays),
        "packing": program.packing,
        "segments": [
            {
                "in_size": s.in_size,
                "input_level": s.input_level,
                "input_scale": s.input_scale,
                "instrs": [[i.op, i.arg] for i in s.instrs],
                "out_size": s.out_size,
                "output_level": s.output_level,
                "output_bound": s.output_bound,
                "predicted_error": s.predicted_error,
            }
            for s in program.segments
        ],
        "steps": steps,
        "layers": layers,
        "hide_range": program.hide_range,
        "needs_relin_key": program.needs_relin_key,
    }
    return pack(manifest, arrays)


def manifest_header(program, arrays: dict) -> dict:
    """The manifest fields both program kinds share (format, version, mode, parameters, I/O
    names, shapes and bound, pre-/post-processing functions whose arrays go to ``arrays``, meta)."""
    return {
        "format": "heinfer-program",
        "version": FORMAT_VERSION,
        "mode": program.mode,
        "params": program.params,
        "input_name": program.input_name,
        "input_shape": list(program.input_shape),
        "output_name": program.output_name,
        "output_shape": list(program.output_shape),
        "input_bound": program.input_bound,
        "pre": [_fn_to_json(f, arrays, f"pre{j}") for j, f in enumerate(program.pre)],
        "post": [_fn_to_json(f, arrays, f"post{j}") for j, f in enumerate(program.post)],
        "meta": program.meta,
    }


def pack(manifest: dict, arrays: dict) -> bytes:
    """The archive of a manifest and its arrays."""
    arrays["manifest"] = np.frombuffer(json.dumps(manifest).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def load(data: bytes, max_bytes: int = MAX_PROGRAM_BYTES) -> Program | LatencyProgram:
    """Validates and decodes a program written by :func:`dump` (or, for ``mode = "latency"``,
    by :func:`heinfer.program.latency_format.dump`)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"a program is bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise SerializationError(f"program of {len(data)} bytes exceeds the limit of {max_bytes}")
    try:
        # the archive's declared sizes bound the work before anything is inflated (zip bombs)
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
            inflated = sum(i.file_size for i in zf.infolist())
        if inflated > min(MAX_PROGRAM_BYTES, INFLATION * max_bytes):
            raise SerializationError(f"program inflates to {inflated} bytes, over {INFLATION}× the limit of {max_bytes}")
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as z:
            arrays = {}
            for k in z.files:
                arrays[k] = z[k]
                if arrays[k].nbytes > INFLATION * max_bytes:
                    raise SerializationError(f"array {k!r} declares {arrays[k].nbytes} bytes, over the limit")
    except SerializationError:
        raise
    except Exception as e:  # noqa: BLE001 - untrusted archive: numpy's header parser alone raises
        # ValueError, SyntaxError, tokenize.TokenError; zipfile/zlib add more — all mean "invalid"
        raise SerializationError(f"cannot read program: not a valid heinfer program archive ({type(e).__name__}: {e})") from None
    try:
        m = json.loads(bytes(arrays.pop("manifest")).decode())
        if m.get("format") != "heinfer-program":
            raise SerializationError("cannot read program: not a heinfer program")
        if m.get("version") != FORMAT_VERSION:
            raise SerializationError(f"cannot read program: format version {m.get('version')}, this build reads {FORMAT_VERSION}")
        used = _Tracking(arrays)
        if m.get("mode") == "latency":
            from heinfer.program.latency_format import build

            program = build(m, used)
        else:
            program = _build(m, used)
        extra = sorted(set(arrays) - used.seen)
        if extra:
            raise SerializationError(f"cannot read program: unexpected members {extra[:5]}")
        return program
    except SerializationError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError, CompileError) as e:
        raise SerializationError(f"cannot read program: malformed content ({type(e).__name__}: {e})") from None


class _Tracking(dict):
    """The archive's arrays, remembering which ones the manifest used."""

    def __init__(self, arrays: dict) -> None:
        super().__init__(arrays)
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> np.ndarray:
        self.seen.add(key)
        return super().__getitem__(key)


def _arr(arrays: dict, key: str, dtype) -> np.ndarray:
    a = arrays[key]
    if a.dtype != dtype:
        raise SerializationError(f"cannot read program: array {key!r} has dtype {a.dtype}, expected {np.dtype(dtype)}")
    return a


def _fn(j: dict, arrays: dict) -> ClientFunction:
    groups = _arr(arrays, j["groups"], np.int64) if j["groups"] is not None else None
    return ClientFunction(str(j["name"]), str(j["kind"]), dict(j["attrs"]), tuple(j["in_shape"]), tuple(j["out_shape"]), groups)


def _build(m: dict, arrays: dict) -> Program:
    layers = []
    for i, lj in enumerate(m["layers"]):
        rows, cols = (int(v) for v in lj["shape"])
        data = _arr(arrays, f"l{i}_data", np.float64)
        indices, indptr = _arr(arrays, f"l{i}_indices", np.int64), _arr(arrays, f"l{i}_indptr", np.int64)
        if len(indptr) != rows + 1 or indptr[0] != 0 or indptr[-1] != len(data) or len(indices) != len(data) or np.any(np.diff(indptr) < 0):
            raise SerializationError(f"cannot read program: layer {i} has an inconsistent sparse matrix")
        if len(indices) and (indices.min() < 0 or indices.max() >= cols):
            raise SerializationError(f"cannot read program: layer {i} has a column index out of range")
        if not np.isfinite(data).all():
            raise SerializationError(f"cannot read program: layer {i} has non-finite weights")
        bias = _arr(arrays, f"l{i}_bias", np.float64) if lj["bias"] else None
        if bias is not None and (bias.shape != (rows,) or not np.isfinite(bias).all()):
            raise SerializationError(f"cannot read program: layer {i} has a malformed bias")
        ws, digits = float(lj["weight_scale"]), int(lj["digits"])
        if not (np.isfinite(ws) and ws >= 1.0) or digits not in (1, 2):
            raise SerializationError(f"cannot read program: layer {i} has weight scale {ws} and {digits} digits")
        matrix = sp.csr_matrix((data, indices, indptr), shape=(rows, cols))
        layers.append(LinearStep(str(lj["name"]), matrix, bias, ws, digits))
    segments = [
        Segment(
            int(s["in_size"]),
            int(s["input_level"]),
            float(s["input_scale"]),
            [Instr(str(op), int(arg)) for op, arg in s["instrs"]],
            int(s["out_size"]),
            int(s["output_level"]),
            float(s["output_bound"]),
            float(s["predicted_error"]),
        )
        for s in m["segments"]
    ]
    steps = []
    for i, sj in enumerate(m["steps"]):
        comp, out_comp = _arr(arrays, f"s{i}_comp", np.int64), _arr(arrays, f"s{i}_outcomp", np.int64)
        n_in = int(sj["in_size"])
        if comp.shape != (n_in,) or out_comp.shape != (int(sj["out_size"]),):
            raise SerializationError(f"cannot read program: client step {i} has malformed components")
        if (comp.size and (comp.min() < 0 or comp.max() >= n_in)) or (out_comp.size and (out_comp.min() < 0 or out_comp.max() >= n_in)):
            raise SerializationError(f"cannot read program: client step {i} has hiding components out of range")
        steps.append(ClientStep([_fn(f, arrays) for f in sj["functions"]], int(sj["in_size"]), int(sj["out_size"]), bool(sj["hide_scale"]), comp, out_comp))
    return Program(
        mode=str(m["mode"]),
        params={k: m["params"][k] for k in ("log_n", "log_q", "log_p", "log_scale", "security")},
        packing=str(m["packing"]),
        input_name=str(m["input_name"]),
        input_shape=tuple(int(v) for v in m["input_shape"]),
        output_name=str(m["output_name"]),
        output_shape=tuple(int(v) for v in m["output_shape"]),
        input_bound=float(m["input_bound"]),
        pre=[_fn(f, arrays) for f in m["pre"]],
        segments=segments,
        steps=steps,
        post=[_fn(f, arrays) for f in m["post"]],
        layers=layers,
        hide_range=float(m["hide_range"]),
        needs_relin_key=bool(m["needs_relin_key"]),
        meta=dict(m.get("meta", {})),
    )
