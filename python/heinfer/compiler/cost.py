"""The cost model: primitive costs per level, and the predicted time of kernels and programs.

Layer: ``heinfer.compiler`` (pure Python). One model for the packing search, the planner and
``mode="auto"``: a :data:`CostTable` maps a primitive kind to its time in seconds at every
level ``ℓ`` (index ``ℓ``; ``ℓ + 1`` limbs of ``Q`` plus the special primes) — the slot-layout
primitives (:data:`KINDS`: decompositions, hoisted rotations, dot products, ModDown, …) and
the batch-axis ones (:data:`BATCH_KINDS`: the GEMM's multiply-add per weight, squares,
relinearizations, rescales, encryption and decryption per ciphertext).
:func:`heinfer.runtime.costs.measure_costs` micro-benchmarks the table on the machine at hand
for the chosen parameters and caches it (packing-configurations §IV-C); :func:`analytic_costs`
is a machine-independent stand-in (NTT counts for the slot kinds, per-coefficient unit costs
of the kernels for the batch kinds), used by the planner while it searches prime sizes and
ring degrees, and when no measurement is available. :func:`predict_seconds` prices a whole
compiled program, client included, from a table.
"""

from __future__ import annotations

import math

from heinfer.program.model import op_input_parts
from heinfer.program.ops import DropTo, Linear, Relinearize, Rescale, Square
from heinfer.program.transform import OP_KINDS, Transform

__all__ = [
    "CostTable", "KINDS", "STREAMED", "SPILLED", "SIZES", "DEFAULT_LLC", "plain_words", "residue_bytes", "operand_sizes", "working_set", "stream_share", "spill_share", "BATCH_KINDS", "BATCH_UNITS", "analytic_costs", "price", "together", "transform_cost", "square_cost",
    "messages_cost", "key_bytes", "predict_seconds", "segment_seconds",
]

CostTable = dict
#: Every primitive a plan is costed in. ``ct_in`` and ``ct_out`` are the server's message
#: handling per ciphertext, which its timer covers: parsing and validating one client
#: ciphertext (seed-compressed: its uniform half is expanded from the seed) and serializing
#: one result ciphertext; ``ct_round`` the extra of a result sent rounded; ``message`` the
#: fixed part of one segment's input and output messages. ``rotate_many`` is one plain
#: rotation among independent ones the executor runs together (``Evaluator.rotate_many``: a
#: transform's giant steps, its folds over several output ciphertexts), spread over the
#: cores; ``rotate`` is one alone.
KINDS = (
    "decompose", "rotate_ext", "times_p", "mul_plain_ext", "mod_down", "mul_plain", "dot",
    "rotate", "add", "square_relin", "rescale", "encrypt", "decrypt", "ct_in", "ct_out",
    "ct_round", "message", "rotate_ext_mem", "mul_plain_ext_mem", "mul_plain_mem", "rotate_mem", "rotate_many",
    "rotate_ext_spill", "mul_plain_ext_spill",
)

#: Kinds whose operands (plaintext diagonals, rotation keys) a kernel reads once per query:
#: when a transform's operands exceed the last-level cache, every query streams them from
#: memory and they cost their ``_mem`` variant, measured with that many distinct operands.
STREAMED = ("rotate_ext", "mul_plain_ext", "mul_plain", "rotate")

#: Kinds priced up to their ``_spill`` variant as a double-hoisted transform's rotated baby
#: steps fill the last-level cache (:func:`spill_share`): the executor computes them all
#: before the products, so past the cache each rotation writes its extended ciphertext to
#: memory and each product reads one back. The ``_spill`` variants are measured that way —
#: one hoisted call over as many distinct keys as ``_mem`` uses, then one dot product over
#: all its outputs (AMD EPYC, logN = 13: 127 and 49 µs per step against 95 and 30 µs with
#: the outputs in the cache).
SPILLED = ("rotate_ext", "mul_plain_ext")

#: Per-level sizes a table carries beside its costs (bytes; computed from the parameters,
#: not measured, except the cache size): the last-level cache, one plaintext, one extended
#: plaintext (``Q_ℓ·P``) — both in the words the executor keeps them in (:func:`plain_words`)
#: —, one polynomial of an extended ciphertext (``Q_ℓ·P`` in 64-bit words) and the part of
#: one key-switching key a key switch at level ``ℓ`` reads (``β_ℓ`` digits × 2 polynomials ×
#: ``ℓ + 1 + k`` limbs, in the engine's compact words too).
SIZES = ("llc_bytes", "pt_bytes", "pt_ext_bytes", "ext_bytes", "ks_key_bytes")

