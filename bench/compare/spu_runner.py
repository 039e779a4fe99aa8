"""SecretFlow SPU (Cheetah) peer of heinfer's two-party benchmark.

  .venv-spu/bin/python bench/compare/spu_runner.py [--quick] [--relu 1000,10000,100000]
      [--maxpool 1000] [--network-d models/mnist_d.onnx] [--no-netns]

Two OS processes (this script with --party 0/1) over a brpc link on 127.0.0.1; CHEETAH,
FM64, 18 fractional bits. Timer (party 0): fresh runtime (so Cheetah's lazy setup is
included), input sharing over the link, the run, output shares to party 0 and their
reconstruction; jax tracing and SPU compilation happen before and are not timed. Bytes:
SPU's link counter for the run (`Link details` log line) plus the share frames sent here,
both parties; loopback bytes too in a private network namespace. See README.md. Prints
ONE JSON line on stdout, diagnostics on stderr; {"library": "spu", "unavailable": ...}
and exit 0 when spu cannot be imported. Never imports heinfer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError as _e:  # reported as "unavailable" by main()
    np = None
    _NUMPY_ERROR = f"{type(_e).__name__}: {_e}"

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FRACTION_BITS = 18          # SPU's default for FM64, set explicitly so it is reported
PARTY_TIMEOUT_S = 3600      # whole run of one party (both are killed after this)
SEED = 20240611
LINK_RE = re.compile(r"Link details: total send bytes (\d+), recv bytes (\d+), "
                     r"send actions (\d+), recv actions (\d+)")
MARK = "@@spu_runner workload "


def log(*msg):
    print(*msg, file=sys.stderr, flush=True)


def unavailable(reason: str):
    log(f"spu: unavailable: {reason}")
    sys.stdout.write(json.dumps({"library": "spu", "unavailable": reason}) + "\n")
    sys.exit(0)


def cpu_model() -> str:
    """Same string as bench/machine.py (model name, cores, SIMD flags), without heinfer."""
    name, flags = "unknown", ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name == "unknown":
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = line
    except OSError:
        pass
    simd = [x for x in ("avx2", "avx512f", "avx512dq", "avx512ifma") if f" {x}" in flags]
    return f"{name} ({os.cpu_count()} cores{'; ' + ', '.join(simd) if simd else ''})"


# ---------------------------------------------------------------- share framing

def pack_share(share) -> bytes:
    """meta and chunks of a libspu.Share, each length-prefixed (u32 count, u64 lengths)."""
    parts = [bytes(share.meta)] + [bytes(c) for c in share.share_chunks]
    out = [struct.pack("<I", len(parts))]
    for p in parts:
        out += [struct.pack("<Q", len(p)), p]
    return b"".join(out)


def unpack_share(data: bytes, libspu):
    """Inverse of pack_share; every length is checked against the buffer."""
    if len(data) < 4:
        raise ValueError("share frame shorter than its header")
    (count,) = struct.unpack_from("<I", data, 0)
    if count < 1 or count > (len(data) - 4) // 8:
        raise ValueError(f"share frame announces {count} parts")
    off, parts = 4, []
    for _ in range(count):
        if off + 8 > len(data):
            raise ValueError("share frame truncated in a length")
        (n,) = struct.unpack_from("<Q", data, off)
        off += 8
        if n > len(data) - off:
            raise ValueError("share frame truncated in a part")
        parts.append(data[off:off + n])
        off += n
    if off != len(data):
        raise ValueError("trailing bytes after the share frame")
    s = libspu.Share()
    s.meta = parts[0]
    s.share_chunks = parts[1:]
    return s


# ---------------------------------------------------------------- workloads (jax)

def relu_fn(x):
    import jax.numpy as jnp
    return jnp.maximum(x, 0.0)


def maxpool_relu_fn(x):
    """2x2 max-pool (stride 2) of a (2h, 2w) image, then ReLU."""
    import jax.numpy as jnp
    h, w = x.shape[0] // 2, x.shape[1] // 2
    return jnp.maximum(x.reshape(h, 2, w, 2).max(axis=(1, 3)), 0.0)


def network_d_fn(x, c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b):
    """MiniONN MNIST (network D), NCHW / OIHW like the ONNX file."""
    import jax.numpy as jnp
    from jax import lax

    def conv(a, w, b):
        y = lax.conv_general_dilated(a, w, (1, 1), "VALID",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + b[None, :, None, None]

    def pool(a):
        n, c, h, w = a.shape
        return a.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))

    a = pool(jnp.maximum(conv(x, c1w, c1b), 0.0))
    a = pool(jnp.maximum(conv(a, c2w, c2b), 0.0))
    a = a.reshape(a.shape[0], -1)
    a = jnp.maximum(a @ f1w.T + f1b, 0.0)
    return a @ f2w.T + f2b


def network_d_numpy(x, c1w, c1b, c2w, c2b, f1w, f1b, f2w, f2b):
    """Plaintext float64 reference of network_d_fn."""
    from numpy.lib.stride_tricks import sliding_window_view as windows

    def conv(a, w, b):
        win = windows(a, w.shape[2:], axis=(2, 3))          # n, c, oh, ow, kh, kw
        return np.einsum("ncijkl,ockl->noij", win, w) + b[None, :, None, None]

    def pool(a):
        n, c, h, w = a.shape
        return a.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))

    a = pool(np.maximum(conv(x, c1w, c1b), 0.0))
    a = pool(np.maximum(conv(a, c2w, c2b), 0.0))
    a = a.reshape(a.shape[0], -1)
    a = np.maximum(a @ f1w.T + f1b, 0.0)
    return a @ f2w.T + f2b


D_OPS = ["Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Flatten", "Gemm", "Relu", "Gemm"]


def load_network_d(path: str):
    """The 8 weight tensors of network D, checked against the expected graph."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(path)
    ops = [n.op_type for n in m.graph.node]
    if ops != D_OPS:
        raise SystemExit(f"{path}: expected the ops {D_OPS}, found {ops}")
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    ws = []
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm"):
            ws += [np.asarray(init[t], np.float32) for t in n.input[1:3]]
        if n.op_type == "Gemm":
            attrs = {a.name: a for a in n.attribute}
            if "transB" not in attrs or attrs["transB"].i != 1:
                raise SystemExit(f"{path}: Gemm without transB=1")
    shapes = [w.shape for w in ws]
    want = [(16, 1, 5, 5), (16,), (16, 16, 5, 5), (16,), (100, 256), (100,), (10, 100), (10,)]
    if shapes != want:
        raise SystemExit(f"{path}: weight shapes {shapes}, expected {want}")
    return ws


