"""Latency-mode benchmark: one encrypted image answered as fast as possible.

    .venv/bin/python bench/latency.py [--quick] [--threads N]

For CryptoNets (x²), LoLa-Small (conv → x² → dense) and CryptoNets-ReLU (client-aided ReLU),
at 128-bit security: the program the packing search picks (``heinfer.compile(...,
mode="latency")`` with costs micro-benchmarked on this machine) classifies held-out digits
one query each through a real client and server (``heinfer.infer``: every message serialized
and validated). Printed per model: median latency per image (end to end: the client's
encryption, the server, every client-aided round and the decryption; keys are generated and
uploaded once per session and reported apart), the server's share, the cost model's
prediction (from the table the compiler measured and cached, and re-priced with one measured
around the queries), bytes each way, accuracy, argmax agreement with onnxruntime and the largest
relative logit error.

In the same run, the search's plan is compared with every fixed strategy applied to every
layer (``strategy="bsgs" | "hybrid" | "input_rotations" | "output_rotations"``: same
parameters, same client and server code, and every layout the search may use — LoLa's
expanded input and stacked copies — chosen by cost for each strategy): the ratio of the best
fixed strategy's latency to the search's is printed (the issue that asked for it wanted ≥ 2;
no open issue sets a target on it now). **Several items per query** (``items=2, 4``: one item
per lane of the slots, :mod:`heinfer.compiler.latency.lanes`): one query of ``m`` items against
one of a single item, in interleaved rounds, each with its own session — seconds per query
(client included), images/s and their ratio. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import heinfer
from heinfer.compiler.cost import KINDS, segment_seconds
from heinfer.explanation import program_key_bytes
from heinfer.runtime.costs import measure_costs
from heinfer.protocol.messages import peek_kind

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import build_profile, cpu_model, others_load

MODELS = ("cryptonets", "lola_small", "cryptonets_relu")
STRATEGIES = ("bsgs", "hybrid", "input_rotations", "output_rotations")
TARGET_S = {"cryptonets": 0.05}
#: Peers' figures, **quoted** (not measured by this script): the paper's, and runs made by hand
#: on an Intel Xeon on 2026-11-22. Printed as quoted so that no ratio is read off them.
REFERENCES = {
    "LoLa-Conv (paper, 8 cores)": 2.2,
    "Orion / Lattigo, logN=13 (quoted: Xeon, 2026-11-22)": 0.40,
    "Orion / Lattigo, logN=14 (quoted: Xeon, 2026-11-22)": 0.73,
    "TenSEAL one-conv MNIST net (quoted: Xeon, 2026-11-22)": 3.0,
}


def reference(name: str, x: np.ndarray) -> np.ndarray:
    """onnxruntime's float32 outputs."""
    import onnxruntime as ort

    sess = ort.InferenceSession(os.path.join(ROOT, "models", f"{name}.onnx"), providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x.astype(np.float32)})[0]