#: The default last-level cache when the machine does not say (bytes).
DEFAULT_LLC = 32 << 20


#: The batch-axis primitives, each per ciphertext at a level (``gemm_mac``: per non-zero
#: weight, i.e. one multiply-add of every residue of one ciphertext).
BATCH_KINDS = ("gemm_mac", "batch_square", "batch_relin", "batch_rescale", "batch_encrypt", "batch_decrypt")

#: Analytic batch-axis unit costs, nanoseconds per ring coefficient and limb (one thread,
#: from the kernels' benchmarks on the development machine): the GEMM's integer
#: multiply-add, a square (tensor product), a relinearization (per limb², it key-switches),
#: a rescale (per part: inverse + forward NTT and a pass), secret-key encryption (coefficient
#: packing) and decryption; and two terms only the planner uses: the GEMM's reduction and
#: packing per input and output element (``gemm_io``), serialization and transport per
#: byte (``wire_byte``), and the factor a layer in two digits pays per digit over one in one
#: digit (``gemm_two_digit``, a ratio: its partial products are recombined, and only one-digit
#: layers run in the fused linear → square → linear chain; measured on CryptoNets' server, AMD
#: EPYC Zen 4, 2026-11-30, a batch of 4,096: its linear layers and squares took 464 ms per
#: 10^6 of weights × parts × limbs × digits on three 50-bit primes in two digits, 379 ms on
#: five 30-bit primes in one, ×1.22, and the 50-bit plan ran 25 % slower on the server). The
#: planner compares plans with these (heinfer.compiler.plan); a measured table replaces them
#: for predictions (its ``gemm_mac`` is timed on the digits the primes need).
BATCH_UNITS = {
    "gemm_mac": 0.1, "batch_square": 1.5, "batch_relin": 8.0, "batch_rescale": 6.0, "batch_encrypt": 10.0,
    "batch_decrypt": 4.0, "gemm_io": 0.6, "wire_byte": 0.3, "gemm_two_digit": 1.25,
}


def plain_words(log_q, log_p, compact: bool) -> list[int]:
    """Bytes per residue of each prime of parameters with primes of ``log_q`` and ``log_p``
    bits (``q_0, …, q_{L−1}`` then the special primes) in a plaintext as the executor keeps
    it: 8 (a 64-bit word), or, ``compact``, 4 for a prime below ``2^32`` (a ``b``-bit prime
    is below ``2^b``; :class:`heinfer.ckks` ``CompactPlaintext``)."""
    return [4 if compact and int(b) <= 32 else 8 for b in list(log_q) + list(log_p)]


def residue_bytes(log_q, log_p, level: int, extended: bool, compact: bool) -> int:
    """Bytes per coefficient of a plaintext at ``level`` (with the special primes when
    ``extended``): the sum of its limbs' :func:`plain_words`."""
    words = plain_words(log_q, log_p, compact)
    return sum(words[: level + 1]) + (sum(words[len(log_q):]) if extended else 0)


