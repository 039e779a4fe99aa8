"""Running one segment of a program on a batch of ciphertexts (server side)."""

from __future__ import annotations

import numpy as np

from heinfer import _native
from heinfer.program.model import Program, Segment
from heinfer.runtime.linear import PreparedLinear

__all__ = ["run_segment"]


def run_segment(
    program: Program,
    seg: Segment,
    batch: _native.CiphertextBatch,
    prepared: list[PreparedLinear],
    relin_key: _native.RelinKey | None,
    scales: dict[int, tuple[np.ndarray | None, np.ndarray | None]] | None = None,
    baseline: bool = False,
    baseline_rows: dict[int, list[int]] | None = None,
) -> _native.CiphertextBatch:
    """Executes ``seg.instrs`` on ``batch`` and returns the segment's output batch.

    ``batch`` is consumed: squares, rescales, relinearizations and drops work in place, and
    a square followed by a linear layer is fused into it (the squared ciphertexts are never
    stored).

    ``scales[layer] = (row_scale, col_scale)``: the hiding factors folded into that layer for
    this query. ``baseline`` runs linear layers with the naive kernel (general plaintext
    products, a rescale after each) — only the rows in ``baseline_rows[layer]`` when given,
    for benchmarks that extrapolate its cost.
    """
    packing = program.packing
    skip_rescale = False
    instrs = seg.instrs
    fuse = False
    i = 0
    while i < len(instrs):
        ins = instrs[i]
        i += 1
        if not baseline and _is_chain(program, instrs, i - 1) and batch.size == 2:
            # linear → square → linear: one fused kernel, intermediates never stored
            first, second = instrs[i - 1].arg, instrs[i + 1].arg
            l1, b1 = prepared[first].build(*(scales or {}).get(first, (None, None)))
            l2, b2 = prepared[second].build(*(scales or {}).get(second, (None, None)))
            batch = _native.square_chain(l1, l2, batch, b1, b2, packing)
            i += 2
            continue
        if ins.op == "square" and not baseline and i < len(instrs) and instrs[i].op == "linear" and batch.size == 2:
            fuse = True  # the next linear layer squares its inputs on the fly
            continue
        if ins.op == "linear":
            step = program.layers[ins.arg]
            if baseline:
                dense = step.matrix.toarray()
                bias = step.bias if step.bias is not None else np.zeros(step.out_size)
                rows = (baseline_rows or {}).get(ins.arg, list(range(step.out_size)))
                batch = _native.naive_linear_rows(batch, dense, bias, rows, step.weight_scale, True)
                skip_rescale = True
                continue
            row_s, col_s = (scales or {}).get(ins.arg, (None, None))
            layer, bias = prepared[ins.arg].build(row_s, col_s)
            batch = layer.apply(batch, bias, packing, fuse)
            fuse = False
        elif ins.op == "square":
            _native.batch_square(batch)
        elif ins.op == "relinearize":
            _native.batch_relinearize(batch, relin_key)
        elif ins.op == "rescale":
            if skip_rescale:
                skip_rescale = False
                continue
            _native.batch_rescale(batch, ins.arg)
        elif ins.op == "drop":
            _native.batch_drop_to_level(batch, ins.arg)
        skip_rescale = skip_rescale and ins.op == "linear"
    return batch


def _is_chain(program: Program, instrs: list, i: int) -> bool:
    """Whether instructions ``i, i+1, i+2`` are linear → square → linear with one digit each."""
    if i + 2 >= len(instrs) or [x.op for x in instrs[i : i + 3]] != ["linear", "square", "linear"]:
        return False
    return program.layers[instrs[i].arg].digits == 1 and program.layers[instrs[i + 2].arg].digits == 1
