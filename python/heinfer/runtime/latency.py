"""Running a latency-mode segment on ciphertexts (server side).

Layer: ``heinfer.runtime``. :class:`PreparedSegment` encodes every plaintext of a segment
once (setup: the kernels' diagonals at the exact scale ``q_ℓ`` of the prime the next rescale
removes, so the ciphertext scale is unchanged by a linear layer; biases at the scale the
ciphertext has after it). :meth:`PreparedSegment.run` executes the steps with the engine's
hoisted rotations: the baby steps of every input ciphertext share one decomposition and
stay in the extended basis ``Q·P`` through the plaintext products and sums, with one fused
dot product and one ModDown per output ciphertext and giant step (double hoisting, see
:mod:`heinfer.compiler.latency.transform`).
"""

from __future__ import annotations

import numpy as np

from heinfer import _native
from heinfer.errors import ProtocolError
from heinfer.program.latency import LatencySegment

__all__ = ["PreparedSegment", "segment_scales"]


def segment_scales(params: _native.Params, seg: LatencySegment, input_scale: float) -> list[float]:
    """The ciphertext scale before every step and after the last (exact, from the primes)."""
    q = [float(v) for v in params.q]
    s = [input_scale]
    for st in seg.steps:
        s.append(s[-1] if st.op == "transform" else s[-1] * s[-1] / q[st.level])
    return s


class PreparedSegment:
    """A segment with its plaintexts encoded for inputs at ``input_scale``."""

    def __init__(self, params: _native.Params, seg: LatencySegment, input_scale: float) -> None:
        self.seg = seg
        self.input_scale = input_scale
        self.scales = segment_scales(params, seg, input_scale)
        enc = _native.Encoder(params)
        q = self.q = [float(v) for v in params.q]
        self.plain: list[list | None] = []
        self.bias: list[list | None] = []
        for k, st in enumerate(seg.steps):
            t = st.transform
            if t is None:
                self.plain.append(None)
                self.bias.append(None)
                continue
            pts: list = [None] * len(t.terms)
            for _, _, ix in t.groups():
                ext = bool((t.terms[ix, 3] != 0).any())
                for i in ix:
                    pts[i] = enc.encode_real(np.ascontiguousarray(t.vectors[i]), q[st.level], st.level, ext)
            self.plain.append(pts)
            self.bias.append(
                None if t.bias is None else [enc.encode_real(np.ascontiguousarray(b), self.scales[k + 1], st.level - 1, False) for b in t.bias]
            )

    def run(self, ev: _native.Evaluator, cts: list, galois: _native.GaloisKeys | None, relin: _native.RelinKey | None) -> list:
        """The segment's output ciphertexts for its input ciphertexts ``cts`` (consumed)."""
        seg = self.seg
        if len(cts) != len(seg.gather):
            raise ProtocolError(f"segment takes {len(seg.gather)} ciphertexts, got {len(cts)}")
        for k, st in enumerate(seg.steps):
            if st.op == "square":
                out = []
                for c in cts:
                    sq = ev.square(c)
                    ev.relinearize_assign(sq, relin)
                    ev.rescale_assign(sq)
                    out.append(sq)
                cts = out
            else:
                cts = self._transform(ev, k, cts, galois)
        return cts

    def _transform(self, ev: _native.Evaluator, k: int, x: list, galois) -> list:
        t = self.seg.steps[k].transform
        pts = self.plain[k]
        for r in t.replicate:
            for a in range(len(x)):
                ev.add_assign(x[a], ev.rotate(x[a], r, galois))
        ext = {a: dict(zip(bs, ev.rotate_hoisted_extended(x[a], bs, galois))) for a, bs in t.babies().items()}
        out: list = [None] * t.n_out
        for o, g, ix in t.groups():
            terms = [(int(t.terms[i, 2]), int(t.terms[i, 3])) for i in ix]
            group_pts = [pts[i] for i in ix]
            if any(b for _, b in terms):
                acc = ev.dot_plain_extended([ext[a][b] for a, b in terms], group_pts)
            else:
                acc = ev.dot_plain([x[a] for a, _ in terms], group_pts)
            if g:
                acc = ev.rotate(acc, g, galois)
            if out[o] is None:
                out[o] = acc
            else:
                ev.add_assign(out[o], acc)
        for o in range(t.n_out):
            if out[o] is None:  # no weight reaches this ciphertext: an encryption of zero
                out[o] = ev.mul_const(x[0], 0.0, self.q[self.seg.steps[k].level])
            ev.rescale_assign(out[o])
            for s in t.fold:
                ev.add_assign(out[o], ev.rotate(out[o], s, galois))
            if self.bias[k] is not None:
                ev.add_plain_assign(out[o], self.bias[k][o])
        return out
