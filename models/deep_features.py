"""Deep features (LoLa §5): a public feature extractor and a private classifier on its features.

Called by ``models/train.py`` (``make models``); writes next to this file:

- ``features_extractor.onnx``  a small CNN trained on the digits **0–4** (with a 5-way head that
  is dropped): Conv 1→8 5×5 stride 2 → ReLU → MaxPool 2×2 → Conv 8→16 3×3 → ReLU → MaxPool
  2×2 → Flatten: 64 features per image. Public: the client runs it in the clear (onnxruntime).
- ``features_classifier.onnx``  the server's private classifier, trained on the extractor's
  features of the digits **5–9** (labels 0–4 stand for 5–9): Gemm 64→5 (a linear classifier,
  as LoLa's on AlexNet features), so it runs on encrypted features with no client step.

Same data split, optimiser and batch as ``train.py``; the accuracies are printed and written to
``README.md`` by ``train.py``.
"""

import numpy as np

import layers as L
import sequential as S
import twoparty as T

FEATURES = 64


def extractor(rng):
    """The extractor and its 5-way training head, with layer names."""
    net = [
        S.Conv(rng, 1, 8, 5, stride=2),
        S.Relu(),
        S.MaxPool(2),
        S.Conv(rng, 8, 16, 3),
        S.Relu(),
        S.MaxPool(2),
        S.Flatten(),
        S.Dense(rng, FEATURES, 5),
    ]
    return net, ["conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "head"]


def classifier(rng):
    """The private linear classifier on the features."""
    return [S.Dense(rng, FEATURES, 5, gain=1.0)], ["fc"]


def _export(net, names, path, model_name, in_shape, out):
    nodes, src = [], "input"
    for i, (layer, name) in enumerate(zip(net, names)):
        dst = out[0] if i == len(net) - 1 else name
        nodes += layer.onnx(name, src, dst)
        src = dst
    inits = [T.numpy_helper.from_array(v.astype(np.float32), k) for k, v in S.named_params(net, names).items()]
    doc = f"{model_name}: LoLa §5 deep features on digits 28x28"
    L.save_model(nodes, inits, model_name, path, "heinfer models/deep_features.py", doc, in_shape, out)


def verify(path, x, want):
    """The exported model under onnxruntime against numpy (relative error below 1e-5)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": x.astype(np.float32)})[0]
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 1e-5, f"{path.name}: onnxruntime differs from numpy (rel. {err:.2e})"


def train_all(x_tr, y_tr, x_te, y_te, out):
    """Trains and exports both models; returns their held-out accuracies."""
    lo_tr, lo_te = y_tr < 5, y_te < 5
    print("features_extractor (digits 0-4):")
    net, names = T.train(extractor, x_tr[lo_tr], y_tr[lo_tr], 1e-3, 15, None, 6)
    head_acc = float((S.forward(net, x_te[lo_te].astype(np.float64)).argmax(1) == y_te[lo_te]).mean())
    feats = net[:-1]
    _export(feats, names[:-1], out / "features_extractor.onnx", "features_extractor", (1, L.IN_HW, L.IN_HW), ("features", FEATURES))
    f_tr = S.forward(feats, x_tr[~lo_tr].astype(np.float64))
    f_te = S.forward(feats, x_te[~lo_te].astype(np.float64))
    verify(out / "features_extractor.onnx", x_te[~lo_te], f_te)
    print("features_classifier (features of digits 5-9):")
    clf, cnames = T.train(classifier, f_tr, y_tr[~lo_tr] - 5, 3e-3, 40, None, 7)
    logits = S.forward(clf, f_te)
    _export(clf, cnames, out / "features_classifier.onnx", "features_classifier", (FEATURES,), ("logits", 5))
    verify(out / "features_classifier.onnx", f_te.astype(np.float32), logits)
    acc = float((logits.argmax(1) == y_te[~lo_te] - 5).mean())
    print(f"  extractor head on held-out 0-4: {100 * head_acc:.2f}%; classifier on held-out 5-9: {100 * acc:.2f}%")
    return {"features_extractor": {"acc": head_acc}, "features_classifier": {"acc": acc}}


if __name__ == "__main__":
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    import train

    x_tr, x_te, y_tr, y_te = train.load_data()
    train_all(x_tr, y_tr, x_te, y_te, here)
