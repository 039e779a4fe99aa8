"""Message size limits computed from a public program (they are determined by it).

Layer: ``heinfer.protocol``. Every message carries a known number of ciphertexts at a known
level, so its size is bounded by the parameters: a ciphertext of ``size`` polynomials at
level ``ℓ`` holds ``size · Σ_{i≤ℓ} ⌈N·bits(q_i)/8⌉`` bytes of bit-packed residues plus a
small header; a key-switching key holds ``β`` digits of two polynomials over ``Q·P``
(``β ≤ L + 1``). :func:`message_limits` adds a margin of a few hundred bytes per object and
gives the receiver's ``max_bytes`` for each kind of message — no 1 GiB default.
"""

from __future__ import annotations

__all__ = ["message_limits", "ciphertext_bytes_bound", "switching_key_bytes_bound"]

#: Bytes of framing per serialized object (engine header, lengths, protobuf tags), generous.
OBJECT_OVERHEAD = 256
#: Bytes of a message's own fields (ids, references, counters), generous.
MESSAGE_OVERHEAD = 1024
#: The engine decodes no object larger than this (1 GiB): no limit exceeds it.
MAX_MESSAGE_BYTES = 1 << 30


def ciphertext_bytes_bound(params: dict, level: int, size: int = 2) -> int:
    """Upper bound on the serialized bytes of one ciphertext at ``level``."""
    n = 1 << int(params["log_n"])
    limbs = sum(-(-n * int(b) // 8) + 16 for b in params["log_q"][: level + 1])
    return size * limbs + OBJECT_OVERHEAD


def switching_key_bytes_bound(params: dict) -> int:
    """Upper bound on the serialized bytes of one key-switching (relinearization or Galois) key."""
    n = 1 << int(params["log_n"])
    qp = list(params["log_q"]) + list(params["log_p"])
    per_poly = sum(-(-n * int(b) // 8) + 16 for b in qp)
    return len(params["log_q"]) * 2 * per_poly + OBJECT_OVERHEAD


def message_limits(program) -> dict[str, int]:
    """``{"keys", "query", "step", "reply", "result"}`` → the largest message of that kind
    the public ``program`` allows, in bytes (``step``/``reply``: the largest over steps)."""
    p = program.params
    segs = program.segments
    key = switching_key_bytes_bound(p)
    n_keys = int(program.needs_relin_key) + len(program.rotation_steps)

    def inputs(s) -> int:
        return s.n_input_cts * ciphertext_bytes_bound(p, s.input_level) + OBJECT_OVERHEAD

    def outputs(s) -> int:
        return s.n_output_cts * ciphertext_bytes_bound(p, s.output_level, s.output_parts) + OBJECT_OVERHEAD

    limits = {
        "keys": n_keys * key + MESSAGE_OVERHEAD,
        "query": inputs(segs[0]) + MESSAGE_OVERHEAD,
        "step": max((outputs(s) for s in segs[:-1]), default=0) + MESSAGE_OVERHEAD,
        "reply": max((inputs(s) for s in segs[1:]), default=0) + MESSAGE_OVERHEAD,
        "result": outputs(segs[-1]) + MESSAGE_OVERHEAD,
    }
    return {k: min(v, MAX_MESSAGE_BYTES) for k, v in limits.items()}
