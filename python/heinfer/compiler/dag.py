"""Graph-shaped networks: the IR as a DAG of named tensors, its numpy executor, and its
lowering to a chain.

Layer: ``heinfer.compiler`` (pure Python + numpy + scipy; never imports the native module).

A :class:`Dag` is a list of :class:`Node` s in topological order; each node applies one op to
named tensors and names its output, so a tensor may be read by several nodes (branches,
residual skips). Besides the chain ops (:class:`~.ir.Linear`, :class:`~.ir.Square`,
:class:`~.ir.ClientFunction`) a node may hold a :class:`Combine`,

.. math:: y = \\sum_k A_k x_k + b,

the linear map of several tensors: ``Add``/``Sub`` of two computed tensors (``[I, ±I]``) and
``Concat`` (a selection per input).

:func:`to_chain` lowers a DAG to a chain :class:`~.ir.Graph` by **stacking the live tensors**:
between two nodes the chain carries one vector, the concatenation of every tensor a later node
still reads. A linear node becomes one Linear on the whole vector (identity rows pass the other
tensors through, so a skip and the branch it meets always share level and scale), a client
function acts on its slice (``keep``), and a tensor read by a client function *and* later
nodes is first duplicated by a Linear. ``fold_linear`` then merges these Linears with their
neighbours, so linear branches that meet become one Linear, ``(A_1 + A_2) x``. The server's
:class:`~.ir.Square` squares the whole vector (its scale doubles, which a live tensor beside it
could not follow), so a square of one tensor while another is still live (``A x + x²``)
becomes a client-aided step, the client function ``square`` on its slice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from heinfer.compiler.ir import ClientFunction, Graph, Linear, Square, _describe
from heinfer.errors import CompileError
from heinfer.program.functions import _shape, _size

__all__ = ["Combine", "Dag", "Node", "to_chain"]


@dataclass(frozen=True, eq=False)
class Combine:
    """``y = Σ_k blocks[k] @ x_k + bias`` over several flattened tensors.

    ``blocks[k]`` is a float64 CSR matrix ``(out_size, size(in_shapes[k]))``. Raises
    :class:`CompileError` when the shapes disagree or a value is not finite."""

    name: str
    blocks: tuple
    bias: np.ndarray
    in_shapes: tuple
    out_shape: tuple[int, ...]

    def __post_init__(self) -> None:
        out_shape = _shape(self.out_shape, f"Combine {self.name!r}: out_shape")
        in_shapes = tuple(_shape(s, f"Combine {self.name!r}: in_shape") for s in self.in_shapes)
        blocks = tuple(sp.csr_matrix(b, dtype=np.float64) for b in self.blocks)
        bias = np.asarray(self.bias, dtype=np.float64)
        if len(blocks) != len(in_shapes) or not blocks:
            raise CompileError(f"Combine {self.name!r}: {len(blocks)} blocks for {len(in_shapes)} inputs")
        for blk, s in zip(blocks, in_shapes):
            if blk.shape != (_size(out_shape), _size(s)):
                raise CompileError(f"Combine {self.name!r}: block of shape {blk.shape} for input {s} and output {out_shape}")
            if not np.isfinite(blk.data).all():
                raise CompileError(f"Combine {self.name!r}: a block holds a non-finite value")
        if bias.shape != (_size(out_shape),) or not np.isfinite(bias).all():
            raise CompileError(f"Combine {self.name!r}: bias must be {(_size(out_shape),)} finite values")
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "bias", bias)
        object.__setattr__(self, "in_shapes", in_shapes)
        object.__setattr__(self, "out_shape", out_shape)

    def apply(self, *xs: np.ndarray) -> np.ndarray:
        """Each x: (batch, size) → (batch, out_size), in float64."""
        y = sum(np.asarray(b @ np.asarray(x, dtype=np.float64).T).T for b, x in zip(self.blocks, xs))
        return y + self.bias


@dataclass(frozen=True)
class Node:
    """``output = op(*inputs)``: tensors by name (the graph input or earlier nodes' outputs)."""

    op: object
    inputs: tuple[str, ...]
    output: str


def _in_sizes(op: object) -> list[int]:
    if isinstance(op, Combine):
        return [_size(s) for s in op.in_shapes]
    return [_size(op.in_shape)]  # type: ignore[attr-defined]


@dataclass
class Dag:
    """A network as a DAG of nodes (see the module documentation); validated on construction."""

    input_name: str
    input_shape: tuple[int, ...]
    output_name: str
    output_shape: tuple[int, ...]
    nodes: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.input_shape = _shape(self.input_shape, "Dag input_shape")
        self.output_shape = _shape(self.output_shape, "Dag output_shape")
        self.nodes = list(self.nodes)
        self.validate()

    def validate(self) -> None:
        """Every node reads defined tensors of the right sizes, outputs are named once, and the
        output is defined with the size of ``output_shape``."""
        sizes = {self.input_name: _size(self.input_shape)}
        for n in self.nodes:
            if not isinstance(n.op, (Linear, Square, ClientFunction, Combine)):
                raise CompileError(f"Dag: {n.op!r} is not a Linear, Square, ClientFunction or Combine")
            want = _in_sizes(n.op)
            if len(want) != len(n.inputs):
                raise CompileError(f"Dag: {type(n.op).__name__} {n.op.name!r} takes {len(want)} inputs, given {n.inputs}")
            for t, w in zip(n.inputs, want):
                if t not in sizes:
                    raise CompileError(f"Dag: {n.op.name!r} reads {t!r}, which no earlier node defines")
                if sizes[t] != w:
                    raise CompileError(f"Dag: {n.op.name!r} takes {w} values from {t!r}, which has {sizes[t]}")
            if n.output in sizes:
                raise CompileError(f"Dag: tensor {n.output!r} is defined twice")
            sizes[n.output] = _size(n.op.out_shape)
        if sizes.get(self.output_name) != _size(self.output_shape):
            raise CompileError(f"Dag: output {self.output_name!r} is undefined or not of shape {self.output_shape}")

    @property
    def is_chain(self) -> bool:
        """Whether every node reads only the previous node's output (or the input)."""
        cur = self.input_name
        for n in self.nodes:
            if isinstance(n.op, Combine) or n.inputs != (cur,):
                return False
            cur = n.output
        return cur == self.output_name

    def run(self, x: np.ndarray) -> np.ndarray:
        """Reference float64 execution: x (batch, *input_shape) → (batch, *output_shape)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape[1:] != self.input_shape:
            raise CompileError(f"Dag.run: input has shape {x.shape}, expected (batch, *{self.input_shape})")
        env = {self.input_name: x.reshape(x.shape[0], -1)}
        for n in self.nodes:
            env[n.output] = n.op.apply(*(env[t] for t in n.inputs))
        return env[self.output_name].reshape((x.shape[0], *self.output_shape))

    def summary(self) -> str:
        """One line per node (as :meth:`Graph.summary`, plus the tensors it reads)."""
        lines = [f"input  {self.input_name!r} {self.input_shape}"]
        for n in self.nodes:
            if isinstance(n.op, Combine):
                lines.append(f"{'Combine':<14} {n.op.name:<32} {n.op.in_shapes} -> {n.op.out_shape}")
            else:
                lines.append(_describe(n.op))
            lines[-1] += f"  {list(n.inputs)} -> {n.output!r}"
        lines.append(f"output {self.output_name!r} {self.output_shape}")
        return "\n".join(lines)


def _needed(dag: Dag) -> list[Node]:
    """The nodes the output depends on (others are dropped)."""
    want, keep = {dag.output_name}, []
    for n in reversed(dag.nodes):
        if n.output in want:
            keep.append(n)
            want.update(n.inputs)
    return keep[::-1]


class _Stack:
    """The vector the chain carries: live tensors one after the other."""

    def __init__(self, name: str, size: int, shape: tuple[int, ...]) -> None:
        self.names, self.sizes, self.shapes = [name], {name: size}, {name: shape}

    def offset(self, t: str) -> int:
        return sum(self.sizes[u] for u in self.names[: self.names.index(t)])

    @property
    def total(self) -> int:
        return sum(self.sizes[u] for u in self.names)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shapes[self.names[0]] if len(self.names) == 1 else (self.total,)

    @property
    def parts(self) -> tuple[tuple[int, ...], ...]:
        """The live tensors' shapes when there are several (``Linear.in_parts``), else ``()``."""
        return tuple(self.shapes[u] for u in self.names) if len(self.names) > 1 else ()

    def linear(self, name: str, new: list[str], defs: dict, out_shapes: dict) -> Linear:
        """The Linear from this vector to ``new`` (kept names copy through, ``defs[t] =
        ([(tensor, block), …], bias)`` define new ones); the stack becomes ``new``."""
        rows, cols, data, bias, r0 = [], [], [], [], 0
        for t in new:
            if t in defs:
                blocks, b = defs[t]
                size = _size(out_shapes[t])
                for src, blk in blocks:
                    c = blk.tocoo()
                    rows.append(c.row + r0)
                    cols.append(c.col + self.offset(src))
                    data.append(c.data)
                bias.append(b)
            else:
                size = self.sizes[t]
                rows.append(np.arange(size) + r0)
                cols.append(np.arange(size) + self.offset(t))
                data.append(np.ones(size))
                bias.append(np.zeros(size))
            r0 += size
        in_shape, n_in, in_parts = self.shape, self.total, self.parts
        for t in new:
            if t in defs:
                self.shapes[t] = out_shapes[t]
                self.sizes[t] = _size(out_shapes[t])
        self.names = list(new)
        matrix = sp.csr_matrix((np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))), shape=(r0, n_in))
        return Linear(name, matrix, np.concatenate(bias), in_shape, self.shape, in_parts, self.parts)


