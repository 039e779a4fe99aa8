"""PyTorch modules through both of torch's ONNX exporters, encrypted in both modes.

Skipped when torch (or onnxscript, which torch's default exporter needs) is absent:
``make test-torch`` installs both and runs this module. Each network is exported by the
legacy (TorchScript) and the ``torch.export`` (dynamo) exporter, compiled, run encrypted and
compared with PyTorch's own outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")

import heinfer  # noqa: E402
from heinfer.compiler.onnx_import import TORCH_EXPORTERS, from_torch  # noqa: E402
from heinfer.errors import CompileError  # noqa: E402

nn = torch.nn


class Chain(nn.Module):
    """conv → ReLU → average pool → flatten (``x.view``) → dense: a chain CNN."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=1, padding=1)
        self.pool = nn.AvgPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        return self.fc(x.view(x.size(0), -1))


class Residual(nn.Module):
    """A basic residual block (two convs, a skip ``Add``) → global average pool → dense."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(1, 4, 3, padding=1)
        self.c1 = nn.Conv2d(4, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        y = torch.relu(self.c2(torch.relu(self.c1(h))) + h)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Depthwise(nn.Module):
    """MobileNet's pattern: depthwise conv → ReLU6 → pointwise conv → global pool → dense."""

    def __init__(self) -> None:
        super().__init__()
        self.expand = nn.Conv2d(1, 6, 1)
        self.dw = nn.Conv2d(6, 6, 3, stride=2, padding=1, groups=6)
        self.pw = nn.Conv2d(6, 4, 1)
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = nn.functional.relu6(self.dw(nn.functional.relu6(self.expand(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.pw(x), 1), 1))


NETS = {"chain": Chain, "residual": Residual, "depthwise": Depthwise}


def _net(name: str):
    torch.manual_seed(7)
    return NETS[name]().eval()


def _inputs(n: int) -> np.ndarray:
    return np.random.default_rng(3).uniform(0, 1, (n, 1, 8, 8)).astype(np.float32)


@pytest.mark.parametrize("mode", ["throughput", "latency"])
@pytest.mark.parametrize("exporter", TORCH_EXPORTERS)
@pytest.mark.parametrize("name", list(NETS))
def test_both_exporters_compile_and_match_pytorch(name: str, exporter: str, mode: str) -> None:
    net = _net(name)
    x = _inputs(16)
    graph = from_torch(net, torch.from_numpy(x[:2]), exporter=exporter)
    prog = heinfer.compile(graph, mode=mode, calibration=x)
    n = 2 if mode == "latency" else 16
    got = heinfer.infer(prog, x[:n]).outputs
    with torch.no_grad():
        want = net(torch.from_numpy(x[:n])).numpy()
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-3 * max(np.abs(want).max(), 1.0)
    assert (got.argmax(1) == want.argmax(1)).all()


def test_compile_takes_a_module_and_picks_an_exporter() -> None:
    net = _net("chain")
    x = _inputs(8)
    prog = heinfer.compile(net, example_input=torch.from_numpy(x[:1]), calibration=x)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    assert (heinfer.infer(prog, x).outputs.argmax(1) == want.argmax(1)).all()
    assert net.training is False


def test_a_failing_exporter_falls_back_and_both_failing_name_both(monkeypatch) -> None:
    import heinfer.compiler.onnx_import as imp

    real = imp._export
    x = torch.from_numpy(_inputs(1))

    def no_onnxscript(module, example, dynamo):
        if dynamo:
            raise ModuleNotFoundError("No module named 'onnxscript'")
        return real(module, example, dynamo)

    monkeypatch.setattr(imp, "TORCH_EXPORTERS", ("dynamo", "legacy"))
    monkeypatch.setattr(imp, "_export", no_onnxscript)
    assert from_torch(_net("chain"), x).ops  # the legacy exporter's graph

    def broken(module, example, dynamo):
        raise RuntimeError("unsupported operator" if dynamo else "tracing failed")

    monkeypatch.setattr(imp, "_export", broken)
    with pytest.raises(CompileError, match="dynamo exporter: RuntimeError: unsupported operator.*legacy exporter: RuntimeError: tracing failed"):
        from_torch(_net("chain"), x)
    with pytest.raises(CompileError, match="unknown torch exporter"):
        from_torch(_net("chain"), x, exporter="jit")


def test_the_training_flag_is_restored() -> None:
    net = _net("chain").train()
    from_torch(net, torch.from_numpy(_inputs(1)), exporter="legacy")
    assert net.training is True
