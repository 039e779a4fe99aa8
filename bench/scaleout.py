"""Scale-out benchmark: CryptoNets-ReLU on Ray actors (heinfer.cluster), measured on 1 and 2
local workers and projected to 8, 64 and 512 nodes.

    .venv/bin/python bench/scaleout.py [--quick] [--rounds N] [--queries Q] [--fault-runs F]
    make bench-scaleout                      # the same (installs matplotlib for the plot)

Everything runs on one local Ray started on 127.0.0.1 (dashboard off, usage reporting off;
``heinfer.cluster.local``). The work measured is the server's: for each query (a full batch
of the program's capacity, held-out digits tiled), each segment's input ciphertexts are
validated, run, and the output encoded — exactly what :class:`heinfer.Server` does per segment
— with the inputs recorded once from a real client/server exchange. Every engine runs one
thread (the driver too). In the same process, in interleaved rounds (order rotated):

* **in-process**: :class:`heinfer.runtime.Executor`, one thread, queries back to back;
* **ray-1**: :class:`heinfer.cluster.RayExecutor`, one worker; the front-end (this process,
  as the gRPC server's threads would) keeps two queries in flight per worker, so that its own
  work — checking each segment's input in full without decoding it (the worker decodes it),
  as :class:`heinfer.Server` does for this executor, and
  Ray's transfers — overlaps the worker's; also measured one query at a time
  (``ray_overhead_sequential``);
* **ray-2**: two workers, four queries in flight (sharded by queries: throughput mode); also
  with one query in flight per worker (``speedup_2_sequential``, against ray-1 one at a time).

``ray_overhead`` = median over rounds of ray-1 time / in-process time − 1 (target ≤ 0.10);
``speedup_2`` = median of ray-1 time / ray-2 time (target ≥ 1.8). **Faults**: F single
queries on two workers split by output rows, each with a worker SIGKILLed at a random moment
while it computes; the answer must be byte-identical to the in-process one (wrong or lost
answers counted; target 0). **Projection** (stated model): n workers of one core each as
measured here, a 10 Gbit/s full-duplex link per front-end, 100 µs per message, and one
gRPC front-end (the driver, with ``--frontend-cores``) per 16 workers; images/s =
min(compute: n × items ÷ the CPU time per query measured inside the actors; front-end network:
links × 1.25 GB/s ÷ bytes a query moves each way; front-end CPU: cores ÷ the driver's measured
CPU per query) × items per query. CPU times are also printed for the single-machine runs:
unlike wall-clock ratios they do not move with the load other processes put on the machine. The plot (``bench/figures/scaleout.png``) shows the projection
and its three bounds. **Latency mode** (``latency`` in the JSON; ``--no-latency`` skips it): one
query of MiniONN's CIFAR network (client-aided) in-process, on one Ray worker, and on two
workers that split each layer by groups of output ciphertexts (``split="channels"``) or of
giant steps (``split="giant-steps"``), and as ``split="auto"`` chooses per layer, in
interleaved rounds; ``speedup_2`` there = one worker's time / two workers' with
``channels`` (``speedup_2_giant_steps``, ``speedup_2_auto`` for the others). Then the same
query on two workers holding a block of the layers each (``split="layers"``), with each
worker's peak resident memory under both plans. **Two-party** (``two_party``): GAZELLE's
service with its sessions on one and on two actors, two clients querying at once. The last
line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import statistics
import sys
import threading
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import heinfer
from heinfer import _native
from heinfer.cluster import NetworkModel, RayExecutor
from heinfer.cluster.local import ensure_ray, release_ray
from heinfer.protocol.messages import framing
from heinfer.protocol.trace import segment_inputs
from heinfer.runtime.executor import Executor, native_params
from machine import build_profile, cpu_model

NODES = (8, 64, 512)
WORKERS_PER_FRONTEND = 16


def one_query(ex, params, inputs: list, keys: tuple = (None, None)) -> list[bytes]:
    """The server's work for one query, as :class:`heinfer.Server` does it: every segment's
    input validated, run (with the session's evaluation ``keys``) and its output written into
    a message (a step's header, then the ciphertexts). In-process the input is decoded; for
    the Ray executor (``run_serialized``) it is checked without decoding and forwarded as it
    came."""
    outs = []
    for k, data in enumerate(inputs):
        frame = framing("step", query="ab", ref="cd", step=k, chunk=0, chunks=1)
        if hasattr(ex, "run_serialized"):
            count = _native.CiphertextBatch.check_bytes(params, data, len(data), 1 << 20)[0]
            outs.append(ex.run_serialized(k, [data], count, *keys).to_bytes(frame=frame))
        else:
            batch = _native.CiphertextBatch.from_bytes(params, data, len(data), 1 << 20)
            outs.append(ex.run(k, batch, *keys).to_bytes(frame=frame))
    return outs


def two_party_sessions(rounds: int, queries: int = 6) -> dict:
    """GAZELLE's two-party service (network C: CryptoNets-ReLU, latency mode) over gRPC on
    127.0.0.1 with its sessions on Ray actors (whole sessions per actor): two clients at once,
    ``queries`` one-image queries each, against one and two actors; rounds interleaved,
    medians. Ray must be running with two free logical CPUs."""
    from heinfer.serve.two_party import connect_two_party, serve_two_party

    d = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
    prog = heinfer.compile(os.path.join(ROOT, "models", "cryptonets_relu.onnx"), mode="latency", protocol="two-party",
                           calibration=d["x"][100:164])
    x = d["x"][:queries]
    runs: dict = {1: [], 2: []}
    for r in range(rounds):
        for workers in (1, 2) if r % 2 == 0 else (2, 1):
            with serve_two_party(prog, backend="ray", ray_workers=workers) as handle:
                conns = [connect_two_party(handle.address, prog.public()) for _ in range(2)]
                try:
                    t0 = time.perf_counter()
                    ts = [threading.Thread(target=lambda c=c: [c.infer(x[i : i + 1]) for i in range(queries)]) for c in conns]
                    for t in ts:
                        t.start()
                    for t in ts:
                        t.join()
                    runs[workers].append(time.perf_counter() - t0)
                finally:
                    for c in conns:
                        c.close()
                assert handle.service.errors == 0
    ips = {w: 2 * queries / statistics.median(v) for w, v in runs.items()}
    speedup = statistics.median(a / b for a, b in zip(runs[1], runs[2]))
    print(f"two-party service (network C, latency mode), 2 clients × {queries} queries at once: 1 actor "
          f"{ips[1]:.1f} images/s, 2 actors {ips[2]:.1f} images/s: {speedup:.2f}× ({rounds} rounds)")
    return {"network": "cryptonets_relu", "images_s": {"1": round(ips[1], 2), "2": round(ips[2], 2)}, "speedup_2": round(speedup, 3)}


def latency_split(rounds: int) -> dict:
    """One latency-mode query (MiniONN's CIFAR network, client-aided, the server's work as in
    :func:`one_query`) in-process, on Ray with one query on one worker (``split="queries"``)
    and on two workers splitting each layer by output ciphertexts (``split="channels"``) or by
    giant steps (``split="giant-steps"``: a layer's groups summed on one worker, which also
    divides the layers with one output ciphertext); rounds interleaved (order rotated),
    medians of per-round ratios. Ray must be running with
    four free logical CPUs."""
    sys.path.insert(0, os.path.join(ROOT, "models"))
    import cifar

    t0 = time.perf_counter()
    prog = heinfer.compile(cifar.build("minionn_cifar"), mode="latency", calibration=cifar.random_inputs(32, 11))
    compile_s = time.perf_counter() - t0
    params = native_params(prog.params)
    recorded = segment_inputs(prog, cifar.random_inputs(1, 3), keys=True)
    inputs, keys = [d for d, _, _ in recorded], recorded[0][1:]
    local = Executor(prog)
    want = one_query(local, params, inputs, keys)
    # one executor of two workers (each holds the program's plaintexts: two executors would
    # not fit in memory), its plan switched between rounds; one query at a time, so with
    # split="queries" it runs on one worker
    ray = RayExecutor(prog, workers=2, split="auto")
    print(f"# latency mode: MiniONN CIFAR, params {prog.params} (compiled in {compile_s:.0f} s); plan with split='auto':")
    for line in ray.plan.describe():
        print(f"#   {line}")
    try:
        backends = [("inproc", None), ("ray1", "queries"), ("ray2", "channels"), ("ray2g", "giant-steps"), ("ray2a", "auto")]
        for _, split in backends[1:]:
            ray.replan(split)
            assert one_query(ray, params, inputs, keys) == want, "the Ray backend answered differently"
        runs: dict = {name: [] for name, _ in backends}
        for r in range(rounds):
            for name, split in backends[r % len(backends) :] + backends[: r % len(backends)]:
                if split is not None:
                    ray.replan(split)
                t = time.perf_counter()
                one_query(ray if split else local, params, inputs, keys)
                runs[name].append(time.perf_counter() - t)
        whole_rss = [w["peak_rss_bytes"] for w in ray.worker_stats()]
    finally:
        ray.close()
    # layer tiles: each worker prepares its block of segments (the large-model plan)
    tiles = RayExecutor(prog, workers=2, split="layers")
    try:
        assert one_query(tiles, params, inputs, keys) == want, "the Ray backend answered differently"
        layer_runs = []
        for _ in range(rounds):
            t = time.perf_counter()
            one_query(tiles, params, inputs, keys)
            layer_runs.append(time.perf_counter() - t)
        tile_rss = [w["peak_rss_bytes"] for w in tiles.worker_stats()]
        blocks = [tiles.plan.held_by(i) for i in range(2)]
    finally:
        tiles.close()
    med = {k: statistics.median(v) for k, v in runs.items()}
    speedup = statistics.median(a / b for a, b in zip(runs["ray1"], runs["ray2"]))
    vs_inproc = statistics.median(a / b for a, b in zip(runs["inproc"], runs["ray2"]))
    speedup_g = statistics.median(a / b for a, b in zip(runs["ray1"], runs["ray2g"]))
    speedup_a = statistics.median(a / b for a, b in zip(runs["ray1"], runs["ray2a"]))
    print(f"latency mode, one query (server's work): in-process {med['inproc'] * 1e3:.0f} ms, Ray 1 worker "
          f"{med['ray1'] * 1e3:.0f} ms, Ray 2 workers split by output ciphertexts {med['ray2'] * 1e3:.0f} ms: "
          f"{speedup:.2f}× over one worker, {vs_inproc:.2f}× over in-process; split by giant steps "
          f"{med['ray2g'] * 1e3:.0f} ms: {speedup_g:.2f}× over one worker; split='auto' (channels where a layer "
          f"has several output ciphertexts, giant steps where it has one) {med['ray2a'] * 1e3:.0f} ms: "
          f"{speedup_a:.2f}× over one worker ({rounds} rounds)")
    gb = [round(b / 1e9, 2) if b else None for b in whole_rss + tile_rss]
    print(f"layer tiles (split='layers', blocks {blocks}): one query {statistics.median(layer_runs) * 1e3:.0f} ms; "
          f"worker peak RSS {gb[2]} / {gb[3]} GB, against {gb[0]} / {gb[1]} GB for the two workers above (each "
          f"prepares the groups of its split layers and the unsplit layers; the first also ran the one-worker rounds, "
          f"so it prepared the split layers whole as well)")
    return {
        "network": "minionn_cifar",
        "inproc_s": round(med["inproc"], 4),
        "ray1_s": round(med["ray1"], 4),
        "ray2_channels_s": round(med["ray2"], 4),
        "speedup_2": round(speedup, 3),
        "ray2_giant_steps_s": round(med["ray2g"], 4),
        "speedup_2_giant_steps": round(speedup_g, 3),
        "ray2_auto_s": round(med["ray2a"], 4),
        "speedup_2_auto": round(speedup_a, 3),
        "speedup_vs_inproc": round(vs_inproc, 3),
        "layers_s": round(statistics.median(layer_runs), 4),
        "layers_blocks": blocks,
        "worker_peak_rss_gb": {"channels": gb[:2], "layers": gb[2:]},
    }


def throughput(ex, params, inputs, queries: int, threads: int) -> tuple[float, float]:
    """(wall seconds, driver CPU seconds) for ``queries`` queries from ``threads`` threads."""
    todo = list(range(queries))
    lock = threading.Lock()

    def loop():
        while True:
            with lock:
                if not todo:
                    return
                todo.pop()
            one_query(ex, params, inputs)

    c0, t0 = time.process_time(), time.perf_counter()
    ts = [threading.Thread(target=loop) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, time.process_time() - c0


def fault_runs(ex: RayExecutor, params, inputs, want: list[bytes], runs: int, seed: int) -> tuple[int, int, list]:
    """``runs`` queries, each with a random worker killed at a random moment; returns
    (wrong or lost answers, shards re-run, notes)."""
    rng = random.Random(seed)
    bad, notes = 0, []
    reruns0 = ex.reruns
    for r in range(runs):
        pid = ex.worker_pids()[rng.randrange(ex.workers)]
        box: dict = {}

        def go(box: dict = box) -> None:
            try:
                box["out"] = one_query(ex, params, inputs)
            except Exception as e:  # noqa: BLE001 - counted as lost
                box["err"] = e

        t = threading.Thread(target=go)
        t.start()
        time.sleep(rng.uniform(0.01, 0.25))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        t.join(timeout=300)
        if t.is_alive():
            bad += 1
            notes.append(f"run {r}: hung")
            t.join()
        elif "err" in box:
            bad += 1
            notes.append(f"run {r}: {type(box['err']).__name__}: {box['err']}")
        elif box["out"] != want:
            bad += 1
            notes.append(f"run {r}: WRONG answer")
    return bad, ex.reruns - reruns0, notes


def project(per_worker_ips: float, bytes_each_way: int, fe_cpu_s: float, items: int, fe_cores: int, net: NetworkModel) -> dict:
    """images/s at each node count and the three bounds (see the module documentation)."""
    out = {}
    for n in NODES:
        frontends = math.ceil(n / WORKERS_PER_FRONTEND)
        compute = n * per_worker_ips
        network = frontends * net.bandwidth / bytes_each_way * items
        cpu = frontends * fe_cores / fe_cpu_s * items
        out[n] = {"images_s": min(compute, network, cpu), "compute": compute, "network": network, "frontend_cpu": cpu, "frontends": frontends}
    return out


def plot(path: str, measured: dict, proj: dict) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed (make bench-scaleout installs it): no plot"
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    xs = list(NODES)
    ax.loglog(xs, [proj[n]["images_s"] for n in xs], "o-", label="projected (min of bounds)")
    for key, style in (("compute", ":"), ("network", "--"), ("frontend_cpu", "-.")):
        ax.loglog(xs, [proj[n][key] for n in xs], style, label=f"bound: {key.replace('_', ' ')}")
    ax.loglog([1, 2], [measured["1"], measured["2"]], "s", color="black", label="measured here (127.0.0.1)")
    ax.set_xlabel("workers (one core each)")
    ax.set_ylabel("images/s (CryptoNets-ReLU)")
    ax.set_title("heinfer on Ray: measured and projected throughput")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and queries")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--queries", type=int, help="queries per backend per round")
    ap.add_argument("--fault-runs", type=int, default=10)
    ap.add_argument("--frontend-cores", type=int, default=16)
    ap.add_argument("--submit", type=int, default=1, help="front-end threads per worker, ×2 (queries in flight)")
    ap.add_argument("--plot", default=os.path.join(ROOT, "bench", "figures", "scaleout.png"))
    ap.add_argument("--no-latency", action="store_true", help="skip the latency-mode split (MiniONN CIFAR) and the two-party sessions")
    args = ap.parse_args()
    rounds = args.rounds or (3 if args.quick else 7)
    queries = args.queries or (4 if args.quick else 8)
    heinfer.set_num_threads(1)

    d = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
    prog = heinfer.compile(os.path.join(ROOT, "models", "cryptonets_relu.onnx"), mode="throughput", calibration=d["x"][:64])
    items = prog.batch_capacity
    x = np.resize(d["x"], (items, *d["x"].shape[1:]))
    params = native_params(prog.params)
    inputs = segment_inputs(prog, x)
    local = Executor(prog)
    want = one_query(local, params, inputs)
    outs_bytes = [len(b) for b in want]
    in_bytes = [len(b) for b in inputs]
    print(f"# heinfer scale-out benchmark — CPU: {cpu_model()}, build: {build_profile()}")
    print(f"# CryptoNets-ReLU, throughput mode, params {prog.params}, {items} images/query, one engine thread everywhere")
    print(f"# per query: segment inputs {[round(b / 1e6, 2) for b in in_bytes]} MB, outputs {[round(b / 1e6, 2) for b in outs_bytes]} MB")

    # Five logical CPUs: the 1-worker, 2-worker and fault executors live side by side, only
    # one of them busy at a time (this machine has os.cpu_count() cores).
    owned = ensure_ray(None, 5)
    try:
        t0 = time.perf_counter()
        ray1 = RayExecutor(prog, workers=1, split="queries")
        ray2 = RayExecutor(prog, workers=2, split="queries")
        print(f"# actors ready in {time.perf_counter() - t0:.1f} s; plan on 2 workers (split=auto would choose):")
        for line in heinfer.cluster.shard_plan(prog, 2).describe():
            print(f"#   {line}")
        for ex in (ray1, ray2):  # warm-up, and the answers are the in-process ones
            assert one_query(ex, params, inputs) == want, "the Ray backend answered differently"
        one_query(local, params, inputs)
        runs = {"inproc": [], "ray1": [], "ray2": [], "ray1_seq": [], "ray2_seq": []}
        cpu = {"inproc": [], "ray1": [], "ray2": [], "ray1_seq": [], "ray2_seq": []}
        backends = [
            ("inproc", local, 1), ("ray1", ray1, 2 * args.submit), ("ray2", ray2, 2 * 2 * args.submit),
            ("ray1_seq", ray1, 1), ("ray2_seq", ray2, 2),
        ]
        print(f"# {rounds} rounds of {queries} queries per backend (order rotated each round)")
        for r in range(rounds):
            order = backends[r % len(backends) :] + backends[: r % len(backends)]
            for name, ex, threads in order:
                wall, c = throughput(ex, params, inputs, queries, threads)
                runs[name].append(wall)
                if name in cpu:
                    cpu[name].append(c / queries)
            print(
                f"round {r + 1}: images/s in-process {queries * items / runs['inproc'][-1]:.0f}, "
                f"ray-1 {queries * items / runs['ray1'][-1]:.0f} (sequential front-end "
                f"{queries * items / runs['ray1_seq'][-1]:.0f}), ray-2 {queries * items / runs['ray2'][-1]:.0f} "
                f"(one query in flight per worker {queries * items / runs['ray2_seq'][-1]:.0f})"
            )
        stats1 = ray1.worker_stats()
        busy = sum(w["busy_s"] for w in stats1)
        worker_cpu = sum(w["cpu_s"] for w in stats1)
        done = (len(runs["ray1"]) + len(runs["ray1_seq"])) * queries + 1  # + the warm-up query
        worker_s = busy / done
        worker_cpu /= done
        overhead = statistics.median(b / a for a, b in zip(runs["inproc"], runs["ray1"])) - 1
        overhead_seq = statistics.median(b / a for a, b in zip(runs["inproc"], runs["ray1_seq"])) - 1
        speedup_seq = statistics.median(a / b for a, b in zip(runs["ray1_seq"], runs["ray2_seq"]))
        speedup = statistics.median(a / b for a, b in zip(runs["ray1"], runs["ray2"]))
        ips = {k: queries * items / statistics.median(v) for k, v in runs.items()}
        ray1.close()
        ray2.close()

        faults = RayExecutor(prog, workers=2, split="rows", timeout_s=120)
        assert one_query(faults, params, inputs) == want
        t0 = time.perf_counter()
        bad, reruns, notes = fault_runs(faults, params, inputs, want, args.fault_runs, seed=14)
        fault_s = time.perf_counter() - t0
        faults.close()
        latency = latency_split(5 if args.quick else 9) if not args.no_latency else None
        two_party = two_party_sessions(3 if args.quick else 5) if not args.no_latency else None
    finally:
        if owned:
            release_ray()

    net = NetworkModel()
    per_query = statistics.median(runs["inproc"]) / queries
    # Per-worker rate from the per-shard compute measured inside the actors (decode, run,
    # encode; CPU seconds of the worker process, so that this shared machine's load does not
    # count), the front-end's work being on the front-end machines of the model.
    per_worker = items / worker_cpu
    fe_cpu = statistics.median(cpu["ray1_seq"])
    each_way = sum(in_bytes) + sum(outs_bytes)
    proj = project(per_worker, each_way, fe_cpu, items, args.frontend_cores, net)
    measured = {"1": round(ips["ray1"]), "2": round(ips["ray2"])}
    where = plot(args.plot, measured, proj)

    print()
    print(f"in-process server, 1 thread:  {ips['inproc']:.0f} images/s ({per_query * 1e3:.0f} ms/query)")
    print(f"Ray, 1 worker:                {ips['ray1']:.0f} images/s   ray_overhead {overhead * 100:+.1f} % (target ≤ +10 %; "
          f"the front-end pipelines 2 queries per worker)")
    print(f"Ray, 1 worker, one query at a time: {ips['ray1_seq']:.0f} images/s   overhead {overhead_seq * 100:+.1f} % "
          f"(the front-end's own checking and Ray's transfers not overlapped with the worker)")
    print(f"Ray, 2 workers:               {ips['ray2']:.0f} images/s   speedup_2 {speedup:.2f}× (target ≥ 1.8×)")
    print(f"Ray, 2 workers, one query in flight per worker: {ips['ray2_seq']:.0f} images/s   "
          f"speedup {speedup_seq:.2f}× over one worker with one query in flight")
    print(f"worker busy time per query (inside the actor, one thread): {worker_s * 1e3:.0f} ms "
          f"= {worker_s / per_query:.2f}× the in-process server's {per_query * 1e3:.0f} ms")
    inproc_cpu = statistics.median(cpu["inproc"])
    fe_cpu1 = statistics.median(cpu["ray1_seq"])
    print(f"CPU per query (robust to the machine's load): in-process {inproc_cpu * 1e3:.0f} ms; Ray: worker "
          f"{worker_cpu * 1e3:.0f} ms (+{(worker_cpu / inproc_cpu - 1) * 100:.0f} %) + front-end {fe_cpu1 * 1e3:.0f} ms")
    print(f"bytes per query through the front end, each way: {each_way / 1e6:.1f} MB")
    print(f"faults: {args.fault_runs} queries with a worker SIGKILLed mid-query, {reruns} shards re-run, "
          f"{bad} wrong or lost answers ({fault_s:.0f} s)" + "".join(f"\n  {n}" for n in notes))
    print(f"projection (network model: {net.bandwidth * 8 / 1e9:.0f} Gbit/s, {net.latency * 1e6:.0f} µs per message; "
          f"one front-end of {args.frontend_cores} cores per {WORKERS_PER_FRONTEND} workers; "
          f"{per_worker:.0f} images/s per worker from the measured per-shard compute):")
    for n in NODES:
        p = proj[n]
        bound = min(("compute", "network", "frontend_cpu"), key=lambda k: p[k])
        print(f"  {n:4d} workers, {p['frontends']:2d} front-end(s): {p['images_s']:10.0f} images/s (bound: {bound}; "
              f"compute {p['compute']:.0f}, network {p['network']:.0f}, front-end CPU {p['frontend_cpu']:.0f}); "
              f"query latency ≥ {per_query * 1e3 + 2 * len(inputs) * net.latency * 1e3 + 2 * each_way / net.bandwidth * 1e3:.0f} ms")
    print(f"plot: {where}")
    print(json.dumps({
        "workers": measured,
        "inproc": round(ips["inproc"]),
        "speedup_2": round(speedup, 3),
        "ray_overhead": round(overhead, 4),
        "ray_overhead_sequential": round(overhead_seq, 4),
        "speedup_2_sequential": round(speedup_seq, 3),
        "worker_s_per_query": round(worker_s, 4),
        "worker_cpu_overhead": round(worker_cpu / inproc_cpu - 1, 4),
        "frontend_cpu_s_per_query": round(fe_cpu1, 4),
        "inproc_s_per_query": round(per_query, 4),
        "fault_runs": args.fault_runs,
        "fault_wrong_or_lost": bad,
        "fault_reruns": reruns,
        "projection": {str(n): round(proj[n]["images_s"]) for n in NODES},
        "latency": latency,
        "two_party": two_party,
    }))


if __name__ == "__main__":
    main()
