"""Trains the three bundled models on scikit-learn's digits and exports them to ONNX.

Run from the repository root:

    .venv/bin/python models/train.py

Numpy only (forward/backward by hand in ``layers.py``), fixed seeds, nothing is downloaded:
``load_digits`` ships with scikit-learn. Writes, next to this file:

- ``cryptonets.onnx``       Conv -> x^2 -> Flatten -> Gemm -> x^2 -> Gemm, no biases
- ``cryptonets_relu.onnx``  Conv -> Relu -> Flatten -> Gemm -> Relu -> Gemm, with biases
- ``lola_small.onnx``       Conv -> x^2 -> Flatten -> Gemm (LoLa-Small), no biases
- ``digits_test.npz``       the 360 test images ``x`` float32 (360, 1, 28, 28), labels ``y`` int64
- ``README.md``             architectures, data preparation and the numbers printed here

All ONNX models take ``input`` (batch, 1, 28, 28) in [0, 1] and return ``logits`` (batch, 10).
"""

import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper
from scipy.ndimage import zoom
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
import deep_features
import layers as L
import twoparty

OUT = Path(__file__).resolve().parent
# name -> (activation, biases, hidden layer, learning rate, epochs, gradient-norm clip, seed)
CONFIGS = {
    "cryptonets": ("square", False, True, 1e-3, 30, 1.0, 1),
    "cryptonets_relu": ("relu", True, True, 1e-3, 30, None, 2),
    "lola_small": ("square", False, False, 1e-3, 30, 1.0, 3),
}
BATCH = 32
# layer -> pre-activation key, with and without the hidden layer
LAYERS = {
    True: (("conv", "z1"), ("fc1", "z2"), ("fc2", "logits")),
    False: (("conv", "z1"), ("fc", "logits")),
}


def load_data():
    """Digits upscaled 8x8 -> 28x28 (bilinear), scaled to [0, 1] float32, split 80/20.

    Returns ``(x_train, x_test, y_train, y_test)`` with ``x`` of shape (N, 1, 28, 28).
    """
    d = load_digits()
    up = np.stack([zoom(img, L.IN_HW / 8, order=1) for img in d.images])
    x = np.clip(up / 16.0, 0.0, 1.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)


def train(x, y, act, bias, hidden, lr, epochs, clip, seed):
    """Mini-batch Adam on softmax cross-entropy; returns float32 parameters."""
    rng = np.random.default_rng(seed)
    p = L.init_params(rng, bias, act, hidden)
    opt = L.Adam(p, lr, clip)
    x = x.astype(np.float64)
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        for i in range(0, len(x), BATCH):
            idx = order[i : i + BATCH]
            logits, cache = L.forward(p, x[idx], act)
            loss, dlogits = L.softmax_xent(logits, y[idx])
            opt.step(p, L.backward(p, cache, dlogits, act))
            total += loss * len(idx)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"  epoch {epoch + 1:3d}  train loss {total / len(x):.4f}")
    return {k: v.astype(np.float32) for k, v in p.items()}


def reference(p, x, act):
    """Numpy forward of the float32 parameters, computed in float64; returns logits, cache."""
    return L.forward({k: v.astype(np.float64) for k, v in p.items()}, x.astype(np.float64), act)


