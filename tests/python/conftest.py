"""Shared fixtures: keys are built once per session per parameter set.

Fast tests use the INSECURE_* presets (no security, small rings); one fixture uses the real
128-bit preset PN13_QP218 so that at least one path runs at production parameters.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import heinfer
import numpy as np
import pytest
from heinfer import ckks
from hypothesis import settings

ROTATIONS = (1, 2, 3, 5, -1, -7, 100)

# CI runs the property tests on a fixed seed sequence (reproducible, never flaky); local runs
# explore new examples each time.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="run @slow tests")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (make test runs them)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@dataclass
class Kit:
    """Keys and tools for one parameter set."""

    params: ckks.CkksParameters
    kg: ckks.KeyGenerator = field(init=False)
    pk: ckks.PublicKey = field(init=False)
    rlk: ckks.RelinKey = field(init=False)
    gks: ckks.GaloisKeys = field(init=False)
    enc: ckks.Encoder = field(init=False)
    ev: ckks.Evaluator = field(init=False)
    encryptor: ckks.Encryptor = field(init=False)
    decryptor: ckks.Decryptor = field(init=False)

    def __post_init__(self) -> None:
        p = self.params
        self.kg = ckks.KeyGenerator(p)
        self.pk = self.kg.public_key()
        self.rlk = self.kg.relin_key()
        self.gks = self.kg.galois_keys(ROTATIONS, conjugate=True)
        self.enc = ckks.Encoder(p)
        self.ev = ckks.Evaluator(p)
        self.encryptor = ckks.Encryptor(p, self.pk)
        self.decryptor = ckks.Decryptor(p, self.kg.secret_key)

    @property
    def name(self) -> str:
        p = self.params
        return f"logN={p.log_n}/L={p.max_level}"

    def vector(self, seed: int, complex_: bool = False) -> np.ndarray:
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, self.params.slots)
        if complex_:
            return x + 1j * rng.uniform(-1, 1, self.params.slots)
        return x

    def encrypt(self, x: np.ndarray, level: int | None = None) -> ckks.Ciphertext:
        return self.encryptor.encrypt(self.enc.encode(x, level=level))

    def decrypt(self, ct: ckks.Ciphertext, real: bool = True) -> np.ndarray:
        return self.enc.decode(self.decryptor.decrypt(ct), real=real)


def precision_bits(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(min, mean) bits of precision: −log2 of the max and of the mean absolute error."""
    err = np.abs(np.asarray(got) - np.asarray(want))
    return float(-np.log2(max(err.max(), 2.0**-60))), float(-np.log2(max(err.mean(), 2.0**-60)))


def assert_precision(label: str, got: np.ndarray, want: np.ndarray, floor: float) -> None:
    lo, mean = precision_bits(got, want)
    print(f"{label}: min {lo:.1f} bits, mean {mean:.1f} bits (floor {floor})")
    assert lo >= floor, f"{label}: {lo:.1f} bits < floor {floor}"


@pytest.fixture(scope="session")
def kit10() -> Kit:
    return Kit(ckks.INSECURE_LOGN10())


@pytest.fixture(scope="session")
def kit12() -> Kit:
    return Kit(ckks.INSECURE_LOGN12())


@pytest.fixture(scope="session")
def kit13() -> Kit:
    """Real 128-bit parameters."""
    return Kit(ckks.PN13_QP218())


@pytest.fixture(params=["kit10", "kit12"])
def kit(request: pytest.FixtureRequest) -> Kit:
    """Both insecure test sets (α = 2 and α = 1 key switching)."""
    return request.getfixturevalue(request.param)


@pytest.fixture
def restore_threads():
    n = heinfer.get_num_threads()
    yield
    heinfer.set_num_threads(n)


@pytest.fixture(scope="session")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """The held-out digits ``(x, y)`` of ``models/digits_test.npz``."""
    d = np.load(os.path.join(os.path.dirname(__file__), "..", "..", "models", "digits_test.npz"))
    return d["x"], d["y"]


@pytest.fixture(scope="session")
def squares() -> heinfer.Program:
    """Gemm → x² → Gemm → x² → Gemm → ReLU → Gemm: needs a relinearization key (the service
    and cluster tests)."""
    from compiler import onnx_models as om

    return heinfer.compile(om.squares_then_relu(), calibration=om.random_input((8,), 64, seed=11))
