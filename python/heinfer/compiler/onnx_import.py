"""ONNX front end: read an ONNX model and turn it into an IR :class:`~.ir.Graph`.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy; never imports the native module).

:func:`load_onnx` checks the model (opset 13–21 of the default domain, one input with a free
batch axis, one output), runs ONNX shape inference, and walks the nodes in their topological
order. Each node is one of:

* a **constant** computation (``Constant`` nodes, and any node whose inputs are all constants,
  e.g. a transposed weight) — evaluated once with ``onnx.reference`` and folded away;
* a **shape** computation (``Shape`` of the activation and what is computed from it, as
  ``torch.onnx.export`` writes ``x.view(x.size(0), -1)``) — evaluated for two probe batch sizes
  so that a later ``Reshape`` can check that it keeps the batch axis;
* a step of the **graph** — it reads computed tensors (and constants) and is translated by the
  converter of its ``op_type`` (:mod:`.onnx_ops`; ``Add``/``Sub``/``Concat`` of several
  computed tensors and ``Sum`` by :mod:`.onnx_combine`).

A tensor may be read by several nodes (branches, residual skips): the result is a
:class:`~.dag.Dag` (:func:`load_onnx_dag`), which :func:`load_onnx` lowers to the chain the
back ends compile (:func:`~.dag.to_chain`). Several outputs are refused.
"""

from __future__ import annotations

import io
import os
from typing import Any, Union

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from heinfer.compiler.dag import Dag, Node, to_chain
from heinfer.compiler.ir import Graph, Linear
from heinfer.compiler.onnx_combine import combine_op
from heinfer.compiler.onnx_ops import BATCH_PROBES, CONVERTERS, NodeInfo
from heinfer.errors import CompileError, UnsupportedOperatorError

__all__ = ["OPSET_RANGE", "SUPPORTED_OPERATORS", "TORCH_EXPORTERS", "from_torch", "load_onnx", "load_onnx_dag"]

#: The ONNX operator types :func:`load_onnx` accepts (default domain).
SUPPORTED_OPERATORS: tuple[str, ...] = tuple(sorted({*CONVERTERS, "Concat", "Constant", "Shape", "Sum"}))

#: The default-domain opset versions :func:`load_onnx` accepts (inclusive).
OPSET_RANGE = (13, 21)

_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
}
_RANDOM_OPS = {
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Bernoulli",
    "Multinomial",
}

ModelSource = Union[str, "os.PathLike[str]", bytes, onnx.ModelProto]


def _unsupported(op_type: str, name: str, why: str = "") -> UnsupportedOperatorError:
    return UnsupportedOperatorError(
        f"ONNX operator {op_type!r} (node {name!r}) is not supported by heinfer{why}; "
        f"supported operators: {', '.join(SUPPORTED_OPERATORS)}",
        op_type=op_type,
        node_name=name,
    )


def _read(model: ModelSource) -> onnx.ModelProto:
    """The ModelProto of ``model``, or a CompileError when it cannot be read or parsed."""
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        if isinstance(model, (bytes, bytearray, memoryview)):
            return onnx.load_model_from_string(bytes(model))
        if isinstance(model, (str, os.PathLike)):
            return onnx.load(os.fspath(model))
    except OSError as e:
        raise CompileError(f"cannot read the ONNX model {os.fspath(model)!r}: {e}") from None
    except DecodeError as e:
        raise CompileError(f"cannot parse the ONNX model: not a valid ModelProto ({e})") from None
    raise CompileError(f"cannot load an ONNX model from a {type(model).__name__}")