def export_onnx(p, act, name, path):
    """Writes the network as an opset-17 ONNX model and checks it."""
    inits = [numpy_helper.from_array(v, k) for k, v in p.items()]
    has_b = "conv_b" in p
    hidden = "fc1_w" in p

    def act_node(src, dst):
        if act == "square":
            return helper.make_node("Mul", [src, src], [dst], name=f"{dst}_square")
        return helper.make_node("Relu", [src], [dst], name=f"{dst}_relu")

    nodes = [
        helper.make_node(
            "Conv",
            ["input", "conv_w"] + ["conv_b"] * has_b,
            ["conv"],
            name="conv",
            kernel_shape=[L.K, L.K],
            strides=[L.STRIDE] * 2,
            pads=[L.PAD] * 4,
        ),
        act_node("conv", "act1"),
        helper.make_node("Flatten", ["act1"], ["flat"], name="flatten", axis=1),
    ]
    if hidden:
        nodes += [
            helper.make_node(
                "Gemm", ["flat", "fc1_w"] + ["fc1_b"] * has_b, ["fc1"], name="fc1", transB=1
            ),
            act_node("fc1", "act2"),
            helper.make_node(
                "Gemm", ["act2", "fc2_w"] + ["fc2_b"] * has_b, ["logits"], name="fc2", transB=1
            ),
        ]
    else:
        nodes.append(
            helper.make_node(
                "Gemm", ["flat", "fc_w"] + ["fc_b"] * has_b, ["logits"], name="fc", transB=1
            )
        )
    L.save_model(nodes, inits, name, path, "heinfer models/train.py", f"{name}: digits 28x28, logits output")


def verify_onnx(path, x, ref_logits):
    """Runs the model with onnxruntime; returns its logits after checking them against numpy."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(["logits"], {"input": x})[0]
    err = np.abs(got - ref_logits).max() / np.abs(ref_logits).max()
    assert err < 1e-5, f"{path.name}: onnxruntime differs from numpy (rel. {err:.2e})"
    return got, err


def layer_stats(p, cache, logits):
    """Max |weight|, max |bias| and the test-set pre-activation range for each layer."""
    cache = dict(cache, logits=logits)
    out = {}
    for layer, key in LAYERS["fc1_w" in p]:
        b = p.get(f"{layer}_b")
        out[layer] = {
            "w": float(np.abs(p[f"{layer}_w"]).max()),
            "b": None if b is None else float(np.abs(b).max()),
            "lo": float(cache[key].min()),
            "hi": float(cache[key].max()),
        }
    return out


def write_readme(results, two):
    """Writes models/README.md from the template below and the measured numbers."""
    rows = []
    for name, r in results.items():
        for layer, s in r["stats"].items():
            b = "-" if s["b"] is None else f"{s['b']:.3f}"
            rows.append(
                f"| `{name}` | {layer} | {s['w']:.3f} | {b} | [{s['lo']:.2f}, {s['hi']:.2f}] |"
            )
    acc = {n: f"{100 * r['acc']:.2f}%" for n, r in results.items()}
    sizes = {n: (OUT / f"{n}.onnx").stat().st_size / 1024 for n in results}
    st = results["cryptonets"]["stats"]
    sl = results["lola_small"]["stats"]
    text = README.format(
        acc_sq=acc["cryptonets"],
        acc_relu=acc["cryptonets_relu"],
        acc_lola=acc["lola_small"],
        kb_sq=sizes["cryptonets"],
        kb_relu=sizes["cryptonets_relu"],
        kb_lola=sizes["lola_small"],
        sq1=max(st["conv"]["lo"] ** 2, st["conv"]["hi"] ** 2),
        sq2=max(st["fc1"]["lo"] ** 2, st["fc1"]["hi"] ** 2),
        sq_lola=max(sl["conv"]["lo"] ** 2, sl["conv"]["hi"] ** 2),
        rows="\n".join(rows),
        acc_a=f"{100 * two['mnist_a']['acc']:.2f}%",
        acc_d=f"{100 * two['mnist_d']['acc']:.2f}%",
        kb_a=(OUT / "mnist_a.onnx").stat().st_size / 1024,
        kb_d=(OUT / "mnist_d.onnx").stat().st_size / 1024,
        acc_fx=f"{100 * two['features_extractor']['acc']:.2f}%",
        acc_fc=f"{100 * two['features_classifier']['acc']:.2f}%",
    )
    (OUT / "README.md").write_text(text)


README = """# Bundled models

Five small networks for encrypted inference tests and benchmarks, trained on scikit-learn's
handwritten digits. Generated by `models/train.py` (numpy only, fixed seeds; networks A and D
by `models/twoparty.py`, the deep-feature pair by `models/deep_features.py`, which it calls);
this file is written by the script too.