def query(client, server, session: str, x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """One query through the protocol messages: ``(outputs, bytes up, bytes down)``."""
    msg = client.query_message(session, x)
    up, reply = len(msg), server.begin(msg)
    down = len(reply)
    while peek_kind(reply) == "step":
        back = client.reply_message(reply)
        up += len(back)
        reply = server.resume(back)
        down += len(reply)
    return client.decode_result(reply), up, down


def measure(prog, x: np.ndarray) -> dict:
    """Per-image latencies of ``prog`` on the items of ``x`` (one query each, one session)."""
    client, server = heinfer.Client(prog), heinfer.Server(prog)
    t = time.perf_counter()
    keys = client.keys_message()
    session = server.open_session(keys)
    keys_s = time.perf_counter() - t
    query(client, server, session, x[:1])  # warm-up (allocator, caches)
    lat, srv, outs, up, down = [], [], [], 0, 0
    for i in range(len(x)):
        s0 = server.seconds
        t = time.perf_counter()
        y, u, d = query(client, server, session, x[i : i + 1])
        lat.append(time.perf_counter() - t)
        srv.append(server.seconds - s0)
        outs.append(y[0])
        up, down = up + u, down + d
    server.close_session(session)
    return {
        "latency_s": float(np.median(lat)),
        "latency_min_s": float(np.min(lat)),
        "server_s": float(np.median(srv)),
        "outputs": np.array(outs),
        "bytes_up": up / len(x),
        "bytes_down": down / len(x),
        "keys_bytes": len(keys),
        "keys_s": keys_s,
        "setup_s": getattr(server, "setup_seconds", 0.0),
    }


def same_time_prediction(prog, before: dict, after: dict) -> float:
    """The compiled plan's server seconds re-priced (``segment_seconds``) with the cost table
    measured just before and just after the queries, averaged kind by kind — as
    ``bench/kernels.py`` prices its kernels — so that the model's error is not the machine's
    drift since the table the compiler cached was measured (±30 % on this VM)."""
    table = dict(after)
    for k in KINDS:
        if k in before and k in after:
            table[k] = [(u + v) / 2 for u, v in zip(before[k], after[k])]
    return float(sum(segment_seconds(prog, seg, table) for seg in prog.segments))


#: Items per query (lanes) compared with one item per query (``heinfer.compile(..., items=m)``).
LANES = (2, 4)


def lanes(path: str, prog, x_all: np.ndarray, ref_of, rounds: int) -> dict:
    """Several items per query against one (``prog``): each program with its own client,
    server and session, one query of ``m`` items each in interleaved rounds (order rotated);
    per ``m`` the median seconds per query, images/s and their ratio to one item per query,
    and the argmax agreement with onnxruntime over every item answered."""
    progs = {1: prog, **{m: heinfer.compile(path, mode="latency", calibration=x_all[:64], items=m) for m in LANES}}
    parties = {}
    for m, p in progs.items():
        client, server = heinfer.Client(p), heinfer.Server(p)
        session = server.open_session(client.keys_message())
        query(client, server, session, x_all[:m])  # warm-up
        parties[m] = (client, server, session)
    times: dict[int, list[float]] = {m: [] for m in progs}
    agree: dict[int, list[bool]] = {m: [] for m in progs}
    order = list(progs)
    for r in range(rounds):
        for m in order[r % len(order) :] + order[: r % len(order)]:
            xs = x_all[r * m : (r + 1) * m]
            t = time.perf_counter()
            y, _, _ = query(*parties[m], xs)
            times[m].append(time.perf_counter() - t)
            agree[m] += list(y.argmax(1) == ref_of(xs).argmax(1))
    base = 1 / float(np.median(times[1]))
    out = {}
    for m, p in progs.items():
        q = float(np.median(times[m]))
        out[m] = {"log_n": p.params["log_n"], "query_s": q, "images_per_s": m / q, "vs_one_item": m / q / base, "agreement": float(np.mean(agree[m]))}
    return out


def run_model(name: str, data: dict, n_images: int, n_baseline: int) -> dict:
    x_all, y_all = data["x"], data["y"]
    path = os.path.join(ROOT, "models", f"{name}.onnx")
    t = time.perf_counter()
    prog = heinfer.compile(path, mode="latency", calibration=x_all[:64])
    compile_s = time.perf_counter() - t
    x, y = x_all[:n_images], y_all[:n_images]
    before = measure_costs(prog.params, use_cache=False)
    m = measure(prog, x)
    after = measure_costs(prog.params, use_cache=False)
    now = same_time_prediction(prog, before, after)
    ref = reference(name, x)
    rel = np.abs(m["outputs"] - ref).max(axis=1) / np.abs(ref).max(axis=1)
    kb = program_key_bytes(prog)
    out = {
        "params": {k: prog.params[k] for k in ("log_n", "log_q", "log_p", "log_scale", "security")},
        "images": n_images,
        "latency_s": m["latency_s"],
        "latency_min_s": m["latency_min_s"],
        "server_s": m["server_s"],
        "predicted_server_s": prog.predicted_s,
        "prediction_error": abs(prog.predicted_s - m["server_s"]) / m["server_s"],
        "predicted_server_same_time_s": now,
        "prediction_error_same_time": abs(now - m["server_s"]) / m["server_s"],
        "bytes_up": m["bytes_up"],
        "bytes_down": m["bytes_down"],
        "keys_bytes": m["keys_bytes"],
        "keygen_and_upload_s": m["keys_s"],
        "server_setup_s": m["setup_s"],
        "rotation_keys": kb["count"],
        "rotation_key_memory_bytes": kb["rotation_memory"],
        "rounds": len(prog.steps),
        "compile_s": compile_s,
        "accuracy": float((m["outputs"].argmax(1) == y).mean()),
        "agreement": float((m["outputs"].argmax(1) == ref.argmax(1)).mean()),
        "rel_logit_error": float(rel.max()),
        "plan": [
            {k: plan.get(k) for k in ("layer", "method", "giant_modulus", "copies", "taps_per_ct", "rotations", "plaintexts", "predicted_s") if k in plan}
            for _, plan in sorted(prog.plans.items(), key=lambda kv: tuple(int(i) for i in kv[0].split(".")))
        ],
    }
    out["lanes"] = lanes(path, prog, x_all, lambda xs: reference(name, xs), 4 if n_images <= 10 else 12)
    fixed = {}
    for strategy in STRATEGIES:
        p2 = heinfer.compile(path, mode="latency", calibration=x_all[:64], strategy=strategy)
        try:
            m2 = measure(p2, x[:n_baseline])
        except heinfer.HeinferError as e:  # e.g. thousands of rotation keys over the message limit
            fixed[strategy] = {"infeasible": str(e), "rotation_keys": len(p2.rotation_steps), "predicted_server_s": p2.predicted_s}
            continue
        fixed[strategy] = {"latency_s": m2["latency_s"], "server_s": m2["server_s"], "predicted_server_s": p2.predicted_s, "rotation_keys": len(p2.rotation_steps)}
    best = min((s for s in fixed if "latency_s" in fixed[s]), key=lambda s: fixed[s]["latency_s"])
    out["fixed_strategies"] = fixed
    out["best_fixed_strategy"] = best
    out["search_speedup_vs_best_fixed"] = fixed[best]["latency_s"] / out["latency_s"]
    if name in TARGET_S:
        out["target_latency_s"] = TARGET_S[name]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer images (< 5 minutes)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    heinfer.set_num_threads(args.threads)
    raw = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
    data = {"x": raw["x"], "y": raw["y"]}
    n_images, n_baseline = (10, 2) if args.quick else (60, 4)
    print(f"# heinfer latency benchmark — CPU: {cpu_model()}, threads: {args.threads}, build: {build_profile()}")
    results = {}
    for name in MODELS:
        r = run_model(name, data, n_images, n_baseline)
        results[name] = r
        p = r["params"]
        print(f"\n## {name}: logN={p['log_n']} log_q={p['log_q']} log_p={p['log_p']} ({p['security']}-bit), {r['rounds']} client rounds")
        tgt = f" (target {r['target_latency_s']:.3f} s)" if "target_latency_s" in r else ""
        print(
            f"  latency per image: {r['latency_s'] * 1e3:.1f} ms median, {r['latency_min_s'] * 1e3:.1f} ms best{tgt}; "
            f"server {r['server_s'] * 1e3:.1f} ms (predicted {r['predicted_server_s'] * 1e3:.1f} ms, off by {r['prediction_error'] * 100:.0f}%; "
            f"with the table measured around the queries {r['predicted_server_same_time_s'] * 1e3:.1f} ms, off by {r['prediction_error_same_time'] * 100:.0f}%)"
        )
        print(
            f"  bytes per image: {r['bytes_up'] / 1e6:.2f} MB up, {r['bytes_down'] / 1e6:.2f} MB down; "
            f"keys once per session: {r['keys_bytes'] / 1e6:.1f} MB ({r['rotation_keys']} rotations) in {r['keygen_and_upload_s']:.2f} s"
        )
        print(
            f"  accuracy {r['accuracy']:.3f} on {r['images']} digits; agreement with onnxruntime {r['agreement']:.3f}; "
            f"max relative logit error {r['rel_logit_error']:.1e}"
        )
        for row in r["plan"]:
            print("    " + ", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        for s, f in r["fixed_strategies"].items():
            if "infeasible" in f:
                print(f"  fixed strategy {s:<17} infeasible: {f['infeasible'][:90]} ({f['rotation_keys']} rotation keys)")
            else:
                print(f"  fixed strategy {s:<17} {f['latency_s'] * 1e3:9.1f} ms ({f['rotation_keys']} rotation keys)")
        print(f"  search vs best fixed strategy ({r['best_fixed_strategy']}): ×{r['search_speedup_vs_best_fixed']:.1f}")
        for m, row in r["lanes"].items():
            print(
                f"  {m} item(s) per query (logN={row['log_n']}): {row['query_s'] * 1e3:.1f} ms per query, "
                f"{row['images_per_s']:.0f} images/s (×{row['vs_one_item']:.2f} one item per query), agreement {row['agreement']:.3f}"
            )
    print("\n## reference points (seconds per image; quoted, not measured in this run)")
    for k, v in REFERENCES.items():
        print(f"  {k}: {v}")
    others = others_load()
    print(f"# other work on this machine during the run: {others}")
    print(json.dumps({"cpu": cpu_model(), "threads": args.threads, "build": build_profile(), "others_load": others, "references_s": REFERENCES, **results}))


if __name__ == "__main__":
    main()
