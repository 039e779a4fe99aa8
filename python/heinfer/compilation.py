"""``heinfer.compile``: a model (ONNX file or bytes, a PyTorch module, a :class:`Graph`, or a
classifier on features) to a program in throughput, latency or ``"auto"`` mode, with the
client-aided or the two-party protocol.

``mode="auto"`` compiles every mode that can run the network, prices each for ``batch_size``
items with the machine's measured costs (:mod:`heinfer.compiler.cost`,
:mod:`heinfer.compiler.two_party_cost`) and keeps the cheaper; a mode that refuses the network
leaves the other, and the program's ``meta["auto"]`` records the predictions and refusals.
Layer: the API (beside :mod:`heinfer.inference`, which runs what this compiles).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

import numpy as np

from heinfer.compiler.cost import analytic_costs, predict_seconds
from heinfer.compiler.dag import Dag, to_chain
from heinfer.compiler.ir import Graph
from heinfer.compiler.latency.compile import LatencyOptions, compile_latency
from heinfer.compiler.latency.noise import MAX_ITEMS, state_noise
from heinfer.compiler.latency.two_party import DEFAULT_BFV, compile_two_party
from heinfer.compiler.onnx_import import from_torch, load_onnx
from heinfer.compiler.throughput import Options, compile_graph
from heinfer.compiler.two_party_cost import analytic_two_party_costs, cost_params, predict_two_party_seconds
from heinfer.compiler.simulate_two_party import simulate_two_party
from heinfer.compiler.two_party_params import CHECK_ITEMS, PlainChoice, choose_bfv, choose_plain_bits
from heinfer.compiler.two_party_throughput import compile_two_party_throughput
from heinfer.errors import CompileError, FloodBudgetError, NotSupportedYetError, PrecisionWarning
from heinfer.features import META_KEY, FeatureExtractor
from heinfer.program.model import Program
from heinfer.program.modular import MAX_MODULUS_BITS
from heinfer.program.two_party import TwoPartyProgram
from heinfer.runtime.scales import set_exact_scales

__all__ = ["compile", "Options"]


def compile(  # noqa: A001 - the API name is the contract
    model: Any,
    mode: str = "throughput",
    *,
    example_input: Any = None,
    calibration: np.ndarray | None = None,
    input_bound: float | None = None,
    security: int = 128,
    batch_size: int = 1,
    protocol: str = "client-aided",
    features: Any = None,
    **options: Any,
) -> Program:
    """Compiles an ONNX model (path, bytes or ``onnx.ModelProto``), a :class:`Graph` or
    :class:`~heinfer.compiler.Dag`, or a
    ``torch.nn.Module`` (with ``example_input``) into a :class:`Program`.

    ``calibration``: sample inputs ``(n, *input_shape)`` that size the encryption scales
    (recommended; without them ``input_bound`` is required and the bounds are the sound but
    loose interval bounds). Other keyword arguments are fields of
    :class:`~heinfer.compiler.throughput.Options` (``input_bits``, ``weight_bits``, …) in
    throughput mode, of :class:`~heinfer.compiler.latency.compile.LatencyOptions`
    (``strategy``, ``scale_bits``, ``log_n``, ``items``: items per query, each in its own lane
    of the slots) in latency mode. ``batch_size``: the number of
    items ``mode="auto"`` plans for. Latency mode micro-benchmarks the engine's primitives
    for its parameters on first use (cached, see :mod:`heinfer.runtime.costs`).

    ``protocol``: how the non-polynomial layers run — ``"client-aided"`` (the client decrypts
    the pre-activations: no model privacy) or ``"two-party"`` (GAZELLE's protocol: BFV linear
    layers in fixed point, ReLU and max-pooling in garbled circuits on additive shares, noise
    flooding; squares by a truncation circuit and GAZELLE's AHE square protocol; the client
    learns the output only). Two-party compiles to a
    :class:`~heinfer.program.two_party.TwoPartyProgram` that :func:`infer` runs: in latency
    mode one item per query in latency mode's layouts (options: ``bandwidth`` in bytes/s,
    which prices layouts by their ciphertexts on the wire, default 1 Gbit/s; ``bfv``;
    ``strategy``); in throughput mode up to ``batch_size`` items per query on the batch axis
    (default :data:`~heinfer.compiler.two_party_throughput.DEFAULT_BATCH`, fewer for networks
    with many activations; option ``bfv``). ``mode="auto"`` with two-party compiles both and
    keeps the one with the lower predicted time for ``batch_size`` items
    (:mod:`heinfer.compiler.two_party_cost`). The BFV parameters are chosen for the network
    (:mod:`heinfer.compiler.two_party_params`: GAZELLE's 20-bit plaintext modulus unless the
    plan simulated on ``calibration`` needs up to 36 bits; the fewest 50-bit primes and the
    smallest ring at ``security`` that hold every layer's noise flooding; recorded in
    ``prog.meta["bfv_choice"]``), or given as ``bfv={"log_n", "log_q", "log_p",
    "plain_modulus", "security"}`` (checked against the security table).
    """
    if features is not None:
        return _compile_on_features(model, features, mode=mode, example_input=example_input, calibration=calibration,
                                    input_bound=input_bound, security=security, batch_size=batch_size, protocol=protocol, **options)
    if mode not in ("throughput", "latency", "auto"):
        raise CompileError(f"unknown mode {mode!r}: 'throughput', 'latency' or 'auto'")
    if protocol not in ("client-aided", "two-party"):
        raise CompileError(f"unknown protocol {protocol!r}: 'client-aided' or 'two-party'")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise CompileError(f"batch_size must be a positive integer, got {batch_size!r}")
    graph = _load_graph(model, example_input)
    if protocol == "two-party":
        if mode == "auto":
            return _compile_two_party_auto(graph, calibration, input_bound, security, options, batch_size)
        batch = batch_size if mode == "throughput" and batch_size > 1 else None
        return _compile_two_party(graph, calibration, input_bound, security, options, mode, batch)
    if mode == "latency":
        return _compile_latency(graph, calibration, input_bound, security, options)
    lat_options = {}
    if mode == "auto":  # each mode takes its own options
        latency_fields = {f.name for f in dataclasses.fields(LatencyOptions)} | {"measure_costs"}
        lat_options = {k: v for k, v in options.items() if k in latency_fields and k != "security"}
        options = {k: v for k, v in options.items() if k not in lat_options}
    try:
        opts = Options(security=security, **options)
    except TypeError as e:
        raise CompileError(f"unknown compiler option: {e}") from None
    if mode == "throughput":
        return set_exact_scales(compile_graph(graph, calibration=calibration, input_bound=input_bound, options=opts))
    try:  # an unknown latency-mode option is the caller's error, not a mode that refuses
        LatencyOptions(security=security, **{k: v for k, v in lat_options.items() if k != "measure_costs"})
    except TypeError as e:
        raise CompileError(f"unknown latency-mode option: {e}") from None
    compilers = {
        "latency": lambda: _compile_latency(graph, calibration, input_bound, security, lat_options),
        "throughput": lambda: set_exact_scales(compile_graph(graph, calibration=calibration, input_bound=input_bound, options=opts)),
    }
    candidates, refused = _each_mode(compilers)
    measured = lat_options.get("measure_costs", True)
    # one cost model prices both candidates, client included (heinfer.compiler.cost)
    times = {m: predict_seconds(p, _costs(p, measured), batch_size) for m, p in candidates.items()}
    chosen = candidates[min(times, key=times.get)]
    chosen.meta["auto"] = {"batch_size": batch_size, **{f"{m}_s": t for m, t in times.items()}, **({"refused": refused} if refused else {})}
    return chosen


def _each_mode(compilers: dict) -> tuple[dict, dict]:
    """``mode="auto"``'s candidates: each mode's program, or why it refused the network
    (:class:`CompileError`; latency first, which wins a tie). Raises the refusal when both
    refuse (both messages when they differ)."""
    candidates, refused = {}, {}
    for mode, build in compilers.items():
        try:
            candidates[mode] = build()
        except CompileError as e:
            refused[mode] = str(e)
    if not candidates:
        lat, thr = refused["latency"], refused["throughput"]
        raise CompileError(lat if lat == thr else f"neither mode compiles this network: latency: {lat}; throughput: {thr}")
    return candidates, refused


def _load_graph(model: Any, example_input: Any) -> Graph:
    """The chain graph of what :func:`compile` accepts: a Graph, a Dag, an ONNX path, bytes or
    ModelProto, or a torch module (exported with ``example_input``)."""
    if isinstance(model, Graph):
        return model
    if isinstance(model, Dag):
        return to_chain(model)
    if isinstance(model, (str, bytes, bytearray, os.PathLike)) or type(model).__name__ == "ModelProto":
        return load_onnx(model)
    if hasattr(model, "forward") and hasattr(model, "parameters"):
        if example_input is None:
            raise CompileError("a torch.nn.Module needs example_input to be exported")
        return from_torch(model, example_input)
    raise CompileError(f"cannot compile a {type(model).__name__}: give an ONNX path/bytes/ModelProto or a torch.nn.Module")


def _compile_on_features(model: Any, features: Any, calibration: np.ndarray | None, **kwargs: Any) -> Program:
    """``compile(model, features=extractor)``: the classifier ``model`` takes the extractor's
    outputs; the calibration inputs are raw inputs, run through the extractor first."""
    ext = FeatureExtractor(features)
    if calibration is None:
        raise CompileError("a classifier on deep features needs calibration inputs (raw inputs of the extractor)")
    feats = ext(np.asarray(calibration))
    graph = _load_graph(model, kwargs.pop("example_input", None))  # a torch module: on features
    shape = tuple(graph.input_shape)
    if int(np.prod(shape)) != feats.shape[1]:
        raise CompileError(f"the classifier takes {shape} values, the feature extractor yields {feats.shape[1]}")
    program = compile(graph, calibration=feats.reshape(len(feats), *shape), **kwargs)
    program.meta[META_KEY] = ext.sha256
    return program


def _costs(prog: Program, measured: bool) -> dict:
    """The cost table of a program's parameters: measured on this machine (cached) or
    analytic."""
    from heinfer.runtime.costs import measure_costs

    p = prog.params
    return measure_costs(p) if measured else analytic_costs(int(p["log_n"]), len(p["log_q"]), len(p["log_p"]))


def _compile_latency(graph: Graph, calibration, input_bound, security: int, options: dict) -> Program:
    from heinfer.runtime.costs import measure_costs

    options = dict(options)
    measured = options.pop("measure_costs", True)
    try:
        opts = LatencyOptions(security=security, **options)
    except TypeError as e:
        raise CompileError(f"unknown latency-mode option: {e}") from None
    prog = set_exact_scales(compile_latency(graph, calibration, input_bound, opts, measure_costs if measured else None))
    if calibration is None:  # inputs for the simulation: uniform within the stated bound
        bound = prog.input_bound
        calibration = np.random.default_rng(0).uniform(-bound, bound, (MAX_ITEMS, *prog.input_shape))
    return state_noise(prog, np.asarray(calibration, dtype=np.float64))


def _check_bfv(params: Any) -> None:
    """A caller's BFV parameter dict, checked as the parties will build it (the engine's
    :class:`~heinfer.errors.ParameterError` names what is wrong: security, a plaintext modulus
    that is not a prime ``≡ 1 (mod 2N)``, …) — at compile time, not at the first query."""
    from heinfer import bfv as _bfv

    keys = ("log_n", "log_q", "log_p", "plain_modulus", "security")
    if not isinstance(params, dict) or any(k not in params for k in keys):
        raise CompileError(f"bfv must be a dict with the keys {', '.join(keys)}, got {params!r}")
    if not isinstance(params["log_q"], (list, tuple)) or len(params["log_q"]) < 2:
        # the flooding alone is 2^(40 + log2 N) and more: one prime leaves too little of Δ = ⌊q/p⌋
        raise CompileError(f"two-party protocol: bfv needs at least two ciphertext primes (log_q), got {params['log_q']!r}")
    _bfv.BfvParameters(params["log_n"], params["log_q"], params["log_p"], params["plain_modulus"], params["security"])


def _compile_two_party_auto(graph: Graph, calibration, input_bound, security: int, options: dict, batch_size: int) -> TwoPartyProgram:
    """``mode="auto"`` with the two-party protocol: both modes compiled, the one with the lower
    predicted time for ``batch_size`` items kept (:mod:`heinfer.compiler.two_party_cost`: the
    ciphertext work and traffic, the part that differs: the engine's cost table for the BFV
    ring, measured once and cached, and the protocol's per-ciphertext steps, measured on each
    call in well under a second; analytic with ``measure_costs=False``). A mode that refuses
    the network (e.g. throughput mode's exact kernel, whose weight rows must stay below a
    1-norm bound) leaves the other."""
    from heinfer.runtime.costs import measure_costs
    from heinfer.runtime.two_party_costs import measure_two_party_costs

    measured = options.get("measure_costs", True)
    bandwidth = options.get("bandwidth", 125e6)
    if not isinstance(bandwidth, (int, float)) or not bandwidth > 0:
        raise CompileError(f"bandwidth must be positive bytes per second, got {bandwidth!r}")
    shared: dict = {}  # the plaintext modulus is chosen once for both modes (it depends on the plan only)
    candidates, refused = _each_mode(  # the precision check runs once, on the program kept
        {m: (lambda m=m: _compile_two_party(graph, calibration, input_bound, security, options, m, None, False, shared)) for m in ("latency", "throughput")}
    )
    def costs_for(prog: TwoPartyProgram) -> dict:  # each mode priced in its own BFV ring
        if not measured:
            return analytic_two_party_costs(prog.bfv)
        flood = max((seg.flood_bits for seg in prog.segments), default=0)
        return {**measure_costs(cost_params(prog.bfv)), **measure_two_party_costs(prog.bfv, flood)}

    times = {m: predict_two_party_seconds(p, costs_for(p), batch_size, float(bandwidth)) for m, p in candidates.items()}
    chosen = candidates[min(times, key=times.get)]
    chosen.meta["auto"] = {
        "batch_size": batch_size, **{f"{m}_s": t for m, t in times.items()}, "bandwidth": bandwidth,
        "priced": "ciphertext work and traffic (the garbled circuits, the same per item in both modes, are not priced)",
        **({"refused": refused} if refused else {}),
    }
    if calibration is not None:
        _check_two_party_precision(chosen, graph, calibration)
    return chosen


def _compile_two_party(
    graph: Graph, calibration, input_bound, security: int, options: dict, mode: str, batch: int | None, check_precision: bool = True,
    shared: dict | None = None,
) -> TwoPartyProgram:
    """One mode's two-party program; ``shared`` (``mode="auto"``) carries the plaintext modulus
    chosen by the first mode compiled to the second."""
    options = {k: v for k, v in options.items() if k != "measure_costs"}
    bfv = options.pop("bfv", None)
    if bfv is not None:
        _check_bfv(bfv)
    bandwidth = float(options.pop("bandwidth", 125e6))
    try:
        opts = LatencyOptions(security=security, **options)
    except TypeError as e:
        raise CompileError(f"unknown two-party option: {e}") from None
    if opts.items != 1:
        raise NotSupportedYetError("items per query in lanes (the option items) with the two-party protocol is not supported yet")

    def compile_with(params: dict) -> TwoPartyProgram:
        if mode == "throughput":
            return compile_two_party_throughput(graph, calibration, input_bound, opts, params, batch)
        return compile_two_party(graph, calibration, input_bound, opts, params, bandwidth)

    if bfv is not None:
        prog = compile_with(bfv)
    else:
        shared = {} if shared is None else shared
        if "choice" not in shared:
            shared["choice"] = _plain_choice(graph, calibration, input_bound, opts.headroom)
        prog = _compile_two_party_chosen(shared["choice"], opts, compile_with)
    if check_precision and calibration is not None:
        _check_two_party_precision(prog, graph, calibration)
    return prog


def _prime_for(bits: int) -> int:
    """The largest plaintext prime of ``bits`` bits ``≡ 1 (mod 2^16)``: batching in every ring
    up to ``N = 2^15``."""
    from heinfer import bfv as _bfv

    return _bfv.plain_primes(15, bits)[0]


def _plain_choice(graph: Graph, calibration, input_bound, headroom: float) -> PlainChoice:
    """The plaintext modulus size for the network (:func:`~heinfer.compiler.two_party_params.choose_plain_bits`
    on the calibration inputs; GAZELLE's 20 bits without them)."""
    if calibration is None:
        return PlainChoice(20, {})
    return choose_plain_bits(graph, calibration, input_bound, headroom, _prime_for)


def _compile_two_party_chosen(choice: PlainChoice, opts: LatencyOptions, compile_with) -> TwoPartyProgram:
    """Compiles with BFV parameters chosen for the network (:mod:`heinfer.compiler.two_party_params`):
    the plaintext modulus of ``choice``, the ciphertext modulus and ring from the layers'
    flooding, at ``opts.security``. GAZELLE's parameters where they suffice;
    ``prog.meta["bfv_choice"]`` records the choice."""
    p = int(DEFAULT_BFV["plain_modulus"]) if choice.bits == 20 else _prime_for(choice.bits)

    def checked(params: dict) -> TwoPartyProgram:
        _check_bfv(params)  # the table holds what ring_for_flood picks; the engine checks it too
        return compile_with(params)

    try:
        prog = choose_bfv(checked, p, opts.security)
    except FloodBudgetError:
        if p != DEFAULT_BFV["plain_modulus"]:
            raise
        # GAZELLE's p batches in N = 2^13 only: a 20-bit prime that batches in larger rings
        prog = choose_bfv(checked, _prime_for(20), opts.security)
    prog.meta["bfv_choice"] = {**choice.record(), "log_n": prog.bfv["log_n"], "log_q": list(prog.bfv["log_q"])}
    return prog


#: Calibration items :func:`_check_two_party_precision` simulates (as many as the choice of
#: the plaintext modulus does).
PRECISION_CHECK_ITEMS = CHECK_ITEMS
#: A two-party program warns (:class:`~heinfer.errors.PrecisionWarning`) when, on those items,
#: an item's largest output error exceeds this fraction of its largest output …
PRECISION_WARN_REL_ERROR = 0.5
#: … or fewer than this fraction of the items keep the model's largest output (classifiers).
PRECISION_WARN_AGREEMENT = 0.75


def _check_two_party_precision(prog: TwoPartyProgram, graph: Graph, calibration) -> None:
    """Simulates ``prog`` exactly (as the protocol computes: integers mod ``p``, the circuits'
    truncations) on the first calibration inputs, compares with the model in float64, records
    ``prog.meta["simulated_error"]`` and warns when the fixed point is too coarse for the
    network (a deep one at a 20-bit plaintext modulus: MobileNetV2's answers are wrong)."""
    if prog.plain_modulus >= 1 << MAX_MODULUS_BITS:  # the exact simulation's limit; the parties still run it
        return
    x = np.asarray(calibration, dtype=np.float64)[:PRECISION_CHECK_ITEMS]
    want = graph.run(x).reshape(len(x), -1)
    got = simulate_two_party(prog, x).reshape(len(x), -1)
    rel = float((np.abs(got - want).max(axis=1) / np.maximum(np.abs(want).max(axis=1), 1e-300)).max())
    agree = float((got.argmax(axis=1) == want.argmax(axis=1)).mean()) if want.shape[1] > 1 else None
    prog.meta["simulated_error"] = {"items": len(x), "rel_error": rel, "agreement": agree}
    if rel > PRECISION_WARN_REL_ERROR or (agree is not None and agree < PRECISION_WARN_AGREEMENT):
        warnings.warn(
            PrecisionWarning(
                f"two-party protocol: simulated on {len(x)} calibration inputs, the program's outputs are off by up to "
                f"{rel:.0%} of each input's largest output" + (f" and {agree:.0%} keep the model's largest output" if agree is not None else "")
                + f": the {prog.plain_modulus.bit_length()}-bit plaintext modulus is too coarse for this network's fixed point "
                "(without bfv={...} the compiler picks the smallest of 20 to 36 bits whose plan is precise enough; "
                "pass bfv={...} with a wider plaintext modulus, or calibration inputs closer to the queries)"
            ),
            stacklevel=4,
        )