| file | test accuracy | size |
|---|---|---|
| `cryptonets.onnx` | {acc_sq} | {kb_sq:.0f} KiB |
| `cryptonets_relu.onnx` | {acc_relu} | {kb_relu:.0f} KiB |
| `lola_small.onnx` | {acc_lola} | {kb_lola:.0f} KiB |
| `mnist_a.onnx` | {acc_a} | {kb_a:.0f} KiB |
| `mnist_d.onnx` | {acc_d} | {kb_d:.0f} KiB |
| `features_extractor.onnx` (digits 0–4, with its dropped head) | {acc_fx} | 6 KiB |
| `features_classifier.onnx` (held-out digits 5–9, on the extractor's features) | {acc_fc} | 2 KiB |
| `digits_test.npz` | `x` float32 (360, 1, 28, 28), `y` int64 (360,) | |

Accuracies are on the 360 test images; onnxruntime gives the same predictions (logits agree
with the numpy model to within 1e-5 relative). Training all five takes about a minute on
2 cores (the script prints the time).

## Architectures

Input `input` float32 `[batch, 1, 28, 28]` with values in [0, 1]; output `logits` float32
`[batch, 10]` (no softmax). ONNX opset 17, IR version 8.

- **CryptoNets** (`cryptonets.onnx`, nGraph-HE2 Appendix A.1, no biases anywhere):
  `Conv` 1→5 channels, 5×5 kernel, stride 2, padding 1 on each side (→ 5×13×13 = 845) →
  x² (`Mul` of a tensor with itself) → `Flatten` → `Gemm` 845→100 → x² → `Gemm` 100→10.
  Multiplicative depth 5 in CKKS levels: 3 layers of plaintext weights and 2 squares.
- **CryptoNets-ReLU** (`cryptonets_relu.onnx`, biases on every layer): the same with `Relu`
  instead of x².
- **LoLa-Small** (`lola_small.onnx`, LoLa paper Section 3, no biases anywhere): the same
  `Conv` as CryptoNets (→ 845) → x² → `Flatten` → `Gemm` 845→10, i.e. CryptoNets without the
  hidden layer. Multiplicative depth 3: 2 layers of plaintext weights and 1 square. Less
  accurate than the others here (the paper reports 96.92% on MNIST; on these 1437 training
  digits other seeds give 93–96%).

- **Network A** (`mnist_a.onnx`, GAZELLE §8 Table 11, from SecureML; biases everywhere):
  `Flatten` → `Gemm` 784→128 → x² → `Gemm` 128→128 → x² → `Gemm` 128→10.
- **Network D** (`mnist_d.onnx`, GAZELLE §8 Table 11, MiniONN's MNIST net; biases everywhere):
  `Conv` 1→16 5×5 (no padding, → 16×24×24) → `Relu` → `MaxPool` 2×2 → `Conv` 16→16 5×5
  (→ 16×8×8) → `Relu` → `MaxPool` 2×2 → `Flatten` (256) → `Gemm` 256→100 → `Relu` →
  `Gemm` 100→10.
- **Deep features** (LoLa §5; `features_extractor.onnx` + `features_classifier.onnx`): the
  public extractor, trained on the digits 0–4 with a 5-way head that is then dropped, is
  `Conv` 1→8 5×5 stride 2 (→ 8×12×12) → `Relu` → `MaxPool` 2×2 → `Conv` 8→16 3×3 (→ 16×4×4)
  → `Relu` → `MaxPool` 2×2 → `Flatten`: output `features` `[batch, 64]`. The private
  classifier, trained on the features of the training digits 5–9, is `Gemm` 64→5 (input
  `input` `[batch, 64]`, output `logits` `[batch, 5]`; class `j` is digit `5 + j`).

GAZELLE's networks B and C are CryptoNets and CryptoNets-ReLU above.
`Gemm` nodes use `transB=1` with weights of shape (out, in); `Flatten` is channel-major.

## Data

`sklearn.datasets.load_digits` (1797 images, 8×8, values 0..16; it ships with scikit-learn, so
nothing is downloaded). Each image is upscaled to 28×28 by bilinear interpolation
(`scipy.ndimage.zoom(img, 3.5, order=1)`), divided by 16 and stored as float32. Split:
`train_test_split(test_size=0.2, stratify=labels, random_state=0)` → 1437 train / 360 test.

## Training

Hand-written forward/backward (`models/layers.py`, im2col for the convolution), softmax
cross-entropy, Adam (lr 1e-3), batch 32, 30 epochs per model. x² networks are unstable to
train, so CryptoNets and LoLa-Small start from a small Gaussian init (std 0.5/√fan_in) and
clip the global gradient norm at 1; CryptoNets-ReLU uses He init. Each model has its own
seed (1, 2, 3). Networks A and D (`models/sequential.py`: generic layers, the gradients checked
by finite differences before training) follow the same recipe: A with the small init and
clipping (30 epochs, seed 4), D with He init (20 epochs, seed 5).

## Ranges (for choosing CKKS scales)

Max |weight|, max |bias| and the min/max over the 360 test images of each layer's output
before its activation (`fc2`, and `fc` in LoLa-Small, is the logits):

| model | layer | max \\|w\\| | max \\|b\\| | pre-activation range |
|---|---|---|---|---|
{rows}

In CryptoNets the squares make the values after each activation reach the square of the
largest |pre-activation| (about {sq1:.1f} after the conv and {sq2:.0f} after `fc1`; in LoLa-Small
about {sq_lola:.1f} after the conv).

## Regenerating

```sh
.venv/bin/python models/train.py
```

The result is deterministic for a given numpy/BLAS build; a different BLAS can change the
last bits of the weights, and so the files, but not the architectures or, in practice, the
accuracies.
"""


def main():
    """Trains, exports and verifies the models, then writes the test set and the README."""
    x_tr, x_te, y_tr, y_te = load_data()
    print(f"data: {len(x_tr)} train / {len(x_te)} test, x in [{x_tr.min()}, {x_tr.max()}]")
    np.savez_compressed(OUT / "digits_test.npz", x=x_te, y=y_te)
    start = time.perf_counter()
    results = {}
    for name, (act, bias, hidden, lr, epochs, clip, seed) in CONFIGS.items():
        print(f"{name}:")
        p = train(x_tr, y_tr, act, bias, hidden, lr, epochs, clip, seed)
        logits, cache = reference(p, x_te, act)
        path = OUT / f"{name}.onnx"
        export_onnx(p, act, name, path)
        ort_logits, err = verify_onnx(path, x_te, logits)
        acc = float((logits.argmax(1) == y_te).mean())
        ort_acc = float((ort_logits.argmax(1) == y_te).mean())
        assert acc == ort_acc, f"{name}: accuracy numpy {acc} != onnxruntime {ort_acc}"
        stats = layer_stats(p, cache, logits)
        results[name] = {"acc": acc, "stats": stats}
        print(f"  onnxruntime vs numpy: max rel. logit error {err:.1e}")
        for layer, s in stats.items():
            b = "" if s["b"] is None else f"  max|b| {s['b']:.3f}"
            print(
                f"  {layer:4s} max|w| {s['w']:.3f}{b}  pre-activation [{s['lo']:.3f}, {s['hi']:.3f}]"
            )
    two = twoparty.train_all(x_tr, y_tr, x_te, y_te, OUT, verify_onnx)
    two.update(deep_features.train_all(x_tr, y_tr, x_te, y_te, OUT))
    seconds = time.perf_counter() - start
    write_readme(results, two)
    print(f"training + export: {seconds:.1f} s")
    for name, r in {**results, **two}.items():
        print(f"test accuracy {name}: {100 * r['acc']:.2f}%")


if __name__ == "__main__":
    main()
