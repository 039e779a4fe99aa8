"""The encrypted-inference demo (``make demo``): CryptoNets-ReLU on held-out digits.

Compiles the bundled ONNX model (``models/cryptonets_relu.onnx``, trained by
``models/train.py`` on scikit-learn's digits upscaled to 28×28), then a real client encrypts
the 360 held-out digits under its own secret key, a real server (evaluation keys only)
classifies them on ciphertexts with two client-aided ReLU rounds, and the client decrypts.
Prints accuracy against the labels, agreement with plaintext inference (onnxruntime),
throughput, latency and bytes on the wire.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    import heinfer

    model = os.path.join(ROOT, "models", "cryptonets_relu.onnx")
    data = np.load(os.path.join(ROOT, "models", "digits_test.npz"))
    x, y = data["x"], data["y"]
    t = time.perf_counter()
    prog = heinfer.compile(model, mode="throughput", calibration=x[:64])
    t_compile = time.perf_counter() - t
    p = prog.params
    print(f"compiled {os.path.relpath(model, ROOT)} in {t_compile:.2f} s")
    print(
        f"  CKKS N=2^{p['log_n']}, q = {p['log_q']} bits, P = {p['log_p'] or 'none'}, "
        f"{p['security']}-bit security; {prog.packing} packing: {prog.batch_capacity} images per query"
    )
    print(f"  {len(prog.segments)} server segments, {len(prog.steps)} client-aided ReLU rounds")
    result = heinfer.infer(prog, x)
    r = result.report
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        plain = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        ref_name = "onnxruntime"
    except ImportError:  # the compiler's float64 reference of the same graph
        plain = heinfer.compiler.load_onnx(model).run(x)
        ref_name = "numpy reference"
    pred = result.outputs.argmax(1)
    n = len(x)
    print(f"\nclassified {n} encrypted digits")
    print(f"  accuracy vs labels:              {np.mean(pred == y):.4f}")
    print(f"  agreement with plaintext ({ref_name}): {np.mean(pred == plain.argmax(1)):.4f}")
    print(f"  max |logit difference|:          {np.abs(result.outputs - plain).max():.2e}")
    print(f"  total latency:                   {r['queries_s']:.3f} s (client {r['client_s']:.3f} s, server {r['server_s']:.3f} s, {r['rounds']} rounds)")
    print(f"  throughput:                      {n / r['queries_s']:.0f} images/s ({heinfer.get_num_threads()} threads; a full batch of {prog.batch_capacity} amortizes better)")
    print(f"  bytes per image:                 {r['bytes_per_item_up'] / 1e3:.1f} kB up, {r['bytes_per_item_down'] / 1e3:.1f} kB down")
    if np.mean(pred == plain.argmax(1)) < 1.0:
        sys.exit("encrypted predictions differ from plaintext inference")


if __name__ == "__main__":
    main()
