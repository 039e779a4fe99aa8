"""Two-party non-linear layers (GAZELLE §8, Table 10): ReLU and max-pool+ReLU in garbled circuits.

Runs heinfer's two-party step (``heinfer.twoparty``: half-gates garbled circuits, IKNP OT
extension on Chou–Orlandi base OTs, shares mod a 20-bit prime) with both parties in this
process over serialized messages, one thread:

* ``offline``: the client's OT-extension request, the server drawing its masks and garbling,
  the OT corrections, the client parsing the garbled circuits (no data needed);
* ``online``: the client's OT choices for its shares, the server's labels, the evaluation;
* bytes: every message both ways. The session's 128 base OTs (once per session) are reported
  apart. No network: both parties' compute is summed, nothing overlaps.

GAZELLE's figures (Table 10, total = offline + online, two machines on a LAN, 4 cores) are
quoted, not measured. The peer measured in the same run is SecretFlow SPU (Cheetah, two
processes over 127.0.0.1; ``bench/compare/spu_runner.py``, installed by ``make bench-deps``
into ``.venv-spu``), if present.

**Networks** (GAZELLE Table 11–12, quoted beside): ``heinfer.compile(..., mode="latency",
protocol="two-party")`` and ``heinfer.infer`` with both parties in this process over serialized
messages, 2 engine threads: A (SecureML's 3 FC layers with squares, ``models/mnist_a.onnx``),
B (the bundled CryptoNets, squares), C (the bundled CryptoNets-ReLU), D (the bundled MiniONN
MNIST net) and CIFAR-A (MiniONN's CIFAR-10 net, deterministic random weights, random inputs;
skipped by ``--quick``), and beyond GAZELLE's networks ResNet-20 (``models/cifar.py``, random
weights and inputs, skipped by ``--quick``: residual blocks, whose skips pass through the
steps in truncation circuits of their own); layouts priced for a 1 Gbit/s link (GAZELLE's LAN), and A, B and C
again for 10 Mbit/s (``*_10mbps``: fewer ciphertexts, more compute). Squares run as a
truncation circuit and GAZELLE's AHE square (GAZELLE's A and B have no offline phase: their
squares do not truncate). Per image: offline (OT extension, garbling) and online (BFV linear layers with
flooding, OT choices and labels, evaluation, re-encryption) seconds and bytes both ways; the
session set-up (the client's BFV public and rotation keys, base OTs) is reported apart, once
per session. Argmax agreement and the relative logit error against onnxruntime.

**Throughput mode** (``*_throughput``): ``mode="throughput"``, batch-axis shares (one BFV
ciphertext per activation, the items along its slots, one circuit per item and activation):
A, B and C with 512 items in one query (the 296 digits not used for calibration, repeated;
64 with ``--quick``) and D with 64 (skipped by ``--quick``);
per image = the query's totals divided by its items. ``--mobilenet`` adds MobileNetV2-0.35 at
96 px (``models/mobilenet.py``, random weights and inputs, two images; about 10 minutes and up
to ~12 GB) with the BFV parameters the compiler picks for it (a 36-bit plaintext modulus,
N = 2^14): each network row names its parameters. GAZELLE reports single-image queries
only: the ratios printed beside these rows compare amortized throughput with its single-image
latency (not like with like; the latency-mode rows are).

**mode="auto"** (``--auto``: only this): networks A and C compiled in both modes and with
``mode="auto"`` for 1, 100 and 200 items; each point prints the mode auto kept, both modes'
predicted times (:mod:`heinfer.compiler.two_party_cost`: the ciphertext work, measured on this
machine, and every ciphertext on a 1 Gbit/s link; also without the link) and both modes run
in this process on those items (offline + online seconds, no link), and whether auto kept
the mode that ran faster.

    .venv/bin/python bench/twoparty.py [--quick] [--no-spu] [--no-networks] [--auto]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heinfer  # noqa: E402
from heinfer.twoparty import LayerCircuit, TwoPartyClient, TwoPartyServer, run_in_process  # noqa: E402
from machine import ROOT, build_profile, cpu_model, others_load  # noqa: E402

#: 20 bits, ≡ 1 mod 8192 (BFV batching up to n = 4096), GAZELLE's plaintext size.
P = 1_032_193
#: GAZELLE Table 10, quoted: (total ms, total MB).
GAZELLE = {"relu": {"1000": (104, 7.1), "10000": (687, 71.0)}, "maxpool": {"1000": (222, 24.0)}}
#: GAZELLE Tables 11–12, quoted: (offline s, online s, total s, offline MB, online MB, total MB).
GAZELLE_NETS = {
    "mnist_a": (0.0, 0.03, 0.03, 0.0, 0.5, 0.5),
    "mnist_b": (0.0, 0.03, 0.03, 0.0, 0.5, 0.5),
    "mnist_c": (0.15, 0.05, 0.20, 5.9, 2.1, 8.0),
    "mnist_d": (0.481, 0.33, 0.81, 47.5, 22.5, 70.0),
    "cifar_a": (9.34, 3.56, 12.9, 940.0, 296.0, 1236.0),
}


def _network_model(name: str) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(ONNX bytes, calibration inputs, test inputs) of a benchmark network."""
    if name.startswith("mobilenetv2"):
        sys.path.insert(0, os.path.join(ROOT, "models"))
        import mobilenet

        _, width, size = name.split("_")
        return mobilenet.build(int(width) / 100, int(size)), mobilenet.random_inputs(32, int(size), 11), mobilenet.random_inputs(16, int(size), 12)
    if name in ("cifar_a", "resnet20"):
        sys.path.insert(0, os.path.join(ROOT, "models"))
        import cifar

        x = cifar.random_inputs(80)
        return cifar.build("minionn_cifar" if name == "cifar_a" else name), x[16:], x[:16]
    d = np.load(os.path.join(ROOT, "models", "digits_test.npz"))["x"]
    file = {"mnist_a": "mnist_a", "mnist_b": "cryptonets", "mnist_c": "cryptonets_relu", "mnist_d": "mnist_d"}[name]
    with open(os.path.join(ROOT, "models", f"{file}.onnx"), "rb") as f:
        return f.read(), d[100:164], d[:100]