def operand_sizes(log_n: int, levels: int, special: int, llc: int = DEFAULT_LLC, words: list[int] | None = None) -> dict:
    """The :data:`SIZES` rows of a table for ``levels`` levels and ``special`` special primes
    (``α = special`` primes per key-switching digit, as the engine chooses); plaintexts and
    key-switching keys in ``words`` bytes per residue of each prime (:func:`plain_words`,
    compact; 8 for every prime when not given)."""
    n = 1 << log_n
    k = special
    words = [8] * (levels + special) if words is None else list(words)
    if len(words) != levels + special:
        raise ValueError(f"{len(words)} word sizes for {levels} + {special} primes")
    rows: dict = {key: [] for key in SIZES}
    for lvl in range(levels):
        L = lvl + 1
        beta = -(-L // max(k, 1))
        rows["llc_bytes"].append(float(llc))
        rows["pt_bytes"].append(float(n * sum(words[:L])))
        rows["pt_ext_bytes"].append(float(n * (sum(words[:L]) + sum(words[levels:]))))
        rows["ext_bytes"].append(8.0 * n * (L + k))
        rows["ks_key_bytes"].append(float(n * 2 * beta * (sum(words[:L]) + sum(words[levels:]))))
    return rows


def working_set(counts: dict, level: int, costs: CostTable) -> float:
    """Bytes of operands a transform with ``counts`` reads once per query at ``level``: its
    plaintexts and (at most) one key per rotation. ``0`` for a table without sizes."""
    if not all(k in costs for k in SIZES):
        return 0.0
    return (
        counts.get("mul_plain_ext", 0) * costs["pt_ext_bytes"][level]
        + counts.get("mul_plain", 0) * costs["pt_bytes"][level]
        + (counts.get("rotate_ext", 0) + counts.get("rotate", 0)) * costs["ks_key_bytes"][level]
    )


def analytic_costs(log_n: int, levels: int, special: int, ntt_seconds: float | None = None) -> CostTable:
    """Costs counted in number-theoretic transforms of ``N`` points for the slot kinds and in
    :data:`BATCH_UNITS` for the batch kinds, for ``levels`` levels and ``special`` special
    primes. The unit (``5 ns·N·log N``, 0.5 ms at ``N = 2^13``) only ranks kernels against each
    other; ``ntt_seconds`` sets it to a transform's real time where the prices are set against
    seconds of something else (the two-party protocol's link)."""
    n = 1 << log_n
    ntt = 5e-9 * n * log_n if ntt_seconds is None else float(ntt_seconds)
    k = special
    table: CostTable = {kind: [] for kind in KINDS + BATCH_KINDS}
    for lvl in range(levels):
        L = lvl + 1
        dec = (L + L * (L + k - 1)) * ntt
        ext = 0.15 * L * (L + k) * ntt
        md = 2 * (k + L) * ntt
        row = {
            "decompose": dec, "rotate_ext": ext, "times_p": 0.1 * L * ntt,
            "mul_plain_ext": 0.12 * (L + k) * ntt, "mod_down": md, "mul_plain": 0.12 * L * ntt, "dot": 0.1 * L * ntt,
            "rotate": dec + ext + md, "rotate_many": dec + ext + md, "add": 0.05 * L * ntt,
            "square_relin": 0.3 * L * ntt + dec + ext + md, "rescale": 2 * (L + 1) * ntt,
            "encrypt": (3 * L + 2) * ntt, "decrypt": (L + 2) * ntt,
            "ct_in": 0.3 * L * ntt, "ct_out": 0.1 * L * ntt, "ct_round": L * ntt, "message": 0.5 * ntt,
        }
        # streamed from memory: the products and the key's inner product are memory-bound
        row.update({f"{kind}_mem": 1.5 * row[kind] for kind in STREAMED})
        row.update({f"{kind}_spill": 2.0 * row[kind] for kind in SPILLED})
        for kind in KINDS:
            table[kind].append(row[kind])
        for kind in BATCH_KINDS:
            limbs = L * (L + 1) if kind == "batch_relin" else L
            table[kind].append(BATCH_UNITS[kind] * 1e-9 * n * limbs)
    table.update(operand_sizes(log_n, levels, special))
    return table


def stream_share(counts: dict, level: int, costs: CostTable) -> float:
    """The share in ``[0, 1]`` of the last-level cache a transform's operands fill
    (:func:`working_set` over ``llc_bytes``, at most 1): :func:`price` moves the
    :data:`STREAMED` kinds that far from their cached cost towards their ``_mem`` one. The
    table's cached kinds repeat a few operands that stay in the core's own caches; a kernel
    whose plaintexts and keys fill part of the shared cache finds part of them evicted (by
    its own other operands and by the other cores'). Measured on the products of the 2048 × 1
    diagonal (logN 13): 10 µs per term with 2 MB of operands, 24 µs with 9 MB, 47 µs past
    the cache; a hard switch at the full cache priced everything below it at 10. ``0`` for
    a table without sizes."""
    if not all(k in costs for k in SIZES):
        return 0.0
    return min(working_set(counts, level, costs) / costs["llc_bytes"][level], 1.0)


def spill_share(counts: dict, level: int, costs: CostTable) -> float:
    """The share in ``[0, 1]`` of the last-level cache a transform with ``counts`` at
    ``level`` fills with its rotated baby steps: ``rotate_ext`` extended ciphertexts (2
    polynomials of ``Q_ℓ·P``) over ``llc_bytes``, at most 1. The streamed plaintexts and
    keys pass through the same cache, so the baby steps start to leave it well before they
    fill it (measured: a product's cost rises steadily from 2 MB of them to 20 MB, with a
    32 MB cache); :func:`price` moves the :data:`SPILLED` kinds that far towards their
    ``_spill`` cost. ``0`` for a single-hoisted transform (no extended products) or a table
    without sizes."""
    if counts.get("mul_plain_ext", 0) == 0 or not all(k in costs for k in SIZES):
        return 0.0
    return min(counts.get("rotate_ext", 0) * 2 * costs["ext_bytes"][level] / costs["llc_bytes"][level], 1.0)


def price(counts: dict, level: int, costs: CostTable, n_out: int, bias: bool) -> float:
    """Predicted seconds of a transform with operation ``counts`` at ``level``: its
    operations and its fold (at ``level``: the executor folds before the rescale, where a
    key switch's noise is ``q_ℓ`` times smaller in the result), one rescale per output
    ciphertext, then (one level down) its bias.
    As its operands (:func:`working_set`) fill the last-level cache (:func:`stream_share`),
    the kinds of :data:`STREAMED` move that share of the way from their cached cost to their
    ``_mem`` one (a query reads them from memory); as its rotated baby steps fill it
    (:func:`spill_share`), those of :data:`SPILLED` move that share of the way on to their
    ``_spill`` cost. Giant-step rotations (two or more) and folds over two or more output
    ciphertexts run together (:func:`together`). A table with ``fold_weight`` (per level)
    prices the replications and folds at that multiple (0 for the two-party protocol, whose
    client lays its input out replicated and whose parties fold their own shares)."""
    stream, spill = stream_share(counts, level, costs), spill_share(counts, level, costs)

    def cost(k: str) -> float:
        c = costs[k][level]
        if stream > 0 and k in STREAMED and f"{k}_mem" in costs:
            c += stream * max(costs[f"{k}_mem"][level] - c, 0.0)
        if spill > 0 and k in SPILLED and f"{k}_spill" in costs:
            c += spill * max(costs[f"{k}_spill"][level] - c, 0.0)
        return c

    s = sum(counts[k] * cost(k) for k in OP_KINDS if k != "rotate")
    s += counts["rotate"] * cost("rotate") * (together(costs, level) if counts["rotate"] >= 2 else 1.0)
    # ``fold_weight`` 0: the two-party protocol's parties fold and replicate on their own
    w = costs["fold_weight"][level] if "fold_weight" in costs else 1.0
    s += w * counts.get("replicate", 0) * (costs["rotate"][level] + costs["add"][level])
    fold = costs["rotate"][level] * (together(costs, level) if n_out >= 2 else 1.0)
    s += w * counts["fold"] * (fold + costs["add"][level])
    s += n_out * costs["rescale"][level]
    if level > 0:
        s += n_out * costs["add"][level - 1] if bias else 0.0
    return s


def together(costs: CostTable, level: int) -> float:
    """The price of a rotation run among independent ones, relative to one alone
    (``rotate_many / rotate``, at most 1; 1 for a table without ``rotate_many``)."""
    alone, many = costs["rotate"][level], costs.get("rotate_many", costs["rotate"])[level]
    return min(many / alone, 1.0) if alone > 0 else 1.0


def transform_cost(t: Transform, level: int, costs: CostTable) -> float:
    """Predicted seconds of a transform at ``level`` (see :func:`price`)."""
    return price(t.counts(), level, costs, t.n_out, t.bias is not None)


def square_cost(n_cts: int, level: int, costs: CostTable) -> float:
    """Predicted seconds of squaring, relinearizing and rescaling ``n_cts`` ciphertexts."""
    return n_cts * (costs["square_relin"][level] + costs["rescale"][level])


def messages_cost(n_in: int, in_level: int, n_out: int, out_level: int, costs: CostTable, rounded: bool = False) -> float:
    """Predicted seconds of a segment's message handling on the server: parsing ``n_in``
    client ciphertexts at ``in_level`` and serializing ``n_out`` results at ``out_level``
    (``rounded``: sent rounded, as every result and, in throughput mode, every step is), plus
    the fixed part of one message each way. Tables without these kinds (older caches) price
    them at zero.

    Both run one ciphertext per engine thread at a time, and the table measures them per
    ciphertext over :data:`~heinfer.runtime.costs.DISTINCT` of them (a multiple of its
    ``threads``): ``n`` ciphertexts take ``⌈n / T⌉ · T`` of those shares (measured on two
    threads: one ciphertext 181 µs to parse, 81 µs each of sixteen, 98 µs each of seven)."""
    c_in, c_out = costs.get("ct_in"), costs.get("ct_out")
    c_round, fixed = costs.get("ct_round"), costs.get("message")
    threads = max(int(costs.get("threads", 1)), 1)

    def rounds(n: int) -> int:
        return -(-n // threads) * threads

    total = (rounds(n_in) * c_in[in_level] if c_in else 0.0) + (rounds(n_out) * c_out[out_level] if c_out else 0.0)
    if rounded and c_round:
        total += rounds(n_out) * c_round[out_level]
    return total + (fixed[out_level] if fixed else 0.0)


def segment_seconds(program, seg, costs: CostTable) -> float:
    """The server seconds of a slot-layout segment of a client-aided latency program priced
    from ``costs`` — what the packing search stored in ``seg.predicted_s`` when ``costs`` is
    the table it compiled with: every transform at its level (:func:`transform_cost`: the
    counts of the kernel the search built), every square on the ciphertexts it receives
    (:func:`square_cost`), and the message handling (:func:`messages_cost`). With a table
    measured at another time it re-prices the same plan; ``bench/latency.py`` uses it to
    compare a network's time with a table measured around the run, as ``bench/kernels.py``
    does for kernels (this machine's speed moves by ±30 % between a compile and a run)."""
    if seg.layout.kind != "slots":
        raise ValueError("segment_seconds prices slot-layout segments; batch-axis ones are priced by predict_seconds")
    level, n_cts, total = seg.input_level, seg.n_input_cts, 0.0
    for op in seg.ops:
        if isinstance(op, Linear):
            t = program.layers[op.layer]
            total += transform_cost(t, level, costs)
            n_cts, level = t.n_out, level - 1
        elif isinstance(op, Square):
            total += square_cost(n_cts, level, costs)
        elif isinstance(op, Rescale):
            level -= op.primes
        elif not isinstance(op, Relinearize):
            raise ValueError(f"segment_seconds cannot price {type(op).__name__} in a slot-layout segment")
    rounded = seg is program.segments[-1]  # a latency program's steps travel as they are
    return total + messages_cost(seg.n_input_cts, seg.input_level, seg.n_output_cts, seg.output_level, costs, rounded)


def key_bytes(log_n: int, log_q: list[int], log_p: list[int]) -> tuple[int, int]:
    """``(wire, memory)`` bytes of one key-switching key (rotation or relinearization) at
    the top level: ``β = ⌈L/α⌉`` digits (``α`` = number of special primes), each two
    polynomials over all ``L + k`` limbs. On the wire the uniform half is a seed and every
    residue takes its prime's bit width; in memory both halves take 4 bytes a residue of a
    prime below ``2^32`` and 8 of the others (the engine keeps keys compact:
    :func:`plain_words`)."""
    n = 1 << log_n
    beta = math.ceil(len(log_q) / max(len(log_p), 1))
    wire = beta * n * sum(log_q + log_p) // 8
    memory = beta * 2 * n * sum(plain_words(log_q, log_p, compact=True))
    return wire, memory


def predict_seconds(program, costs: CostTable, items: int = 1) -> float:
    """Predicted seconds to answer ``items`` items with ``program`` (client included): per
    query, every segment's server ops and the client's encryption of its inputs and
    decryption of its outputs. Slot-layout segments carry their server time (priced by the
    packing search from the same kinds); batch-axis ops are priced here."""
    queries = -(-items // program.batch_capacity)
    total = 0.0
    for seg in program.segments:
        enc, dec = ("encrypt", "decrypt") if seg.layout.kind == "slots" else ("batch_encrypt", "batch_decrypt")
        total += seg.n_input_cts * costs[enc][seg.input_level] + seg.n_output_cts * costs[dec][seg.output_level]
        if seg.layout.kind == "slots":
            total += seg.predicted_s
            continue
        # the server parses the segment's input ciphertexts and serializes its outputs, as a
        # slot-layout segment's price includes (without it, one item of a small network was
        # priced below latency mode in throughput mode, which ran 1.7× slower)
        total += messages_cost(seg.n_input_cts, seg.input_level, seg.n_output_cts, seg.output_level, costs, rounded=True)
        level, size = seg.input_level, seg.in_size
        for op, parts in zip(seg.ops, op_input_parts(seg.ops)):
            if isinstance(op, Linear):
                lay = program.layers[op.layer]
                total += lay.matrix.nnz * lay.digits * parts / 2 * costs["gemm_mac"][level]
                size = lay.out_size
            elif isinstance(op, Square):
                # six products for a 3-part operand (an open tail: 5 parts), three for 2
                total += size * costs["batch_square"][level] * (parts - 1)
            elif isinstance(op, Relinearize):
                total += size * costs["batch_relin"][level]
            elif isinstance(op, Rescale):
                total += size * op.primes * parts / 2 * costs["batch_rescale"][level]
                level -= op.primes
            elif isinstance(op, DropTo):
                level = op.level
    return queries * total
