"""Real networks (issue: residual graphs, CIFAR-10, MobileNetV2): what runs, how fast, and what
does not fit yet.

Each network runs in its own process, watched: killed when its resident memory passes
``--max-rss-gb`` (default 16 GB of this 24 GB machine) or when it exceeds ``--timeout``; a
refusal by heinfer (a ``HeinferError``, e.g. the executor's memory budget or the message size
limit) is reported with its message. Timers, per network:

* ``setup_s``: the client's keys, the server's session (key upload, plaintext encoding), the
  sum of ``server_setup_s`` (the plaintexts, encoded once per program and shared by every
  session) and ``session_setup_s`` (a new session: key generation, upload and validation);
* ``server_setup_warm_s``: the server's plaintext encoding once more, in the same process
  after the first server is dropped (with the first one's plan: the plaintexts it kept):
  memory the guest has just freed. On the shared virtual
  machine this was written on, the first write to memory the host has reclaimed runs at
  0.3–1.1 GB/s, and memory freed a moment ago is often (not always) much faster
  (``bench/memory.py``), so ``server_setup_s`` measures the VM's cold memory as much as the
  encoder;
* ``latency_s``: one query end to end (client encryption + server + client steps + decryption),
  the median over the inputs, after set-up;
* throughput mode: ``seconds``, one query of ``images`` items end to end (median);
  ``core_s_per_image`` = its seconds × threads ÷ items; ``core_s_per_image_full_batch`` and
  ``mb_per_image_full_batch`` divide by ``batch_capacity`` instead — every ciphertext
  carries that many items whatever their number, so a full batch costs the same ciphertext
  work and bytes (a full run sends a full batch; ``--quick`` 64 items);
* ``agreement`` / ``rel_logit_error``: against onnxruntime on the same random inputs;
* ``--scaling PAIRS`` (latency mode): ``PAIRS`` more queries at one engine thread and at every
  thread, alternated in the same process after the timed ones — ``latency_1t_s``,
  ``latency_2t_s`` (medians, client included) and ``scaling``, their ratio: the engine's thread
  scaling with both sides of the ratio under the same machine state (two runs with
  ``--threads 1`` and without compare processes minutes apart on a machine whose speed moves
  by ±30 % between minutes).

Networks: LoLa's CIFAR network (latency, non-interactive), MiniONN's CIFAR net and ResNet-20
(latency, client-aided), MobileNetV2-0.35 at 96 and 224 px (throughput and latency) and at
128, 160 and 192 px (latency), all with
deterministic random weights (``models/cifar.py``, ``models/mobilenet.py``; no CIFAR or
ImageNet data offline). Deep features (LoLa §5): the bundled extractor on the client, the private
classifier on encrypted features, over every held-out digit 5–9 (``--only deep_features``).

    .venv/bin/python bench/networks.py [--quick]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import ROOT, build_profile, cpu_model, others_load  # noqa: E402

#: Compile options of a run (default: none). MobileNetV2's throughput plan re-encrypts at every
#: one of its 35 client steps; with the default input and weight bits (24 and 16) its relative
#: logit error was 1.0e-2 (64 items, 2026-11-27). Its items sit in coefficients (σ = 3.2 of
#: fresh noise each, not ×√N), so the weights' rounding, not the inputs', sets the error: a
#: float64 simulation of the plan (every weight rounded at its layer's scale, every input at its
#: segment's scale plus fresh noise; 4,096 images) gives 3.5e-4 at 34/18 and 7.2e-5 at 31/21 —
#: the same limbs everywhere (bytes and work unchanged): three input bits moved to the weights
#: (what heinfer.tune_precision returns from 34/18).
#: At 224 px 31/21 would keep more values at two primes (+9 % limb-ciphertexts); 30/21 keeps
#: the limbs of 32/18 (that run is refused before it starts: it needs input tiles).
OPTIONS: dict[tuple[str, str], dict] = {
    ("mobilenetv2_035_96", "throughput"): {"input_bits": 31, "weight_bits": 21},
    ("mobilenetv2_035_224", "throughput"): {"input_bits": 30, "weight_bits": 21},
}

RUNS = [
    ("lola_cifar", "latency"),
    ("minionn_cifar", "latency"),
    ("resnet20", "latency"),
    ("mobilenetv2_035_96", "latency"),
    ("mobilenetv2_035_96", "throughput"),
    ("mobilenetv2_035_128", "latency"),
    ("mobilenetv2_035_160", "latency"),
    ("mobilenetv2_035_192", "latency"),
    ("mobilenetv2_035_224", "latency"),
    ("mobilenetv2_035_224", "throughput"),
]


def _model(name: str):
    """``(onnx bytes, random inputs(n, seed))`` of a generated network."""
    sys.path.insert(0, os.path.join(ROOT, "models"))
    if name.startswith("mobilenetv2"):
        import mobilenet

        _, width, size = name.split("_")
        size = int(size)
        return mobilenet.build(int(width) / 100, size), lambda n, seed: mobilenet.random_inputs(n, size, seed)
    import cifar

    return cifar.build(name), cifar.random_inputs


def one(name: str, mode: str, n: int, scaling: int = 0) -> dict:
    """Runs one network in this process; returns its figures. ``scaling`` (latency mode, a
    process with several engine threads): that many more queries at one thread and at all,
    alternated, after the timed ones (:func:`paired_scaling`)."""
    import numpy as np
    import onnxruntime as ort

    import heinfer
    from heinfer.inference import MESSAGE_CHUNK_BYTES, run_query

    model, inputs = _model(name)
    cal = inputs(32, 11)
    t = time.perf_counter()
    options = OPTIONS.get((name, mode), {})
    prog = heinfer.compile(model, mode=mode, calibration=cal, **options)
    out: dict = {"mode": mode, "threads": heinfer.get_num_threads(), "compile_s": round(time.perf_counter() - t, 2), "log_n": prog.params["log_n"], "primes": len(prog.params["log_q"]), "options": options}
    if n <= 0:  # a full batch
        n = prog.batch_capacity
    x = inputs(n, 3)
    # the reference in slices: onnxruntime's arena keeps its largest allocation, and a whole
    # batch of MobileNetV2 activations (~3 GB at 4,096 images) would count in heinfer's peak
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = np.concatenate([ref.run(None, {"input": x[i : i + 64]})[0] for i in range(0, n, 64)])
    del ref
    client, server = heinfer.Client(prog.public()), None
    t = time.perf_counter()
    server = heinfer.Server(prog)
    t1 = time.perf_counter()
    session = server.open_session(client.keys_message())
    t2 = time.perf_counter()
    out["setup_s"] = round(t2 - t, 2)
    out["server_setup_s"], out["session_setup_s"] = round(t1 - t, 2), round(t2 - t1, 2)
    got, times, up, down = [], [], 0, 0
    items = [x[i : i + 1] for i in range(n)] if mode == "latency" else [x]
    for item in items:
        t = time.perf_counter()
        q = run_query(client, server, session, item, MESSAGE_CHUNK_BYTES)
        times.append(time.perf_counter() - t)
        got.append(q.outputs)
        up, down = up + q.bytes_up, down + q.bytes_down
    got = np.concatenate(got)
    if mode == "latency" and scaling and heinfer.get_num_threads() > 1:
        out.update(paired_scaling(client, server, session, items, scaling))
    if mode == "latency":  # the encoding again, into memory the first server frees
        # the same plan as the first server (its budget kept these plaintexts): the default
        # budget, a share of the memory available now, may not see the first one's memory back
        kept = server.executor.kept_plaintext_bytes
        del server, session
        gc.collect()
        t = time.perf_counter()
        heinfer.Server(prog, max_memory=kept)
        out["server_setup_warm_s"] = round(time.perf_counter() - t, 2)
    key = "latency_s" if mode == "latency" else "seconds"
    out[key] = round(float(np.median(times)), 3)
    if mode == "throughput":
        out["core_s_per_image"] = round(sum(times) * heinfer.get_num_threads() / n, 4)
        # every ciphertext carries batch_capacity items whatever their count: a full batch
        # costs the same ciphertext work and bytes (labelled as such when n is smaller)
        full = len(times) * prog.batch_capacity
        out["batch_capacity"] = prog.batch_capacity
        out["core_s_per_image_full_batch"] = round(sum(times) * heinfer.get_num_threads() / full, 4)
        out["mb_per_image_full_batch"] = round((up + down) / 1e6 / full, 2)
    out["images"] = n
    out["agreement"] = float((got.argmax(1) == want.argmax(1)).mean())
    out["rel_logit_error"] = float(np.abs(got - want).max() / np.abs(want).max())
    out["mb_per_image"] = round((up + down) / 1e6 / n, 2)
    return out


def paired_scaling(client, server, session: str, items: list, rounds: int) -> dict:
    """The engine's thread scaling like for like: ``rounds`` pairs of one query at one thread
    and one at every thread, alternated (the first pair's order swapped each round) on the
    same inputs in this process, so both see the same machine state. ``scaling`` = median
    one-thread latency ÷ median all-thread latency (client included in both)."""
    import heinfer
    from heinfer.inference import MESSAGE_CHUNK_BYTES, run_query

    threads = heinfer.get_num_threads()
    times: dict[int, list[float]] = {1: [], threads: []}
    try:
        for r in range(rounds):
            for t in ((1, threads) if r % 2 == 0 else (threads, 1)):
                heinfer.set_num_threads(t)
                start = time.perf_counter()
                run_query(client, server, session, items[r % len(items)], MESSAGE_CHUNK_BYTES)
                times[t].append(time.perf_counter() - start)
    finally:
        heinfer.set_num_threads(threads)
    one_t, all_t = statistics.median(times[1]), statistics.median(times[threads])
    return {"latency_1t_s": round(one_t, 3), f"latency_{threads}t_s": round(all_t, 3), "scaling": round(one_t / all_t, 2), "scaling_pairs": rounds}


def deep_features() -> dict:
    """LoLa §5 on the digits: the bundled public extractor (trained on 0–4) on the client, the
    private classifier (trained on the features of 5–9) on encrypted features, latency mode,
    one image per query over every held-out digit 5–9. ``latency_s`` (median) covers feature
    extraction, encryption, the server and decryption."""
    import numpy as np
    import onnxruntime as ort

    import heinfer
    from heinfer.features import FeatureExtractor

    models = os.path.join(ROOT, "models")
    d = np.load(os.path.join(models, "digits_test.npz"))
    hi = d["y"] >= 5
    x, y = d["x"][hi], d["y"][hi] - 5
    ext_path, clf_path = os.path.join(models, "features_extractor.onnx"), os.path.join(models, "features_classifier.onnx")
    ext = FeatureExtractor(ext_path)
    prog = heinfer.compile(clf_path, mode="latency", features=ext_path, calibration=x[:64])
    want = ort.InferenceSession(clf_path).run(None, {"input": ext(x).astype(np.float32)})[0]
    client = heinfer.Client(prog.public())
    t = time.perf_counter()
    server = heinfer.Server(prog)
    session = server.open_session(client.keys_message())
    setup = time.perf_counter() - t
    got, times, nbytes = [], [], 0
    for i in range(len(x)):
        t = time.perf_counter()
        q = client.query_message(session, ext(x[i : i + 1]))
        reply = server.begin(q)
        got.append(client.decode_result(reply))
        times.append(time.perf_counter() - t)
        nbytes += len(q) + len(reply)
    got = np.concatenate(got)
    return {
        "latency_s": round(float(np.median(times)), 4), "images": len(x), "setup_s": round(setup, 3),
        "agreement": float((got.argmax(1) == want.argmax(1)).mean()), "accuracy": float((got.argmax(1) == y).mean()),
        "plaintext_accuracy": float((want.argmax(1) == y).mean()), "rel_logit_error": float(np.abs(got - want).max() / np.abs(want).max()),
        "mb_per_image": round(nbytes / 1e6 / len(x), 3), "log_n": prog.params["log_n"],
    }


def watched(args: list[str], max_rss_kb: int, timeout: float, threads: int | None = None) -> dict:
    """Runs ``python bench/networks.py --one …`` and kills it above ``max_rss_kb``;
    ``threads``: the engine's pool size in that process (``RAYON_NUM_THREADS``)."""
    env = dict(os.environ, **({"RAYON_NUM_THREADS": str(threads)} if threads else {}))
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak, t0, why = 0, time.perf_counter(), None
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                rss = next((int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")), 0)
        except OSError:
            rss = 0
        peak = max(peak, rss)
        if rss > max_rss_kb or time.perf_counter() - t0 > timeout:
            why = f"stopped: resident memory {rss / 1e6:.1f} GB" if rss > max_rss_kb else f"stopped after {timeout:.0f} s"
            p.kill()
            break
        time.sleep(0.5)
    out, err = p.communicate()
    res: dict = {"peak_rss_gb": round(peak / 1e6, 2)}
    if why:
        res["not_run"] = why
    elif p.returncode != 0:
        last = [ln for ln in err.strip().splitlines() if ln.strip()]
        res["not_run"] = last[-1][:400] if last else f"exit status {p.returncode}"
    else:
        res.update(json.loads(out.strip().splitlines()[-1]))
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 inputs per latency run instead of 20, 64 items per throughput run instead of a full batch")
    ap.add_argument("--max-rss-gb", type=float, default=16.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--only", help="comma-separated NAME/MODE runs (default: all)")
    ap.add_argument("--threads", type=int, help="the engine's threads in each run (default: every core); 1 against the default measures the scaling")
    ap.add_argument("--scaling", type=int, default=0, metavar="PAIRS", help="latency runs: PAIRS more queries at one engine thread and at every thread, alternated in the same process (thread scaling like for like)")
    ap.add_argument("--one", nargs=4, metavar=("NAME", "MODE", "N", "PAIRS"), help=argparse.SUPPRESS)
    ap.add_argument("--deep-features", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        name, mode, n, pairs = args.one
        print(json.dumps(one(name, mode, int(n), int(pairs))))
        return
    if args.deep_features:
        print(json.dumps(deep_features()))
        return
    print(f"# heinfer networks — CPU: {cpu_model()}, build: {build_profile()}")
    result: dict = {}
    runs = [r for r in RUNS if not args.only or f"{r[0]}/{r[1]}" in args.only.split(",")]
    for name, mode in runs:
        n = (2 if args.quick else 20) if mode == "latency" else (64 if args.quick else 0)  # 0: a full batch
        r = watched(["--one", name, mode, str(n), str(args.scaling)], int(args.max_rss_gb * 1e6), args.timeout, args.threads)
        result[f"{name}/{mode}"] = r
        print(f"{name:22s} {mode:10s} " + ", ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    if not args.only or "deep_features" in args.only.split(","):
        r = result["deep_features"] = watched(["--deep-features"], int(args.max_rss_gb * 1e6), args.timeout, args.threads)
        print("deep_features           latency    " + ", ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    result["cpu"] = cpu_model()
    result["others_load"] = others_load()
    print(f"# other work on this machine during the run: {result['others_load']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
