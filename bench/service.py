"""Service benchmark: CryptoNets-ReLU (throughput mode) through gRPC on loopback vs in-process.

    .venv/bin/python bench/service.py [--quick] [--threads 1] [--duration 60] [--clients 8]
    make bench-service                      # the same, full run

The server is a separate process started with the command line (``python -m heinfer.cli
serve`` on the server's program, as a user would); the client is this process, holding only
the public program. In the same run:

* **network overhead**: a full batch (the program's capacity) of held-out digits, end to end
  (encryption, client-aided rounds, decryption) through gRPC (an open session, wall clock of
  ``session.infer``) vs through ``heinfer.infer`` in-process (a real Client and Server
  exchanging the same serialized messages; its ``queries_s``), in rounds of one run each,
  alternating which goes first (ABBA). ``network_overhead`` = the median over rounds of
  gRPC time / in-process time, − 1 (issue target ≤ 0.10): pairs run back to back, so the
  shared machine's drifting background load cancels. The same for a one-image query (the
  fixed cost of a call; with coefficient packing it encrypts full ciphertexts too);
* **bytes on the wire** per batch and per image, each way;
* **server memory per session**: VmRSS of the server process before and after opening K
  sessions, for CryptoNets-ReLU (no evaluation key) and CryptoNets (x², on a second server:
  no evaluation key either since its second square is an open tail — the program's key
  manifest is printed beside it);
* **load**: C client processes (8 by default), each with its own session and keys, send
  queries of ``--load-items`` digits (default: a full batch) back to back for ``--duration``
  seconds; completed queries, errors (must be 0), p50/p99 latency, the server's peak VmRSS,
  and a final check that a good query is still answered correctly.

Both parties use ``--threads`` engine threads (BLAS threads off). The last line is one JSON
object ``{"network_overhead": …, "load_errors": …, …}``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import heinfer
from heinfer.cli.process import ServerProcess, rss_bytes
from machine import build_profile, cpu_model

TARGET_OVERHEAD = 0.10


def compile_model(name: str, calib: np.ndarray, directory: str) -> tuple[heinfer.Program, str]:
    """Compiles ``models/NAME.onnx`` (throughput mode) and writes the server's program to
    ``directory/NAME.hep`` and the public one to ``NAME.public.hep``; the program and the
    server's path."""
    prog = heinfer.compile(
        os.path.join(ROOT, "models", f"{name}.onnx"), mode="throughput", calibration=calib
    )
    path = os.path.join(directory, f"{name}.hep")
    with open(path, "wb") as f:
        f.write(prog.to_bytes())
    with open(public_path(path), "wb") as f:
        f.write(prog.public().to_bytes())
    return prog, path


def public_path(path: str) -> str:
    """The public program next to the server's ``NAME.hep``."""
    return path[: -len(".hep")] + ".public.hep"


def compare(prog, address: str, x: np.ndarray, rounds: int) -> dict:
    """Rounds of the same query in-process and through gRPC, in ABBA order (the machine's
    background load drifts; each round's pair runs back to back)."""
    from heinfer.serve import connect

    client, server = heinfer.Client(prog.public()), heinfer.Server(prog)
    inproc, grpc_t, reports = [], [], []

    def run_inprocess() -> heinfer.InferenceResult:
        """One in-process run; its time is the report's ``queries_s``."""
        r = heinfer.infer(prog, x, client=client, server=server)
        inproc.append(r.report["queries_s"])
        return r

    with connect(address, prog.public()) as session:

        def run_grpc() -> heinfer.InferenceResult:
            """One run on the open session; its time is the wall clock of ``infer``."""
            t0 = time.perf_counter()
            r = session.infer(x)
            grpc_t.append(time.perf_counter() - t0)
            return r

        session.infer(x[:8])  # warm-up: pools, channel, allocator
        heinfer.infer(prog, x[:8], client=client, server=server)
        for k in range(rounds):
            if k % 2 == 0:
                reports.append((run_inprocess(), run_grpc()))
            else:
                r_net = run_grpc()
                reports.append((run_inprocess(), r_net))
    r_in, r_net = reports[-1]
    agree = float(np.mean(r_in.outputs.argmax(1) == r_net.outputs.argmax(1)))
    med_in, med_net = statistics.median(inproc), statistics.median(grpc_t)
    pairs = [g / i for g, i in zip(grpc_t, inproc)]
    return {
        "items": len(x),
        "rounds": rounds,
        "inprocess_s": inproc,
        "grpc_s": grpc_t,
        "inprocess_median_s": med_in,
        "grpc_median_s": med_net,
        "overhead": statistics.median(pairs) - 1.0,
        "overhead_of_medians": med_net / med_in - 1.0,
        "overhead_best": min(grpc_t) / min(inproc) - 1.0,
        "inprocess_images_per_s": len(x) / med_in,
        "grpc_images_per_s": len(x) / med_net,
        "grpc_server_s": r_net.report.get("server_s"),
        "grpc_client_s": r_net.report.get("client_s"),
        "inprocess_server_s": r_in.report["server_s"],
        "inprocess_client_s": r_in.report["client_s"],
        "argmax_agreement_grpc_vs_inprocess": agree,
        "bytes_up": r_net.report.get("bytes_up"),
        "bytes_down": r_net.report.get("bytes_down"),
        "wire_bytes_up": r_net.report.get("wire_bytes_up"),
        "wire_bytes_down": r_net.report.get("wire_bytes_down"),
        "inprocess_bytes_up": r_in.report["bytes_up"],
        "inprocess_bytes_down": r_in.report["bytes_down"],
        "client_aided_rounds": r_net.report.get("rounds"),
        "outputs": r_net.outputs,
    }


