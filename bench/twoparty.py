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

**Not supported yet**: the networks of the issue (A, B, C, D, CIFAR-A) need the BFV linear
layers between these steps; the JSON says so.

    .venv/bin/python bench/twoparty.py [--quick] [--no-spu]

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heinfer  # noqa: E402
from heinfer.twoparty import LayerCircuit, TwoPartyClient, TwoPartyServer, run_in_process  # noqa: E402
from machine import ROOT, build_profile, cpu_model  # noqa: E402

#: 20 bits, ≡ 1 mod 8192 (BFV batching up to n = 4096), GAZELLE's plaintext size.
P = 1_032_193
#: GAZELLE Table 10, quoted: (total ms, total MB).
GAZELLE = {"relu": {"1000": (104, 7.1), "10000": (687, 71.0)}, "maxpool": {"1000": (222, 24.0)}}
NETWORKS = ["mnist_a", "mnist_b", "mnist_c", "mnist_d", "cifar_a"]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 repetitions instead of 7")
    ap.add_argument("--no-spu", action="store_true", help="skip the SPU peer")
    args = ap.parse_args()
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
    for kind, n in (("relu", 1000), ("relu", 10000), ("maxpool", 1000)):
        layer = LayerCircuit("relu", P, 0) if kind == "relu" else LayerCircuit("maxpool_relu", P, 0, window=4)
        r = measure(client, server, layer, n, reps)
        g_ms, g_mb = GAZELLE[kind][str(n)]
        r["vs_gazelle_time"] = round(r["total_ms"] / g_ms, 3)
        r["vs_gazelle_bytes"] = round(r["total_mb"] / g_mb, 3)
        result[kind][str(n)] = r
        print(f"{kind:8s} ×{n:<6d}: offline {r['offline_ms']:7.1f} ms + online {r['online_ms']:6.1f} ms = {r['total_ms']:7.1f} ms "
              f"(GAZELLE, quoted: {g_ms} ms → ×{r['vs_gazelle_time']}); {r['offline_mb']:.2f} + {r['online_mb']:.2f} = "
              f"{r['total_mb']:.2f} MB (GAZELLE {g_mb} MB → ×{r['vs_gazelle_bytes']}); {r['and_gates']} AND gates each")
    peer = None if args.no_spu or args.quick else spu_peer([1000, 10000], 1000)
    if peer and "unavailable" not in peer:
        for kind, key in (("relu", "1000"), ("relu", "10000"), ("maxpool", "1000")):
            s = peer.get(kind, {}).get(key)
            if s:
                ours = result[kind][key]
                ours["vs_spu_time"] = round(ours["total_ms"] / (s["s"] * 1e3), 4)
                ours["vs_spu_bytes"] = round(ours["total_mb"] / s["mb"], 3)
                print(f"SPU (Cheetah, 2 processes, same run) {kind} ×{key}: {s['s']:.2f} s, {s['mb']:.2f} MB → heinfer "
                      f"×{ours['vs_spu_time']} time, ×{ours['vs_spu_bytes']} bytes")
        if "mnist_d" in peer:
            print(f"SPU network D: {peer['mnist_d']['s']:.2f} s, {peer['mnist_d']['mb']:.2f} MB (heinfer: not supported yet)")
    result["spu"] = peer
    result["setup"] = setup
    result["not_supported_yet"] = {n: "needs the BFV linear layers between the two-party steps" for n in NETWORKS}
    result["cpu"] = cpu_model()
    result["build"] = build_profile()
    result["p"] = P
    print(json.dumps(result))


if __name__ == "__main__":
    main()