def network(name: str, items: int, bandwidth: float = 125e6, mode: str = "latency") -> dict:
    """One network end to end (see the module documentation); ``bandwidth`` (bytes/s) is the
    link the compiler prices layouts for (latency mode); in throughput mode all ``items`` run
    in one query."""
    import onnxruntime as ort

    model, cal, x = _network_model(name)
    if len(x) < items:  # larger batches: every digit not used for calibration (296), repeated
        d = np.load(os.path.join(ROOT, "models", "digits_test.npz"))["x"]
        x = np.concatenate([x, d[164:]]) if name.startswith("mnist") else x
        x = np.concatenate([x] * -(-items // len(x)))
    x = x[:items]
    t0 = time.perf_counter()
    if mode == "throughput":
        prog = heinfer.compile(model, mode="throughput", protocol="two-party", calibration=cal, batch_size=items)
    else:
        prog = heinfer.compile(model, mode="latency", protocol="two-party", calibration=cal, bandwidth=bandwidth)
    compile_s = time.perf_counter() - t0
    r = heinfer.infer(prog, x)
    sess = ort.InferenceSession(model)
    want = sess.run(None, {sess.get_inputs()[0].name: x.astype(np.float32)})[0].reshape(len(x), -1)
    got = r.outputs.reshape(len(x), -1)
    rep, n, mb = r.report, len(x), 1e6
    out = {
        "items": n,
        "offline_s": rep["offline_s"] / n,
        "online_s": rep["online_s"] / n,
        "offline_mb": rep["offline_bytes"] / n / mb,
        "online_mb": rep["online_bytes"] / n / mb,
        "setup_s": rep["setup_s"],
        "setup_mb": rep["setup_bytes"] / mb,
        "compile_s": compile_s,
        "agreement": float((got.argmax(1) == want.argmax(1)).mean()),
        "rel_logit_error": float((np.abs(got - want).max(1) / np.abs(want).max(1)).max()),
        "rotation_keys": prog.galois_key_count,
        "mode": mode,
        "queries": rep["queries"],
        "bfv": {"log_n": prog.bfv["log_n"], "primes": len(prog.bfv["log_q"]), "plain_bits": prog.plain_modulus.bit_length()},
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
    }
    out["total_s"] = out["offline_s"] + out["online_s"]
    out["total_mb"] = out["offline_mb"] + out["online_mb"]
    g = GAZELLE_NETS.get(name)  # none for the networks GAZELLE did not run
    if g:
        out["vs_gazelle_time"], out["vs_gazelle_bytes"] = round(out["total_s"] / g[2], 3), round(out["total_mb"] / g[5], 3)
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}


def measure(client, server, layer: LayerCircuit, n: int, reps: int) -> dict:
    """Median offline and online time over ``reps`` steps of ``n`` instances; checks results."""
    rng = np.random.default_rng(n)
    runs = []
    for _ in range(reps):
        x = rng.integers(0, P, n * layer.arity, dtype=np.uint64)
        run = run_in_process(client, server, layer, x, P)
        v = x.astype(np.int64)
        signed = np.where(v > (P - 1) // 2, v - P, v).reshape(n, layer.arity).max(1)
        assert np.array_equal(run.outputs, np.maximum(signed, 0)), "wrong two-party result"
        runs.append(run)
    off = float(np.median([r.offline_s for r in runs])) * 1e3
    on = float(np.median([r.online_s for r in runs])) * 1e3
    return {
        "offline_ms": round(off, 1),
        "online_ms": round(on, 1),
        "total_ms": round(off + on, 1),
        "offline_mb": round(runs[-1].offline_bytes / 1e6, 3),
        "online_mb": round(runs[-1].online_bytes / 1e6, 3),
        "total_mb": round((runs[-1].offline_bytes + runs[-1].online_bytes) / 1e6, 3),
        "and_gates": layer.and_gates,
    }


def spu_peer(relu: list[int], maxpool: int) -> dict | None:
    """The SPU runner's JSON, or None when its venv is missing or it fails."""
    py = os.path.join(ROOT, ".venv-spu", "bin", "python")
    if not os.path.exists(py):
        return None
    cmd = [py, os.path.join(ROOT, "bench", "compare", "spu_runner.py"), "--relu", ",".join(map(str, relu)),
           "--maxpool", str(maxpool), "--network-d", os.path.join(ROOT, "models", "mnist_d.onnx")]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as e:
        print(f"# SPU peer failed: {e}", file=sys.stderr)
        return None


def auto_check(name: str, points=(1, 100, 200)) -> list[dict]:
    """``mode="auto"`` against both modes run on the same items (module documentation)."""
    from heinfer.compiler.two_party_cost import cost_params, predict_two_party_seconds
    from heinfer.runtime.costs import measure_costs
    from heinfer.runtime.two_party_costs import measure_two_party_costs

    model, cal, _ = _network_model(name)
    x = np.load(os.path.join(ROOT, "models", "digits_test.npz"))["x"]
    x = np.concatenate([x] * -(-max(points) // len(x)))
    progs = {m: heinfer.compile(model, mode=m, protocol="two-party", calibration=cal) for m in ("latency", "throughput")}
    flood = max(seg.flood_bits for p in progs.values() for seg in p.segments)
    bfv = progs["latency"].bfv
    kinds = measure_two_party_costs(bfv, flood)
    costs = {**measure_costs(cost_params(bfv)), **kinds}
    print(f"auto {name}: the protocol's steps per ciphertext (median of 3 runs over 16 ciphertexts): "
          + ", ".join(f"{k[3:]} {v * 1e6:.0f} µs" for k, v in kinds.items()), flush=True)
    rows = []
    for items in points:
        auto = heinfer.compile(model, mode="auto", protocol="two-party", calibration=cal, batch_size=items)
        row = {"network": name, "items": items, "auto": auto.mode}
        for m, p in progs.items():
            rep = heinfer.infer(p, x[:items]).report
            row[f"{m}_predicted_s"] = round(predict_two_party_seconds(p, costs, items), 3)
            row[f"{m}_predicted_no_link_s"] = round(predict_two_party_seconds(p, costs, items, float("inf")), 3)
            row[f"{m}_measured_s"] = round(rep["offline_s"] + rep["online_s"], 3)
        row["auto_was_faster"] = auto.mode == min(progs, key=lambda m: row[f"{m}_measured_s"])
        print(f"auto {name} × {items}: kept {auto.mode}; predicted latency {row['latency_predicted_s']} s, throughput "
              f"{row['throughput_predicted_s']} s (no link {row['latency_predicted_no_link_s']} / "
              f"{row['throughput_predicted_no_link_s']} s); ran latency {row['latency_measured_s']} s, throughput "
              f"{row['throughput_measured_s']} s → kept the faster: {row['auto_was_faster']}", flush=True)
        row["kinds_us"] = {k: round(v * 1e6, 1) for k, v in kinds.items()}
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 repetitions instead of 7")
    ap.add_argument("--no-spu", action="store_true", help="skip the SPU peer")
    ap.add_argument("--no-networks", action="store_true", help="only the ReLU and max-pool steps")
    ap.add_argument("--auto", action="store_true", help='only the mode="auto" check (A and C, 1/100/200 items)')
    ap.add_argument("--mobilenet", action="store_true", help="also MobileNetV2-0.35-96 (about 10 minutes, up to ~12 GB)")
    ap.add_argument("--only", default="", help="comma-separated network rows to run (e.g. mobilenetv2_035_96), nothing else")
    args = ap.parse_args()
    only = {n for n in args.only.split(",") if n}
    if "mobilenetv2_035_96" in only:
        args.mobilenet = True
    if args.auto:
        heinfer.set_num_threads(2)
        print(f"# heinfer two-party mode=\"auto\" — CPU: {cpu_model()}, build: {build_profile()}, 2 engine threads")
        rows = auto_check("mnist_a") + auto_check("mnist_c")
        print(json.dumps({"auto": rows, "kept_the_faster": sum(r["auto_was_faster"] for r in rows), "points": len(rows),
                          "cpu": cpu_model(), "build": build_profile()}))
        return
    reps = 3 if args.quick else 7
    heinfer.set_num_threads(1)
    print(f"# heinfer two-party benchmark — CPU: {cpu_model()}, build: {build_profile()}, 1 thread, p = {P} (20 bits)")
    t = time.perf_counter()
    client, m1 = TwoPartyClient.start()
    server, m2 = TwoPartyServer.start(m1)
    client.finish_setup(m2)
    setup = {"ms": round((time.perf_counter() - t) * 1e3, 1), "bytes": len(m1) + len(m2)}
    print(f"session set-up (128 base OTs, once per session): {setup['ms']} ms, {setup['bytes']} bytes")
    result: dict = {"relu": {}, "maxpool": {}}
    for kind, n in () if only else (("relu", 1000), ("relu", 10000), ("maxpool", 1000)):
        layer = LayerCircuit("relu", P, 0) if kind == "relu" else LayerCircuit("maxpool_relu", P, 0, window=4)
        r = measure(client, server, layer, n, reps)
        g_ms, g_mb = GAZELLE[kind][str(n)]
        r["vs_gazelle_time"] = round(r["total_ms"] / g_ms, 3)
        r["vs_gazelle_bytes"] = round(r["total_mb"] / g_mb, 3)
        result[kind][str(n)] = r
        print(f"{kind:8s} ×{n:<6d}: offline {r['offline_ms']:7.1f} ms + online {r['online_ms']:6.1f} ms = {r['total_ms']:7.1f} ms "
              f"(GAZELLE, quoted: {g_ms} ms → ×{r['vs_gazelle_time']}); {r['offline_mb']:.2f} + {r['online_mb']:.2f} = "
              f"{r['total_mb']:.2f} MB (GAZELLE {g_mb} MB → ×{r['vs_gazelle_bytes']}); {r['and_gates']} AND gates each")
    peer = None if args.no_spu or args.quick or only else spu_peer([1000, 10000], 1000)
    if peer and "unavailable" not in peer:
        for kind, key in (("relu", "1000"), ("relu", "10000"), ("maxpool", "1000")):
            s = peer.get(kind, {}).get(key)
            if s:
                ours = result[kind][key]
                ours["vs_spu_time"] = round(ours["total_ms"] / (s["s"] * 1e3), 4)
                ours["vs_spu_bytes"] = round(ours["total_mb"] / s["mb"], 3)
                print(f"SPU (Cheetah, 2 processes, same run) {kind} ×{key}: {s['s']:.2f} s, {s['mb']:.2f} MB → heinfer "
                      f"×{ours['vs_spu_time']} time, ×{ours['vs_spu_bytes']} bytes")
    if not args.no_networks:
        heinfer.set_num_threads(2)
        nets = [(n, bw) for n in ("mnist_a", "mnist_b", "mnist_c") for bw in (125e6, 1.25e6)] + [("mnist_d", 125e6)]
        nets += [] if args.quick else [("cifar_a", 125e6), ("resnet20", 125e6)]
        nets += [("mobilenetv2_035_96", 125e6)] if args.mobilenet else []
        nets += [(n, "throughput") for n in ("mnist_a", "mnist_b", "mnist_c")] + ([] if args.quick else [("mnist_d", "throughput")])
        for name, bw in [(n, bw) for n, bw in nets if not only or n in only]:
            items = {"mnist_d": 2 if args.quick else 10, "cifar_a": 3, "resnet20": 3, "mobilenetv2_035_96": 2}.get(name, 5 if args.quick else 20)
            key = name if bw == 125e6 else f"{name}_10mbps"
            if bw == "throughput":
                key, items = f"{name}_throughput", 64 if args.quick or name == "mnist_d" else 512
                r = result[key] = network(name, items, mode="throughput")
            else:
                r = result[key] = network(name, items, bw)
            g = GAZELLE_NETS.get(name)
            vs_t = f" (GAZELLE, quoted: {g[2]} s → ×{r['vs_gazelle_time']})" if g else " (GAZELLE: not run)"
            vs_b = f" (GAZELLE {g[5]} MB → ×{r['vs_gazelle_bytes']})" if g else ""
            print(f"{key}: per image offline {r['offline_s']:.3f} s + online {r['online_s']:.3f} s = {r['total_s']:.3f} s"
                  f"{vs_t}; {r['offline_mb']:.2f} + {r['online_mb']:.2f} = "
                  f"{r['total_mb']:.2f} MB{vs_b}; set-up once per session "
                  f"{r['setup_s']:.2f} s, {r['setup_mb']:.1f} MB ({r['rotation_keys']} rotation keys); agreement "
                  f"{r['agreement']:.3f} over {r['items']}, rel. logit error {r['rel_logit_error']:.2e}; BFV N = 2^{r['bfv']['log_n']}, "
                  f"{r['bfv']['primes']} primes, {r['bfv']['plain_bits']}-bit p; compile {r['compile_s']:.1f} s; peak RSS so far {r['peak_rss_gb']:.1f} GB")
    if peer and "mnist_d" in peer:
        s_d = peer["mnist_d"]
        ours = result.get("mnist_d")
        tail = f" → heinfer ×{ours['total_s'] / s_d['s']:.3f} time, ×{ours['total_mb'] / s_d['mb']:.3f} bytes" if ours else ""
        print(f"SPU network D (input and weights secret-shared): {s_d['s']:.2f} s, {s_d['mb']:.2f} MB{tail}")
    result["spu"] = peer
    result["setup"] = setup
    result["cpu"] = cpu_model()
    result["build"] = build_profile()
    result["p"] = P
    result["threads"] = {"steps": 1, "networks": 2}
    result["others_load"] = others_load()
    print(f"# other work on this machine during the run: {result['others_load']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