def memory_per_session(prog, address: str, pid: int, sessions: int) -> dict:
    """Server VmRSS before and after opening ``sessions`` sessions (keys uploaded)."""
    from heinfer.serve import connect

    before = rss_bytes(pid)
    opened = []
    try:
        for _ in range(sessions):
            opened.append(connect(address, prog.public()))
        time.sleep(0.2)
        after = rss_bytes(pid)
    finally:
        for s in opened:
            s.close()
    time.sleep(0.2)
    return {
        "sessions": sessions,
        "rss_before": before,
        "rss_after": after,
        "rss_after_close": rss_bytes(pid),
        "per_session": (after - before) / sessions,
    }


def load_client(
    program_path: str, address: str, items: int, duration: float, start, results
) -> None:
    """One load-test client process (given the public program only): own keys and session,
    queries back to back."""
    heinfer.set_num_threads(1)
    from heinfer.serve import connect

    with open(program_path, "rb") as f:
        prog = heinfer.load_program(f.read())
    assert not isinstance(prog, heinfer.Program), "a client gets the public program only"
    data = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
    x = np.concatenate([data["x"]] * -(-items // len(data["x"])))[:items]
    latencies, errors = [], []
    try:
        session = connect(address, prog)
    except Exception as e:  # noqa: BLE001 - counted and reported, the run goes on
        start.wait()
        results.put(([], [f"connect: {type(e).__name__}: {e}"]))
        return
    with session:
        start.wait()
        deadline = time.perf_counter() + duration
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            try:
                session.infer(x)
                latencies.append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{type(e).__name__}: {e}"[:300])
    results.put((latencies, errors))


def load_run(path: str, address: str, pid: int, clients: int, items: int, duration: float) -> dict:
    """``clients`` processes querying for ``duration`` s; latency percentiles, errors, RSS."""
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(clients + 1), ctx.Queue()
    procs = [
        ctx.Process(
            target=load_client, args=(public_path(path), address, items, duration, start, results)
        )
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    start.wait(timeout=300)
    t0 = time.perf_counter()
    rss_peak = rss_bytes(pid)
    gathered = []
    while len(gathered) < clients:
        try:
            gathered.append(results.get(timeout=0.5))
        except Exception:  # noqa: BLE001 - queue.Empty: sample memory and wait on
            rss_peak = max(rss_peak, rss_bytes(pid))
            if time.perf_counter() - t0 > duration + 600:
                break
    wall = time.perf_counter() - t0
    for p in procs:
        p.join(timeout=30)
    lat = sorted(v for g in gathered for v in g[0])
    errors = [e for g in gathered for e in g[1]] + ["lost client"] * (clients - len(gathered))
    pct = lambda q: float(np.percentile(lat, q)) if lat else None
    return {
        "clients": clients,
        "items_per_query": items,
        "duration_s": duration,
        "wall_s": wall,
        "completed_queries": len(lat),
        "errors": len(errors),
        "error_samples": errors[:5],
        "queries_per_s": len(lat) / wall,
        "images_per_s": len(lat) * items / wall,
        "p50_latency_s": pct(50),
        "p99_latency_s": pct(99),
        "max_latency_s": lat[-1] if lat else None,
        "server_rss_peak": rss_peak,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The benchmark's options."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="11 comparison rounds instead of 21")
    ap.add_argument("--threads", type=int, default=1, help="engine threads of each party")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of the load run")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients of the load run")
    ap.add_argument("--load-items", type=int, help="digits per load query (default: a full batch)")
    ap.add_argument("--sessions", type=int, default=16, help="sessions for the memory figure")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Runs every measurement and prints the report; the last line is JSON."""
    args = parse_args(argv)
    heinfer.set_num_threads(args.threads)
    data = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
    x_all, y_all = data["x"], data["y"]
    meta = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "build": build_profile(),
        "threads": args.threads,
        "python": platform.python_version(),
        "heinfer": heinfer.__version__,
        "grpcio": _grpc_version(),
        "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    limits = [
        "--json",
        "--threads",
        str(args.threads),
        "--max-sessions",
        str(args.sessions + args.clients + 4),
        "--max-concurrent-queries",
        str(max(args.clients, 8)),
        "--max-sessions-per-peer",  # every client of this run is 127.0.0.1
        str(args.sessions + args.clients + 4),
        "--max-queries-per-peer",
        str(max(args.clients, 8)),
    ]
    out: dict = {"meta": meta}
    with tempfile.TemporaryDirectory(prefix="heinfer-bench-") as tmp:
        prog, path = compile_model("cryptonets_relu", x_all[:64], tmp)
        sq_prog, sq_path = compile_model("cryptonets", x_all[:64], tmp)
        cap = prog.batch_capacity
        x = np.concatenate([x_all] * -(-cap // len(x_all)))[:cap]
        y = np.concatenate([y_all] * -(-cap // len(y_all)))[:cap]
        out["params"] = {**prog.params, "packing": prog.packing, "batch_capacity": cap}
        with ServerProcess(path, *limits) as server:
            out["server_rss_idle"] = rss_bytes(server.pid)
            rounds = 11 if args.quick else 21
            batch = compare(prog, server.address, x, rounds)
            out["accuracy"] = float(np.mean(batch.pop("outputs").argmax(1) == y))
            out["batch"] = batch
            single = compare(prog, server.address, x[:1], rounds)
            single.pop("outputs")
            out["single"] = single
            out["memory_relu"] = memory_per_session(prog, server.address, server.pid, args.sessions)
            out["load"] = load_run(
                path,
                server.address,
                server.pid,
                args.clients,
                args.load_items or cap,
                args.duration,
            )
            after = compare(prog, server.address, x_all, 1)
            out["after_load_accuracy"] = float(np.mean(after.pop("outputs").argmax(1) == y_all))
        out["server_exit_status"] = server.proc.returncode
        out["server_stats"] = _stopped_stats(server.output)
        with ServerProcess(sq_path, *limits) as sq_server:
            out["memory_square"] = memory_per_session(
                sq_prog, sq_server.address, sq_server.pid, args.sessions
            )
            out["memory_square"]["relin_key_bytes"] = _relin_bytes(sq_prog)
    out["network_overhead"] = out["batch"]["overhead"]
    out["load_errors"] = out["load"]["errors"]
    out["server_errors"] = out["server_stats"].get("errors")
    out["target_network_overhead"] = TARGET_OVERHEAD
    print_report(out)
    print(json.dumps(out, default=float))


def _stopped_stats(output: str) -> dict:
    """The counters of the server's ``{"event": "stopped", "stats": …}`` line (``--json``)."""
    for line in reversed(output.strip().splitlines()):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "stopped":
            return dict(event.get("stats", {}))
    return {}


def _relin_bytes(prog) -> dict:
    """Sizes of the program's relinearization key (``{"wire": 0, "memory": 0}`` when it
    needs none)."""
    from heinfer.cli.describe import switching_key_bytes
    from heinfer.runtime.executor import native_params

    if not prog.needs_relin_key:
        return {"wire": 0, "memory": 0}
    return switching_key_bytes(native_params(prog.params))


def _grpc_version() -> str:
    try:
        import grpc

        return grpc.__version__
    except ImportError:  # pragma: no cover - a dependency of heinfer
        return "missing"


def _mb(v: float) -> str:
    return f"{v / 1e6:.2f} MB"


def print_report(o: dict) -> None:
    """The human-readable report (the JSON line follows it)."""
    m, p, b, s, ld = o["meta"], o["params"], o["batch"], o["single"], o["load"]
    print(
        f"# heinfer service benchmark — CPU: {m['cpu']} ({m['cores']} cores), threads: "
        f"{m['threads']} per party, build: {m['build']}, Python {m['python']}, "
        f"grpcio {m['grpcio']}, {m['time_utc']} UTC"
    )
    print(
        f"\n## cryptonets_relu: logN={p['log_n']} log_q={p['log_q']} log_p={p['log_p']} "
        f"({p['security']}-bit), {p['packing']} packing, {p['batch_capacity']} images per query"
    )
    for name, r in (("full batch", b), ("one image", s)):
        print(
            f"  {name:>10}: in-process {r['inprocess_median_s']:.3f} s, gRPC "
            f"{r['grpc_median_s']:.3f} s (medians of {r['rounds']} ABBA rounds) → overhead "
            f"{100 * r['overhead']:+.1f}% (median of paired ratios; of medians "
            f"{100 * r['overhead_of_medians']:+.1f}%, best-of {100 * r['overhead_best']:+.1f}%)"
        )
    print(
        f"  throughput: {b['grpc_images_per_s']:.0f} images/s through gRPC vs "
        f"{b['inprocess_images_per_s']:.0f} in-process; last batch: server "
        f"{b['grpc_server_s']:.3f} s vs {b['inprocess_server_s']:.3f} s, client "
        f"{b['grpc_client_s']:.3f} s vs "
        f"{b['inprocess_client_s']:.3f} s"
    )
    print(
        f"  network overhead {100 * o['network_overhead']:+.1f}% "
        f"(target ≤ {100 * o['target_network_overhead']:.0f}%); argmax agreement gRPC vs "
        f"in-process {b['argmax_agreement_grpc_vs_inprocess']:.4f}, accuracy {o['accuracy']:.4f}"
    )
    print(
        f"  bytes per batch on the wire: {_mb(b['wire_bytes_up'])} up, "
        f"{_mb(b['wire_bytes_down'])} down "
        f"({(b['wire_bytes_up'] + b['wire_bytes_down']) / b['items'] / 1e3:.1f} kB per image; "
        f"protocol messages {_mb(b['bytes_up'])} / {_mb(b['bytes_down'])}, in-process "
        f"{_mb(b['inprocess_bytes_up'])} / {_mb(b['inprocess_bytes_down'])})"
    )
    for key, label in (
        ("memory_relu", "CryptoNets-ReLU (no key)"),
        ("memory_square", "CryptoNets x²"),
    ):
        mm = o[key]
        if "relin_key_bytes" in mm:
            wire = mm["relin_key_bytes"]["wire"]
            label += f", relinearization key {_mb(wire)}" if wire else ", no key (an open tail)"
        print(
            f"  server memory per session, {label}: {mm['per_session'] / 1e6:.2f} MB "
            f"(VmRSS {_mb(mm['rss_before'])} → {_mb(mm['rss_after'])} with {mm['sessions']} "
            f"sessions, {_mb(mm['rss_after_close'])} after closing)"
        )
    print(
        f"  load: {ld['clients']} clients × {ld['items_per_query']} images/query for "
        f"{ld['duration_s']:.0f} s: {ld['completed_queries']} queries ({ld['images_per_s']:.0f} "
        f"images/s), errors {ld['errors']}, latency p50 {ld['p50_latency_s'] or 0:.3f} s, "
        f"p99 {ld['p99_latency_s'] or 0:.3f} s; server VmRSS peak {_mb(ld['server_rss_peak'])}"
    )
    for e in ld["error_samples"]:
        print(f"    error: {e}")
    print(
        f"  after the load run: accuracy {o['after_load_accuracy']:.4f} on the 360 digits; "
        f"server exit status {o['server_exit_status']}; server counters {o['server_stats']}"
    )


if __name__ == "__main__":
    main()