def to_chain(dag: Dag) -> Graph:
    """The chain :class:`Graph` computing the same function (see the module documentation).

    Raises :class:`CompileError` if the nodes leave anything but the output."""
    nodes = _needed(dag)
    last = {t: i for i, n in enumerate(nodes) for t in n.inputs}
    last[dag.output_name] = len(nodes)
    stack = _Stack(dag.input_name, _size(dag.input_shape), dag.input_shape)
    ops: list = []
    for i, n in enumerate(nodes):
        op = n.op
        if isinstance(op, (Linear, Combine)):
            if isinstance(op, Linear) and stack.names == [n.inputs[0]] and last[n.inputs[0]] == i:
                ops.append(op)  # a step of a chain: the op as it is
                stack.names, stack.sizes[n.output], stack.shapes[n.output] = [n.output], _size(op.out_shape), op.out_shape
                continue
            blocks = [(n.inputs[0], op.matrix)] if isinstance(op, Linear) else list(zip(n.inputs, op.blocks))
            live = [t for t in stack.names if last[t] > i]
            ops.append(stack.linear(op.name, live + [n.output], {n.output: (blocks, op.bias)}, {n.output: op.out_shape}))
        elif isinstance(op, Square) and stack.names == [n.inputs[0]] and last[n.inputs[0]] == i:
            ops.append(op)  # the whole vector: the server squares it
            stack.names, stack.sizes[n.output], stack.shapes[n.output] = [n.output], _size(op.out_shape), op.out_shape
        else:
            if isinstance(op, Square):  # one branch beside a live tensor: a client-aided square
                op = ClientFunction(op.name, "square", {}, op.in_shape, op.out_shape)
            (x,) = n.inputs
            if last[x] > i:  # x is read again later: the function acts on a copy
                copy = f"{x}#copy{i}"
                eye = sp.identity(stack.sizes[x], format="csr")
                ops.append(stack.linear(f"{op.name}.copy", stack.names + [copy], {copy: ([(x, eye)], np.zeros(stack.sizes[x]))}, {copy: stack.shapes[x]}))
                x = copy
            before = stack.offset(x)
            after = stack.total - before - stack.sizes[x]
            n_out = _size(op.out_shape)
            if before or after:
                op = ClientFunction(op.name, op.kind, op.attrs, (stack.total,), (before + n_out + after,), op.groups, (before, after))
            ops.append(op)
            k = stack.names.index(x)
            stack.names[k] = n.output
            stack.sizes[n.output], stack.shapes[n.output] = n_out, n.op.out_shape
    if stack.names != [dag.output_name]:  # unreachable with pruned nodes; kept as a check
        raise CompileError(f"lowering left {stack.names} instead of the output {dag.output_name!r}")
    out_shape = dag.output_shape
    return Graph(dag.input_name, dag.input_shape, dag.output_name, out_shape, ops)
