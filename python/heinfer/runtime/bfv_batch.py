"""Throughput mode's linear layers on BFV ciphertexts: the two-party protocol on a batch axis.

Layer: ``heinfer.runtime``. A :class:`~heinfer.program.weights.LinearStep` with integer weights
(``weight_scale`` 1, :mod:`heinfer.compiler.two_party_throughput`) runs on one ciphertext per
input element, every slot an item: ``out_j = Σ_k W_jk·in_k + b_j``. The products are the
batch-axis kernel of CKKS throughput mode (``heinfer_kernels::linear``: exact integer
multiply-accumulates on the residues, refused rather than rounded when a sum could leave f64's
53 bits) — on BFV's scale-1 ciphertexts it computes exactly ``Σ W_jk·in_k mod Q``, which
decrypts to the product mod ``p``. The bias is a constant plaintext (every slot ``b_j``) added
after; plaintexts of equal bias values are encoded once.
"""

from __future__ import annotations

import numpy as np

from heinfer import bfv
from heinfer.ckks.objects import Ciphertext
from heinfer.errors import ProtocolError
from heinfer.program.weights import LinearStep
from heinfer.runtime.linear import PreparedLinear

__all__ = ["BatchLayer", "prepare_batch_layers"]


class BatchLayer:
    """One batch-axis layer ready to run (server side): the native kernel and the bias
    plaintexts."""

    def __init__(self, params: bfv.BfvParameters, step: LinearStep) -> None:
        if step.weight_scale != 1.0:
            raise ProtocolError(f"layer {step.name!r}: batch-axis BFV layers take integer weights at scale 1")
        self.step = step
        self.params = params
        self._layer, _ = PreparedLinear(step).build()
        enc = bfv.BatchEncoder(params)
        p = params.plain_modulus
        bias = np.zeros(step.out_size, dtype=np.int64) if step.bias is None else np.rint(step.bias).astype(np.int64) % p
        cache: dict[int, object] = {}
        #: per output: the constant plaintext of its bias, or None for a zero bias
        self.bias: list = []
        for b in map(int, bias):
            if b and b not in cache:
                cache[b] = enc.encode(np.full(params.n, b, dtype=np.int64))
            self.bias.append(cache[b] if b else None)

    def run(self, ev: bfv.Evaluator, x: list[Ciphertext]) -> list[Ciphertext]:
        """The layer's output ciphertexts for its input ciphertexts ``x`` (one per element)."""
        if len(x) != self.step.in_size:
            raise ProtocolError(f"layer {self.step.name!r} takes {self.step.in_size} ciphertexts, got {len(x)}")
        rlwe = self.params.rlwe
        out = [Ciphertext._wrap(c, rlwe) for c in self._layer.apply_list([c._raw for c in x])]
        return [y if b is None else ev.add_plain(y, b) for y, b in zip(out, self.bias)]


def prepare_batch_layers(params: bfv.BfvParameters, steps: list[LinearStep]) -> list[BatchLayer]:
    """The layers of a throughput-mode program (their weights are small: kept, never lazy)."""
    return [BatchLayer(params, s) for s in steps]
