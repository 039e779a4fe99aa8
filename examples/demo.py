"""The encrypted-inference demo over the wire (``make demo``): two processes, gRPC on localhost.

1. ``heinfer compile`` turns the bundled CryptoNets-ReLU model (``models/cryptonets_relu.onnx``,
   trained by ``models/train.py`` on scikit-learn's digits upscaled to 28×28) into a
   throughput-mode program in a temporary directory: the server's ``cryptonets_relu.hep``
   (with the weights) and the clients' ``cryptonets_relu.public.hep`` (no weights);
2. ``heinfer serve`` runs the server's program in a server process on a free localhost port
   (evaluation keys only: the server never sees a secret key or a digit);
3. ``heinfer predict``, a second process handed only the public program, generates the keys,
   uploads the evaluation keys, encrypts the 360 held-out digits, answers the two
   client-aided ReLU rounds and decrypts;
4. this script prints accuracy against the labels, agreement with plaintext inference
   (onnxruntime), latency, throughput and bytes on the wire, and stops the server (also when
   something failed).

Every command is launched as ``python -m heinfer.cli`` with this interpreter, so the demo
runs before and after the ``heinfer`` script is installed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "models", "cryptonets_relu.onnx")
DIGITS = os.path.join(ROOT, "models", "digits_test.npz")


def plaintext_logits(x: np.ndarray) -> tuple[np.ndarray, str]:
    """The model's logits on plaintext digits, and the name of the reference used."""
    try:
        import onnxruntime as ort
    except ImportError:  # the compiler's float64 reference of the same graph
        import heinfer

        return heinfer.compiler.load_onnx(MODEL).run(x), "numpy reference"
    sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0], "onnxruntime"


def show(*args: str, tmp: str = "") -> None:
    """Prints a command as a user would type it (repository paths relative, the temporary
    directory as ``$TMP``)."""
    shown = []
    for a in args:
        if tmp and a.startswith(tmp):
            a = "$TMP" + a[len(tmp) :]
        elif os.path.isabs(a) and a.startswith(ROOT):
            a = os.path.relpath(a, ROOT)
        shown.append(a)
    print("$ heinfer " + " ".join(shown), flush=True)


def main() -> None:
    """Runs the demo; exits non-zero when the encrypted predictions differ from plaintext."""
    from heinfer.cli.process import ServerProcess, run_cli

    data = np.load(DIGITS)
    x, y = data["x"], data["y"]
    with tempfile.TemporaryDirectory(prefix="heinfer-demo-") as tmp:
        program = os.path.join(tmp, "cryptonets_relu.hep")  # the server's: weights
        public = os.path.join(tmp, "cryptonets_relu.public.hep")  # the client's: no weights
        out = os.path.join(tmp, "logits.npy")
        compile_args = ("compile", MODEL, "-o", program, "--mode", "throughput")
        compile_args += ("--calibration", DIGITS)
        show(*compile_args, tmp=tmp)
        print(run_cli(*compile_args).stdout.rstrip())
        show("serve", program, "--host", "127.0.0.1", "--port", "0", tmp=tmp)
        t0 = time.perf_counter()
        with ServerProcess(program) as server:
            print(
                f"server pid {server.pid} listening on {server.address} "
                f"(ready in {time.perf_counter() - t0:.1f} s)"
            )
            predict_args = ("predict", "--server", server.address, "--model", public, DIGITS)
            predict_args += ("-o", out, "--json")
            show(*predict_args, tmp=tmp)
            done = run_cli(*predict_args)
            if "warning" in done.stderr:  # the client must not have been given the weights
                sys.exit(f"the client was handed the weights: {done.stderr.strip()}")
            report = json.loads(done.stdout.strip().splitlines()[-1])
            logits = np.load(out)
        print(f"server stopped (exit status {server.proc.returncode})")
        # the operator's view: the compiler's error bound is in the server's program only
        import heinfer

        with open(program, "rb") as f:
            report["predicted_error"] = heinfer.load_program(f.read()).meta["predicted_error"][-1]
    summarize(x, y, logits, report)


def summarize(x: np.ndarray, y: np.ndarray, logits: np.ndarray, r: dict) -> None:
    """Prints accuracy, agreement with plaintext, latency, throughput and bytes."""
    plain, ref_name = plaintext_logits(x)
    pred = logits.argmax(1)
    n = len(x)
    agree = float(np.mean(pred == plain.argmax(1)))
    up, down = r.get("wire_bytes_up", r["bytes_up"]), r.get("wire_bytes_down", r["bytes_down"])
    bound = r["predicted_error"] + r["precision"]
    error = f"{np.abs(logits - plain).max():.2e} (compiler's bound {bound:.2e}, output precision included)"
    latency = (
        f"{r['queries_s']:.3f} s for the batch (client {r['client_s']:.3f} s, server "
        f"{r['server_s']:.3f} s); session set-up {r.get('session_s', 0.0):.3f} s"
    )
    rate = (
        f"{n / r['queries_s']:.0f} images/s (one query holds up to "
        f"{r.get('batch_capacity', '?')}: a full batch amortizes better)"
    )
    traffic = (
        f"{up / 1e6:.2f} MB up, {down / 1e6:.2f} MB down "
        f"({up / n / 1e3:.1f} kB + {down / n / 1e3:.1f} kB per image)"
    )
    rows = [
        ("accuracy vs labels", f"{np.mean(pred == y):.4f}"),
        (f"agreement with plaintext ({ref_name})", f"{agree:.4f}"),
        ("max |logit difference|", error),
        ("latency", latency),
        ("throughput", rate),
        ("bytes on the wire", traffic),
    ]
    print(
        f"\nclassified {n} encrypted digits over gRPC ({r['queries']} query, "
        f"{r['rounds']} client-aided rounds)"
    )
    width = max(len(k) for k, _ in rows) + 2
    for k, v in rows:
        print(f"  {k + ':':<{width}}{v}")
    if agree < 1.0:
        sys.exit("encrypted predictions differ from plaintext inference")


if __name__ == "__main__":
    main()
