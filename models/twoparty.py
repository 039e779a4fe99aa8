"""The MNIST networks A and D of GAZELLE's evaluation (§8, Table 11), trained on the digits.

Called by ``models/train.py`` (``make models``); writes next to this file:

- ``mnist_a.onnx``  network A (SecureML): Flatten → Gemm 784→128 → x² → Gemm 128→128 → x² →
  Gemm 128→10, with biases.
- ``mnist_d.onnx``  network D (MiniONN's MNIST net): Conv 1→16 5×5 → ReLU → MaxPool 2×2 →
  Conv 16→16 5×5 → ReLU → MaxPool 2×2 → Flatten (256) → Gemm 256→100 → ReLU → Gemm 100→10,
  with biases.

Networks B and C of the same table are the bundled ``cryptonets.onnx`` and
``cryptonets_relu.onnx``. Same data, optimiser and batch as ``train.py``.
"""

import numpy as np
from onnx import numpy_helper

import layers as L
import sequential as S

BATCH = 32


def network_a(rng):
    """Network A with its layer names; x² networks start small (see ``layers.init_params``)."""
    net = [
        S.Flatten(),
        S.Dense(rng, 784, 128, gain=0.5),
        S.Square(),
        S.Dense(rng, 128, 128, gain=0.5),
        S.Square(),
        S.Dense(rng, 128, 10, gain=0.5),
    ]
    return net, ["flatten", "fc1", "act1", "fc2", "act2", "fc3"]


def network_d(rng):
    """Network D (MiniONN) with its layer names, He initialisation."""
    net = [
        S.Conv(rng, 1, 16, 5),
        S.Relu(),
        S.MaxPool(2),
        S.Conv(rng, 16, 16, 5),
        S.Relu(),
        S.MaxPool(2),
        S.Flatten(),
        S.Dense(rng, 256, 100),
        S.Relu(),
        S.Dense(rng, 100, 10),
    ]
    names = ["conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc1", "relu3", "fc2"]
    return net, names


# name -> (builder, learning rate, epochs, gradient-norm clip, seed)
CONFIGS = {
    "mnist_a": (network_a, 1e-3, 30, 1.0, 4),
    "mnist_d": (network_d, 1e-3, 20, None, 5),
}


def check_gradients(build, x, y, seed=0):
    """Finite differences against back-propagation on a few parameters (float64)."""
    net, names = build(np.random.default_rng(seed))
    params = S.named_params(net, names)
    loss, dlogits = L.softmax_xent(S.forward(net, x), y)
    S.backward(net, dlogits)
    grads = S.named_grads(net, names)
    rng = np.random.default_rng(seed)
    for key, p in params.items():
        for idx in rng.choice(p.size, size=3, replace=False):
            flat = p.reshape(-1)
            old, eps = flat[idx], 1e-6
            flat[idx] = old + eps
            up = L.softmax_xent(S.forward(net, x), y)[0]
            flat[idx] = old - eps
            down = L.softmax_xent(S.forward(net, x), y)[0]
            flat[idx] = old
            numeric = (up - down) / (2 * eps)
            exact = grads[key].reshape(-1)[idx]
            assert abs(numeric - exact) <= 1e-5 * max(1.0, abs(numeric)), (key, numeric, exact)


def train(build, x, y, lr, epochs, clip, seed):
    """Mini-batch Adam on softmax cross-entropy; returns the network and its layer names."""
    rng = np.random.default_rng(seed)
    net, names = build(rng)
    params = S.named_params(net, names)
    opt = L.Adam(params, lr, clip)
    x = x.astype(np.float64)
    for epoch in range(epochs):
        order = rng.permutation(len(x))
        total = 0.0
        for i in range(0, len(x), BATCH):
            idx = order[i : i + BATCH]
            loss, dlogits = L.softmax_xent(S.forward(net, x[idx]), y[idx])
            S.backward(net, dlogits)
            opt.step(params, S.named_grads(net, names))
            total += loss * len(idx)
        if epoch % 10 == 9 or epoch == epochs - 1:
            print(f"  epoch {epoch + 1:3d}  train loss {total / len(x):.4f}")
    for layer in net:  # the exported weights are float32: evaluate what is exported
        for k, v in layer.params.items():
            layer.params[k] = v.astype(np.float32).astype(np.float64)
    return net, names


def export_onnx(net, names, model_name, path):
    """Writes ``net`` as an opset-17 ONNX model (input ``input``, output ``logits``)."""
    nodes, src = [], "input"
    for i, (layer, name) in enumerate(zip(net, names)):
        dst = "logits" if i == len(net) - 1 else name
        nodes += layer.onnx(name, src, dst)
        src = dst
    inits = [
        numpy_helper.from_array(v.astype(np.float32), k)
        for k, v in S.named_params(net, names).items()
    ]
    doc = f"{model_name}: GAZELLE Table 11 network on digits 28x28, logits output"
    L.save_model(nodes, inits, model_name, path, "heinfer models/twoparty.py", doc)


def train_all(x_tr, y_tr, x_te, y_te, out, verify_onnx):
    """Trains, exports and verifies A and D; returns ``{name: {"acc": float}}``."""
    check_gradients(network_a, x_tr[:4].astype(np.float64), y_tr[:4])
    check_gradients(network_d, x_tr[:2].astype(np.float64), y_tr[:2])
    results = {}
    for name, (build, lr, epochs, clip, seed) in CONFIGS.items():
        print(f"{name}:")
        net, names = train(build, x_tr, y_tr, lr, epochs, clip, seed)
        logits = S.forward(net, x_te.astype(np.float64))
        path = out / f"{name}.onnx"
        export_onnx(net, names, name, path)
        ort_logits, err = verify_onnx(path, x_te, logits)
        acc = float((logits.argmax(1) == y_te).mean())
        assert acc == float((ort_logits.argmax(1) == y_te).mean()), name
        print(f"  onnxruntime vs numpy: max rel. logit error {err:.1e}; accuracy {100 * acc:.2f}%")
        results[name] = {"acc": acc}
    return results