def _opset(model: onnx.ModelProto) -> int:
    versions = {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")}
    if len(versions) != 1:
        raise CompileError(
            f"the ONNX model imports the default opset {len(versions)} times; expected exactly once"
        )
    (version,) = versions
    lo, hi = OPSET_RANGE
    if not lo <= version <= hi:
        raise CompileError(
            f"ONNX opset {version} is not supported: heinfer reads opsets "
            f"{lo}–{hi} (convert with onnx.version_converter)"
        )
    return version


def _check(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model after the ONNX checker and strict shape inference."""
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as e:
        raise CompileError(f"the ONNX model is invalid (onnx.checker): {e}") from None
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        raise CompileError(f"ONNX shape inference failed on the model: {e}") from None


def _dims(value_type: onnx.TypeProto) -> list[int | None] | None:
    """Dimensions of a tensor type (None for unknown ones), or None when the rank is unknown."""
    t = value_type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]


def _constant(node: onnx.NodeProto, name: str) -> np.ndarray:
    if len(node.attribute) != 1 or node.attribute[0].name not in (
        "value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
    ):
        raise _unsupported("Constant", name, " (only value/value_float(s)/value_int(s))")
    value = onnx.helper.get_attribute_value(node.attribute[0])
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.array(value, dtype=np.float32 if "float" in node.attribute[0].name else np.int64)


class _Importer:
    """One pass over the nodes of a checked, shape-inferred model (see the module docstring)."""

    def __init__(self, model: onnx.ModelProto, opset: int) -> None:
        g = model.graph
        self.opset = opset
        if len(g.sparse_initializer):
            raise CompileError("sparse initializers are not supported; store weights densely")
        self.consts: dict[str, np.ndarray] = {
            i.name: numpy_helper.to_array(i) for i in g.initializer
        }
        self.pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.types = {v.name: v.type for v in (*g.value_info, *g.output)}
        inputs = [i for i in g.input if i.name not in self.consts]
        if len(inputs) != 1:
            raise CompileError(
                f"the model has {len(inputs)} non-constant inputs "
                f"{[i.name for i in inputs]}; heinfer needs exactly one"
            )
        if len(g.output) != 1:
            raise CompileError(
                f"the model has {len(g.output)} outputs "
                f"{[o.name for o in g.output]}; heinfer needs exactly one"
            )
        self.input_name, self.output_name = inputs[0].name, g.output[0].name
        if inputs[0].type.tensor_type.elem_type not in _FLOAT_TYPES:
            raise CompileError(f"input {self.input_name!r} must be a floating-point tensor")
        dims = _dims(inputs[0].type)
        if not dims or any(d is None or d <= 0 for d in dims[1:]):
            raise CompileError(
                f"input {self.input_name!r} must have shape [batch, ...] with static sizes "
                f"after the batch axis, got {dims}"
            )
        self.static_batch = dims[0]
        self.input_shape = tuple(int(d or 0) for d in dims[1:])
        # The per-item shape of every computed tensor (None for the extra outputs of a node,
        # which nothing may read), the DAG tensor holding its values (a reshape is an alias of
        # its input), and the DAG's nodes.
        self.shapes: dict[str, tuple[int, ...] | None] = {self.input_name: self.input_shape}
        self.alias: dict[str, str] = {self.input_name: self.input_name}
        self.dag_nodes: list[Node] = []
        self.nodes = g.node

    def run(self) -> Dag:
        for index, node in enumerate(self.nodes):
            self._node(node, node.name or f"{node.op_type}_{index}")
        out = self.output_name
        if out in self.consts or out in self.pairs:
            raise CompileError(f"output {out!r} does not depend on the input {self.input_name!r}")
        out_shape = self.shapes.get(out)
        if out_shape is None:
            raise CompileError(f"output {out!r} is not computed by the graph's nodes")
        nodes = _merge_biases(self.dag_nodes, self.alias[out])
        return Dag(self.input_name, self.input_shape, self.alias[out], out_shape, nodes)

    def _node(self, node: onnx.NodeProto, name: str) -> None:
        if node.domain not in ("", "ai.onnx"):
            raise _unsupported(node.op_type, name, f" (domain {node.domain!r})")
        if node.op_type == "Constant":
            self.consts[node.output[0]] = _constant(node, name)
            return
        inputs = [i for i in node.input if i]
        computed = sorted({i for i in inputs if i in self.shapes})
        if not computed:
            self._fold(node, name, inputs)
        elif node.op_type == "Shape":
            self._shape(node, name, computed[0])
        else:
            self._chain(node, name, computed)

    def _fold(self, node: onnx.NodeProto, name: str, inputs: list[str]) -> None:
        """Evaluate a node whose inputs are constants or shape values."""
        if not inputs or node.op_type in _RANDOM_OPS:
            raise _unsupported(node.op_type, name, " (a tensor not computed from the input)")
        missing = [i for i in inputs if i not in self.consts and i not in self.pairs]
        if missing:
            raise CompileError(f"node {name!r} reads undefined tensors {missing}")
        probes = (0, 1) if any(i in self.pairs for i in inputs) else (0,)
        try:
            ref = ReferenceEvaluator(node, opsets={"": self.opset})
            runs = [
                ref.run(
                    None,
                    {i: self.pairs[i][k] if i in self.pairs else self.consts[i] for i in inputs},
                )
                for k in probes
            ]
        except Exception as e:  # noqa: BLE001 - any failure of the reference kernel
            raise CompileError(
                f"cannot fold the constant {node.op_type} node {name!r}: {e}"
            ) from None
        for out, a, b in zip(node.output, runs[0], runs[-1]):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape == b.shape and np.array_equal(a, b):
                self.consts[out] = a
            else:
                self.pairs[out] = (a, b)

    def _shape(self, node: onnx.NodeProto, name: str, tensor: str) -> None:
        """``Shape`` of a computed tensor: a value per probe batch size."""
        shape = self.shapes[tensor]
        if shape is None:
            raise CompileError(f"node {name!r} reads {tensor!r}, which nothing may read")
        start, end = 0, None
        for a in node.attribute:
            if a.name == "start":
                start = a.i
            elif a.name == "end":
                end = a.i
        values = [np.array((b, *shape), dtype=np.int64)[start:end] for b in BATCH_PROBES]
        if np.array_equal(values[0], values[1]):
            self.consts[node.output[0]] = values[0]
        else:
            self.pairs[node.output[0]] = (values[0], values[1])

    def _chain(self, node: onnx.NodeProto, name: str, computed: list[str]) -> None:
        """Translate a node that reads one computed tensor (and constants)."""
        op_type = node.op_type
        if len(computed) > 1 or op_type in ("Concat", "Sum"):
            self._combine(node, name, computed)
            return
        (x,) = computed
        x_shape = self.shapes[x]
        if x_shape is None:
            raise CompileError(f"node {name!r} reads {x!r}, an extra output of a node (only the first output may be read)")
        if op_type not in CONVERTERS:
            raise _unsupported(op_type, name)
        info = NodeInfo(
            node, name, self.opset, x, x_shape, self.consts, self.pairs, self.static_batch
        )
        ops, out_shape = CONVERTERS[op_type](info)
        self._define(node, name, ops, [self.alias[x]], out_shape)

    def _combine(self, node: onnx.NodeProto, name: str, computed: list[str]) -> None:
        """A node that combines several computed tensors (Add, Sub, Concat)."""
        inputs = [i for i in node.input if i]
        missing = [i for i in inputs if i not in self.shapes]
        if node.op_type not in ("Add", "Sub", "Sum", "Concat") or missing:
            raise _unsupported(
                node.op_type,
                name,
                f" with the computed inputs {computed}" + (f" and the constants {missing}" if missing else "")
                + " (only Add, Sub, Sum and Concat combine computed tensors, Mul squares one tensor)",
            )
        shapes = [self.shapes[i] for i in inputs]
        if any(s is None for s in shapes):
            raise CompileError(f"node {name!r} reads an extra output of a node (only the first output may be read)")
        info = NodeInfo(node, name, self.opset, inputs[0], shapes[0], self.consts, self.pairs, self.static_batch)
        op, out_shape = combine_op(info, shapes)  # type: ignore[arg-type]
        self._define(node, name, [op], [self.alias[i] for i in inputs], out_shape)

    def _define(self, node: onnx.NodeProto, name: str, ops: list, inputs: list[str], out_shape: tuple[int, ...]) -> None:
        """Record the nodes ``ops`` (one after the other, the first reading ``inputs``) as
        computing ``node``'s first output; no op (a reshape) makes it an alias."""
        out = node.output[0]
        self._check_inferred(out, out_shape, name)
        src = list(inputs)
        for k, op in enumerate(ops):
            tensor = out if k == len(ops) - 1 else f"{out}#{k}"
            self.dag_nodes.append(Node(op, tuple(src), tensor))
            src = [tensor]
        self.alias[out] = src[0] if not ops else out
        self.shapes[out] = out_shape
        for extra in node.output[1:]:
            if extra:
                self.shapes[extra] = None

    def _check_inferred(self, tensor: str, shape: tuple[int, ...], name: str) -> None:
        """Compare our per-item shape with ONNX shape inference where it knows the sizes."""
        dims = _dims(self.types[tensor]) if tensor in self.types else None
        if dims is None or any(d is None for d in dims[1:]):
            return
        if tuple(dims[1:]) != shape:
            raise CompileError(
                f"node {name!r}: heinfer computed the per-item shape {shape} but "
                f"ONNX shape inference gives {dims}"
            )



def _is_identity_matrix(op: Linear) -> bool:
    m = op.matrix
    n = m.shape[0]
    return (
        m.shape[1] == n
        and m.nnz == n
        and np.array_equal(m.indices, np.arange(n))
        and bool((m.data == 1).all())
    )


def _merge_biases(nodes: list[Node], output: str) -> list[Node]:
    """Merge a pure bias (Add/Sub of a constant: an identity Linear) into the Linear that
    computes its input, when nothing else reads that tensor."""
    readers: dict[str, int] = {}
    for n in nodes:
        for t in n.inputs:
            readers[t] = readers.get(t, 0) + 1
    by_output = {n.output: k for k, n in enumerate(nodes)}
    out = list(nodes)
    for k, n in enumerate(nodes):
        if not (isinstance(n.op, Linear) and _is_identity_matrix(n.op)):
            continue
        (t,) = n.inputs
        j = by_output.get(t)
        if j is None or out[j] is None or readers[t] != 1 or t == output or not isinstance(out[j].op, Linear):
            continue
        prev = out[j].op
        merged = Linear(f"{prev.name}+{n.op.name}", prev.matrix, prev.bias + n.op.bias, prev.in_shape, n.op.out_shape, prev.in_parts, n.op.out_parts)
        out[k] = Node(merged, out[j].inputs, n.output)
        out[j] = None
    return [n for n in out if n is not None]


def load_onnx_dag(model: ModelSource) -> Dag:
    """Compile an ONNX model (a path, serialized bytes or a ModelProto) into an IR :class:`Dag`.

    The model must use opset 13–21 of the default domain, have exactly one non-constant input
    of shape ``[batch, ...]`` (any batch dimension, static sizes after it) and one output, and
    use only the operators in :data:`SUPPORTED_OPERATORS` with constant weights; a tensor may
    be read by several nodes, and ``Add``/``Sub``/``Concat`` may combine computed tensors.

    Raises :class:`CompileError` when the model cannot be read, fails the ONNX checker or shape
    inference or uses another opset; :class:`UnsupportedOperatorError` (with ``op_type`` and
    ``node_name``) for an operator or an operator option heinfer cannot compile.
    """
    return _import(model)[0]


def _import(model: ModelSource) -> tuple[Dag, str]:
    """The DAG of ``model`` and the name of its ONNX output."""
    proto = _read(model)
    opset = _opset(proto)
    importer = _Importer(_check(proto), opset)
    return importer.run(), importer.output_name


def load_onnx(model: ModelSource) -> Graph:
    """:func:`load_onnx_dag` lowered to the chain :class:`Graph` the back ends compile
    (:func:`~.dag.to_chain`; a chain model gives its ops unchanged). Raises what
    :func:`load_onnx_dag` raises."""
    dag, out = _import(model)
    chain = to_chain(dag)
    return Graph(chain.input_name, chain.input_shape, out, chain.output_shape, chain.ops)


#: The exporters :func:`from_torch` tries, in order: torch's TorchScript-based exporter
#: (``dynamo=False``; needs only torch) and its ``torch.export``-based one (``dynamo=True``,
#: the default of torch ≥ 2.9; needs ``onnxscript``).
TORCH_EXPORTERS = ("legacy", "dynamo")


def from_torch(module: object, example_input: object, exporter: str | None = None) -> Graph:
    """Compile a PyTorch module: export it to ONNX (dynamic batch) and load that.

    ``example_input`` is a tensor of shape ``(batch, ...)``. ``exporter`` (``"legacy"`` or
    ``"dynamo"``, see :data:`TORCH_EXPORTERS`) picks torch's exporter; by default each is
    tried in turn and the first whose graph loads is used, so a missing ``onnxscript`` or an
    exporter that fails on this module does not stop the other. Raises
    :class:`CompileError` when torch is not installed, or naming every exporter's error when
    none works; and what :func:`load_onnx` raises for an explicit ``exporter``.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CompileError(
            "PyTorch models need the optional 'torch' package: pip install 'heinfer[torch]' (torch and onnxscript)"
        ) from None
    if exporter is not None and exporter not in TORCH_EXPORTERS:
        raise CompileError(f"unknown torch exporter {exporter!r} (one of {', '.join(TORCH_EXPORTERS)})")
    errors = []
    for name in [exporter] if exporter else TORCH_EXPORTERS:
        try:
            model = _export(module, example_input, dynamo=name == "dynamo")
        except Exception as e:  # noqa: BLE001 - torch raises many unrelated types
            errors.append(f"{name} exporter: {_first_line(e)}")
            continue
        if exporter is not None:
            return load_onnx(model)
        try:
            return load_onnx(model)
        except CompileError as e:
            errors.append(f"{name} exporter's graph: {e}")
    raise CompileError("torch.onnx.export failed: " + "; ".join(errors))


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"


def _export(module: Any, example_input: object, dynamo: bool) -> bytes:
    """The ONNX bytes of ``module`` from one of torch's exporters, batch axis dynamic; the
    module's training flag is restored afterwards."""
    import torch

    was_training = getattr(module, "training", False)
    module.eval()
    try:
        if dynamo:
            batch = torch.export.Dim("batch", min=1)
            program = torch.onnx.export(
                module, (example_input,), dynamo=True, input_names=["input"], output_names=["output"],
                dynamic_shapes=({0: batch},), verbose=False,
            )  # fmt: skip
            return program.model_proto.SerializeToString()
        buffer = io.BytesIO()
        torch.onnx.export(
            module, (example_input,), buffer, dynamo=False, opset_version=17, input_names=["input"],
            output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
        )  # fmt: skip
        return buffer.getvalue()
    finally:
        module.train(was_training)