def compile_exe(fn, args, name):
    """jax -> XLA -> SPU bytecode; returns the serialized libspu.Executable."""
    from spu import libspu
    from spu.utils import frontend

    names = [f"{name}_in{i}" for i in range(len(args))]
    exe, _ = frontend.compile(frontend.Kind.JAX, fn, args, {}, names,
                              [libspu.Visibility.VIS_SECRET] * len(args),
                              lambda outs: [f"{name}_out{i}" for i in range(len(outs))])
    return exe.SerializeToString()


def build_workloads(args, jobdir):
    """Compile every workload, write its executable and each party's private inputs."""
    rng = np.random.default_rng(SEED)
    work = []

    def add(name, fn, inputs, owners, reference):
        t0 = time.perf_counter()
        code = compile_exe(fn, inputs, name)
        log(f"spu: compiled {name} in {time.perf_counter() - t0:.1f} s (not timed)")
        with open(os.path.join(jobdir, f"{name}.exe"), "wb") as f:
            f.write(code)
        for party in (0, 1):
            mine = {f"in{i}": a for i, (a, o) in enumerate(zip(inputs, owners)) if o == party}
            np.savez(os.path.join(jobdir, f"{name}.p{party}.npz"), **mine)
        work.append({"name": name, "owners": owners, "reference": reference})

    for n in args.relu:
        x = rng.uniform(-1.0, 1.0, n).astype(np.float32)
        add(f"relu_{n}", relu_fn, [x], [0], np.maximum(x.astype(np.float64), 0.0))
    for n in args.maxpool:
        w = 50 if n % 50 == 0 else n
        x = rng.uniform(-1.0, 1.0, (2 * (n // w), 2 * w)).astype(np.float32)
        ref = np.maximum(x.astype(np.float64).reshape(n // w, 2, w, 2).max(axis=(1, 3)), 0.0)
        add(f"maxpool_{n}", maxpool_relu_fn, [x], [0], ref)
    if args.network_d:
        ws = load_network_d(args.network_d)
        data = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
        x = np.asarray(data["x"][0:1], np.float32)
        if x.shape != (1, 1, 28, 28):
            raise SystemExit(f"digits_test.npz x[0:1] has shape {x.shape}")
        ref = network_d_numpy(x.astype(np.float64), *[w.astype(np.float64) for w in ws])
        add("mnist_d", network_d_fn, [x] + ws, [0] + [1] * len(ws), ref)
    return work


# ---------------------------------------------------------------- one party

def party_main(rank: int, jobdir: str) -> None:
    import spu
    from spu import libspu

    with open(os.path.join(jobdir, "job.json")) as f:
        job = json.load(f)
    desc = libspu.link.Desc()
    desc.id = "spu_runner"
    for r, port in enumerate(job["ports"]):
        desc.add_party(f"party{r}", f"127.0.0.1:{port}")
    desc.recv_timeout_ms = PARTY_TIMEOUT_S * 1000
    desc.http_timeout_ms = PARTY_TIMEOUT_S * 1000
    desc.connect_retry_times = 60
    desc.connect_retry_interval_ms = 1000
    lctx = libspu.link.create_brpc(desc, rank)
    peer = 1 - rank
    cfg = libspu.RuntimeConfig(protocol=libspu.ProtocolKind.CHEETAH,
                               field=libspu.FieldType.FM64,
                               fxp_fraction_bits=FRACTION_BITS)
    cfg.enable_pphlo_profile = True     # makes the runtime log its link counters per run
    io = spu.Io(2, cfg)
    results = []
    for w in job["workloads"]:
        name = w["name"]
        exe = libspu.Executable()
        with open(os.path.join(jobdir, f"{name}.exe"), "rb") as f:
            if not exe.ParseFromString(f.read()):
                raise RuntimeError(f"{name}: cannot parse the executable")
        mine = np.load(os.path.join(jobdir, f"{name}.p{rank}.npz"))
        lctx.barrier()
        print(f"{MARK}{name}", flush=True)
        lo0 = lo_tx_bytes() if job["netns"] else None
        sent = 0
        t0 = time.perf_counter()
        rt = spu.Runtime(lctx, cfg)
        for i, owner in enumerate(w["owners"]):
            var = exe.input_names[i]
            if owner == rank:
                shares = io.make_shares(mine[f"in{i}"], libspu.Visibility.VIS_SECRET)
                frame = pack_share(shares[peer])
                lctx.send(peer, frame)
                sent += len(frame)
                rt.set_var(var, shares[rank])
            else:
                rt.set_var(var, unpack_share(lctx.recv(owner), libspu))
        rt.run(exe)
        outs = [rt.get_var(n) for n in exe.output_names]
        if rank == 1:
            for s in outs:
                frame = pack_share(s)
                lctx.send(0, frame)
                sent += len(frame)
            value = None
        else:
            theirs = [unpack_share(lctx.recv(1), libspu) for _ in outs]
            value = io.reconstruct([outs[0], theirs[0]])
        secs = time.perf_counter() - t0
        del rt
        lctx.barrier()
        lo1 = lo_tx_bytes() if job["netns"] else None
        if value is not None:
            np.save(os.path.join(jobdir, f"{name}.out.npy"), np.asarray(value))
        lo = lo1 - lo0 if lo0 is not None and lo1 is not None else None
        results.append({"name": name, "s": secs, "io_bytes": sent, "lo_bytes": lo})
        log(f"spu: party {rank}: {name} {secs:.2f} s")
    with open(os.path.join(jobdir, f"party{rank}.json"), "w") as f:
        json.dump(results, f)
    lctx.stop_link()


def link_bytes(logfile: str, names):
    """Per workload, the send bytes of SPU's link counter for the run (one line per run)."""
    with open(logfile, errors="replace") as f:
        text = f.read()
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
        m = LINK_RE.search(line)
        if m and current is not None:
            if current in out:
                raise RuntimeError(f"{logfile}: two link counter lines for {current}")
            out[current] = (int(m.group(1)), int(m.group(3)))
    missing = [n for n in names if n not in out]
    if missing:
        raise RuntimeError(f"{logfile}: no 'Link details' line for {missing}")
    return out


def own_loopback() -> str | None:
    """Move this process into a fresh network namespace with only `lo` (up), so that the
    loopback counters in /proc/net/dev count this run's traffic alone. Needs CAP_SYS_ADMIN
    (root); returns why not, or None on success. The parties inherit the namespace."""
    import ctypes
    import fcntl

    clone_newnet, siocgifflags, siocsifflags, iff_up = 0x40000000, 0x8913, 0x8914, 0x1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(clone_newnet) != 0:
        return f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            ifr = fcntl.ioctl(s, siocgifflags, struct.pack("16sH14x", b"lo", 0))
            flags = struct.unpack_from("16sH", ifr)[1]
            fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))
    except OSError as e:
        return f"cannot bring lo up in the new namespace: {e}"
    return None


def lo_tx_bytes() -> int | None:
    """Bytes transmitted on `lo` (each loopback packet counted once, headers included)."""
    try:
        with open("/proc/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == "lo":
                    return int(rest.split()[8])
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_parties(jobdir: str, work, netns: bool):
    ports = [free_port()]
    while len(ports) < 2:
        ports += [p for p in [free_port()] if p != ports[0]]
    with open(os.path.join(jobdir, "job.json"), "w") as f:
        workloads = [{"name": w["name"], "owners": w["owners"]} for w in work]
        json.dump({"ports": ports, "netns": netns, "workloads": workloads}, f)
    procs, logs = [], []
    for rank in (0, 1):
        path = os.path.join(jobdir, f"party{rank}.log")
        fh = open(path, "w")
        logs.append((path, fh))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--party", str(rank), "--job", jobdir],
            stdout=fh, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + PARTY_TIMEOUT_S
    failed = False
    for p in procs:
        try:
            rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            rc = None
        if rc != 0:
            failed = True
            for q in procs:
                if q.poll() is None:
                    q.kill()
                    q.wait()
    for path, fh in logs:
        fh.close()
    if failed:
        for path, _ in logs:
            with open(path, errors="replace") as f:
                tail = f.read()[-4000:]
            log(f"--- {path} (tail)\n{tail}")
        raise SystemExit("spu: a party failed (log tails above)")
    names = [w["name"] for w in work]
    per_party = []
    for rank, (path, _) in enumerate(logs):
        with open(os.path.join(jobdir, f"party{rank}.json")) as f:
            per_party.append({r["name"]: r for r in json.load(f)})
        per_party[-1]["_link"] = link_bytes(path, names)
    return per_party


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="ReLU x1,000, max-pool x1,000 and network D")
    p.add_argument("--relu", default=None,
                   help="comma-separated counts (default 1000,10000,100000)")
    p.add_argument("--maxpool", default="1000", help="comma-separated window counts")
    p.add_argument("--network-d", default=os.path.join(ROOT, "models", "mnist_d.onnx"),
                   help="ONNX file of network D ('' to skip)")
    p.add_argument("--no-netns", action="store_true",
                   help="do not try a private network namespace (then loopback_mb is null)")
    p.add_argument("--party", type=int, choices=(0, 1), help=argparse.SUPPRESS)
    p.add_argument("--job", help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    def counts(s):
        try:
            v = [int(t) for t in s.split(",") if t.strip()]
        except ValueError:
            p.error(f"not a list of counts: {s!r}")
        if any(n < 1 for n in v):
            p.error("counts must be >= 1")
        return v

    a.relu = counts(a.relu if a.relu is not None else ("1000" if a.quick else "1000,10000,100000"))
    a.maxpool = counts(a.maxpool)
    return a


def main(argv=None) -> None:
    args = parse_args(argv)
    if np is None:
        unavailable(f"import numpy failed: {_NUMPY_ERROR}")
    if args.party is not None:
        if not args.job:
            raise SystemExit("--party needs --job")
        party_main(args.party, args.job)
        return
    netns_note = "disabled by --no-netns" if args.no_netns else own_loopback()
    if netns_note:
        log(f"spu: loopback bytes not measured: {netns_note}")
    try:
        import spu
        from spu import libspu  # noqa: F401
        import jax  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means "skip SPU"
        unavailable(f"import spu failed: {type(e).__name__}: {e}")

    res = {"library": "spu", "version": spu.__version__, "protocol": "CHEETAH",
           "field": "FM64", "fxp_fraction_bits": FRACTION_BITS,
           "parties": "2 OS processes, brpc link on 127.0.0.1",
           "relu": {}, "maxpool": {}, "mnist_d": None,
           "cpu": cpu_model(), "threads": len(os.sched_getaffinity(0))}
    with tempfile.TemporaryDirectory(prefix="spu_runner.") as jobdir:
        work = build_workloads(args, jobdir)
        per_party = run_parties(jobdir, work, netns_note is None)
        for w in work:
            name = w["name"]
            run_b = sum(pp["_link"][name][0] for pp in per_party)
            sends = sum(pp["_link"][name][1] for pp in per_party)
            io_b = sum(pp[name]["io_bytes"] for pp in per_party)
            got = np.load(os.path.join(jobdir, f"{name}.out.npy")).astype(np.float64)
            ref = w["reference"]
            if got.shape != ref.shape:
                raise SystemExit(f"{name}: output shape {got.shape}, expected {ref.shape}")
            err = float(np.max(np.abs(got - ref)))
            entry = {"s": round(per_party[0][name]["s"], 3), "mb": round((run_b + io_b) / 1e6, 3),
                     "run_link_mb": round(run_b / 1e6, 3), "share_io_mb": round(io_b / 1e6, 3),
                     "link_sends": sends,
                     "loopback_mb": None if per_party[0][name]["lo_bytes"] is None
                     else round(per_party[0][name]["lo_bytes"] / 1e6, 3),
                     "max_abs_error": err}
            log(f"spu: {name}: {entry}")
            if name.startswith("relu_"):
                res["relu"][name[5:]] = entry
            elif name.startswith("maxpool_"):
                res["maxpool"][name[8:]] = entry
            else:
                entry["agreement"] = bool(int(np.argmax(got)) == int(np.argmax(ref)))
                entry["argmax"] = [int(np.argmax(got)), int(np.argmax(ref))]
                res["mnist_d"] = entry
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
