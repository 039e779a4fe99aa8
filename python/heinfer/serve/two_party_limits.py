"""What each party of the two-party protocol may send, computed from the program (layer:
``heinfer.serve``).

The service reassembles each message from frames before a party reads it; without a limit a
client could make it buffer up to :data:`~heinfer.serve.two_party.MAX_MESSAGE_BYTES` per
message. :func:`client_limits` bounds every kind of client message by what an honest client
of *this* program sends, and the reassembler refuses a message at its first frame when it
declares more blobs, or as soon as it carries more bytes, than that:

* keys: three blobs — the public key, the rotation keys of the program's steps, the base-OT
  message;
* offline requests: the item-count header, then one per circuit step, an IKNP column block of
  16 bytes per oblivious transfer (rounded up to 128) and a header (a query of the program's
  ``batch_capacity`` items: one circuit per item and activation);
* a layer's input: its ciphertexts (twice as many after a square);
* a step's OT choices: one blob, a bit per oblivious transfer and a header.

Ciphertexts and keys are bounded as for the CKKS service
(:func:`heinfer.protocol.limits.ciphertext_bytes_bound`, ``switching_key_bytes_bound``: the
BFV parameters name their primes the same way).
:func:`server_limits` does the same for what the client accepts from a server: the base-OT
answer, the garbled circuits of each step (tables, garbler labels, output tables, OT
corrections), each layer's result ciphertexts and each step's labels.
"""

from __future__ import annotations

from collections.abc import Callable

from heinfer.program.two_party import TwoPartyProgram
from heinfer.protocol.limits import ciphertext_bytes_bound, switching_key_bytes_bound
from heinfer.twoparty import LayerCircuit

__all__ = ["client_limits", "items_per_query", "server_limits"]

#: Bytes allowed for a message's headers and small fields beyond the counted payload.
SLACK = 1 << 12


def client_limits(program: TwoPartyProgram) -> Callable[[int, int], tuple[int, int]]:
    """``limit(kind, step) → (most blobs, most bytes)`` of a client message of ``program``;
    ``(0, 0)`` for what a client never sends (another kind, or a step the program lacks)."""
    from heinfer.serve.two_party import Kind  # the message kinds live with the service

    b = program.bfv
    ct = ciphertext_bytes_bound(b, len(b["log_q"]) - 1)
    key = switching_key_bytes_bound(b)
    bits = program.plain_modulus.bit_length()
    ots = [[program.batch_capacity * e.size * bits for _, e in st.parts(program.plain_modulus)] for st in program.steps]

    def limit(kind: int, step: int) -> tuple[int, int]:
        if kind == Kind.KEYS:
            return 3, (program.galois_key_count + 2) * key + SLACK
        if kind == Kind.OFFLINE:
            return len(program.steps) + 1, sum(16 * (t + 128) + SLACK for parts in ots for t in parts) + SLACK
        if kind == Kind.LAYER and 0 <= step < len(program.segments):
            blobs = program.segments[step].n_input_cts * program.input_lists(step)
            return blobs, blobs * ct
        if kind == Kind.CHOICES and 0 <= step < len(program.steps):
            return 1, sum(t // 8 + SLACK for t in ots[step])
        return 0, 0

    return limit


def _garbled_bytes(program: TwoPartyProgram, items: int) -> list[int]:
    """Per step, the most bytes of its garbled circuits and OT corrections for a query of
    ``items`` items."""
    p = program.plain_modulus
    bits = p.bit_length()
    width = (bits + 7) // 8
    out = []
    for st in program.steps:
        total = 0
        for args, entries in st.parts(p):  # one circuit, or two when values pass through
            c = LayerCircuit(*args)
            instances, window = entries.shape
            ots = items * instances * window * bits
            per = 32 * c.and_gates + 16 * window * bits + 2 * width * (bits - st.shift)
            total += 16 * (ots + 128) + items * instances * per + SLACK
        out.append(total)
    return out


def items_per_query(program: TwoPartyProgram, max_message_bytes: int) -> int:
    """The most items of one query whose largest message (the garbled circuits) stays within
    ``max_message_bytes``, at most the program's ``batch_capacity``: a client splits larger
    inputs into queries of this size. At least 1 (a program whose single item does not fit is
    refused by the receiver's limit, by name)."""
    lo, hi = 1, program.batch_capacity
    while lo < hi:  # the bound grows with the items
        mid = (lo + hi + 1) // 2
        if sum(_garbled_bytes(program, mid)) + SLACK <= max_message_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def server_limits(program: TwoPartyProgram) -> Callable[[int, int], tuple[int, int]]:
    """``limit(kind, step) → (most blobs, most bytes)`` of a server message of ``program``,
    as :func:`client_limits` for the client's side."""
    from heinfer.serve.two_party import Kind

    b = program.bfv
    ct = ciphertext_bytes_bound(b, len(b["log_q"]) - 1)  # results travel lower: a bound
    bits = program.plain_modulus.bit_length()
    items = program.batch_capacity

    def limit(kind: int, step: int) -> tuple[int, int]:
        if kind == Kind.SETUP:
            return 1, 1 << 16
        if kind == Kind.GARBLED:
            return len(program.steps), sum(_garbled_bytes(program, items)) + SLACK
        if kind == Kind.RESULT and 0 <= step < len(program.segments):
            cts = program.segments[step].output.n_cts
            return cts, cts * ct
        if kind == Kind.LABELS and 0 <= step < len(program.steps):
            parts = program.steps[step].parts(program.plain_modulus)
            return 1, sum(16 * items * e.size * bits + SLACK for _, e in parts)
        return 0, 0

    return limit
