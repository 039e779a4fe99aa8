"""Fixtures of the service tests: programs compiled once, running services, raw gRPC calls,
and a throwaway certificate authority.

Programs: the bundled CryptoNets-ReLU (throughput mode, two client-aided ReLU rounds) for the
end-to-end checks, a tiny ReLU MLP (one round, milliseconds per query) for limits and bad
input, and a tiny network with squares (needs a 2 MB relinearization key) for key uploads.
Certificates are made at test time with the ``openssl`` command line (tests that need them
skip when it is absent); no private key is ever committed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import heinfer
import numpy as np
import pytest
from compiler import onnx_models as om
from heinfer.program import Program
from heinfer.protocol import Client
from heinfer.serve import Limits, ServiceHandle, serve, wire
from heinfer.serve.parts import Assembler, split
from heinfer.v1 import service_pb2 as pb
from heinfer.serve.rpc import InferenceStub

ROOT = Path(__file__).resolve().parents[3]
#: Limits of most tests: small parts (so that every message spans several parts) and short
#: timeouts (so that expiry tests are quick).
SMALL = Limits(max_part_bytes=16 << 10, idle_timeout_s=30.0, query_timeout_s=10.0)
#: Part size of the raw calls.
PART = 16 << 10


# ---------------------------------------------------------------------------------- programs
@pytest.fixture(scope="session")
def cryptonets(digits) -> Program:
    """CryptoNets-ReLU compiled in throughput mode (the server's program)."""
    x, _ = digits
    return heinfer.compile(
        str(ROOT / "models" / "cryptonets_relu.onnx"), mode="throughput", calibration=x[:64]
    )


@pytest.fixture(scope="session")
def cryptonets_reference(cryptonets, digits) -> heinfer.InferenceResult:
    """In-process inference of every held-out digit (the reference of the remote runs)."""
    return heinfer.infer(cryptonets, digits[0])


@pytest.fixture(scope="session")
def mlp() -> Program:
    """A tiny 8 → 16 → ReLU → 4 network: one client-aided round, milliseconds a query."""
    return heinfer.compile(om.mlp((8, 16, 4), act="relu", seed=1), calibration=mlp_input(64, 11))


@pytest.fixture(scope="session")
def mlp_other() -> Program:
    """The same shapes and parameters as ``mlp`` with other weights."""
    return heinfer.compile(om.mlp((8, 16, 4), act="relu", seed=2), calibration=mlp_input(64, 11))


def mlp_input(n: int = 5, seed: int = 3) -> np.ndarray:
    """``n`` inputs of the tiny networks."""
    return om.random_input((8,), n, seed=seed)


# ---------------------------------------------------------------------------------- services
@pytest.fixture
def start() -> Iterator[Callable[..., ServiceHandle]]:
    """``start(program, **serve_kwargs)``: a running service, stopped after the test."""
    handles: list[ServiceHandle] = []

    def _start(program: Program, **kwargs) -> ServiceHandle:
        kwargs.setdefault("limits", SMALL)
        h = serve(program, "127.0.0.1:0", **kwargs)
        handles.append(h)
        return h

    yield _start
    for h in handles:
        h.stop()


def parts(message: bytes, kind: str, part_bytes: int = PART) -> list[pb.Part]:
    """The parts of a protocol message."""
    return list(split(message, kind, part_bytes))


def infer_requests(*messages: tuple[str, bytes]) -> list[pb.InferRequest]:
    """``Infer`` requests carrying ``(kind, message)`` pairs in parts."""
    return [pb.InferRequest(part=p) for kind, m in messages for p in parts(m, kind)]


def answer_step(responses, client: Client) -> bytes:
    """Reads the chunks of a step from a raw ``Infer`` call (one part each, or more) and
    returns ``client``'s whole reply to it."""
    a = Assembler({"step": 1 << 30}, 1 << 30)
    for response in responses:
        # a chunk that fits one part travels whole (read in place: wire.Typed), others in parts
        done = (None, response.data) if isinstance(response, wire.Typed) else a.feed(response.part)
        if done is not None:
            replies = client.receive_step(done[1])
            if replies is not None:
                (reply,) = replies
                return reply
    raise AssertionError("the stream ended before the step's last chunk")


@dataclass
class Raw:
    """Raw calls on a service through the generated stub: any parts, no client-side checks.
    ``session(client)`` opens a session and remembers its id and secret for later calls."""

    stub: InferenceStub
    metadata: list
    session_id: str = ""
    secret: str = ""

    def owner(self) -> list:
        """Metadata naming the remembered session and its secret."""
        return [(wire.SESSION_METADATA, self.session_id), (wire.SECRET_METADATA, self.secret)]

    def open_session(self, part_list, timeout: float = 10.0) -> pb.OpenSessionResponse:
        reqs = (pb.OpenSessionRequest(part=p) for p in part_list)
        return self.stub.OpenSession(reqs, timeout=timeout, metadata=self.metadata)

    def infer(self, requests, timeout: float = 10.0, metadata: list | None = None):
        """An ``Infer`` call; ``metadata`` defaults to the remembered session's."""
        md = self.owner() if metadata is None else metadata
        return self.stub.Infer(iter(requests), timeout=timeout, metadata=self.metadata + md)

    def close_session(self, session: str, secret: str | None = None, timeout: float = 10.0):
        md = [] if secret is None else [(wire.SECRET_METADATA, secret)]
        req = pb.CloseSessionRequest(session=session)
        return self.stub.CloseSession(req, timeout=timeout, metadata=self.metadata + md)

    def info(self, timeout: float = 10.0) -> pb.GetInfoResponse:
        return self.stub.GetInfo(pb.GetInfoRequest(), timeout=timeout, metadata=self.metadata)

    def session(self, client: Client) -> str:
        """Opens a session with ``client``'s keys; remembers and returns its id."""
        r = self.open_session(parts(client.keys_message(), "keys"))
        self.session_id, self.secret = r.session, r.secret
        return r.session


@pytest.fixture
def raw() -> Iterator[Callable[..., Raw]]:
    """``raw(handle, token=None, limits=SMALL)``: raw calls on a service (channel closed after)."""
    channels: list[grpc.Channel] = []

    def _raw(handle: ServiceHandle, token: str | None = None, limits: Limits = SMALL) -> Raw:
        ch = grpc.insecure_channel(handle.address, options=wire.channel_options(limits))
        channels.append(ch)
        return Raw(
            InferenceStub(ch), [] if token is None else [("authorization", f"Bearer {token}")]
        )

    yield _raw
    for ch in channels:
        ch.close()


# ---------------------------------------------------------------------------------- TLS
@dataclass
class Pki:
    """A throwaway CA, a server certificate for localhost/127.0.0.1, a client certificate,
    and a second CA that signed nothing here (all PEM file paths)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _make_ca(d: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "1", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )  # fmt: skip


def _make_cert(d: Path, name: str, ext: str) -> None:
    (d / f"{name}.ext").write_text(ext)
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=d,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext",
        cwd=d,
    )  # fmt: skip


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Certificates made now with ``openssl`` (skips the test when it is absent)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line is not installed")
    d = tmp_path_factory.mktemp("pki")
    os.chmod(d, 0o700)
    try:
        _make_ca(d, "ca")
        _make_ca(d, "other")
        _make_cert(
            d, "server", "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        )
        _make_cert(d, "client", "extendedKeyUsage=clientAuth\n")
    except (subprocess.SubprocessError, OSError) as e:
        pytest.skip(f"openssl could not make test certificates: {e}")
    return Pki(
        d / "ca.crt",
        d / "server.crt",
        d / "server.key",
        d / "client.crt",
        d / "client.key",
        d / "other.crt",
    )


# ---------------------------------------------------------------------------------- waiting
def wait_until(
    predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition"
) -> None:
    """Polls ``predicate`` until it holds (fails the test after ``timeout`` seconds)."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {timeout} s")
        time.sleep(0.02)


def assert_idle(handle: ServiceHandle, timeout: float = 5.0) -> None:
    """No query runs and the protocol server holds no query state (nothing leaked)."""
    wait_until(
        lambda: handle.stats()["queries_running"] == 0 and handle.stats()["query_states"] == 0,
        timeout,
        f"no running query and no query state ({handle.stats()})",
    )


def tolerance(program: Program) -> float:
    """How far two independent encrypted runs of ``program`` may differ: twice the
    compiler's predicted error plus twice the stated output precision (outputs are
    noise-flooded and rounded to it)."""
    return 2 * program.meta["predicted_error"][-1] + 2 * program.segments[-1].precision


def assert_served_like_in_process(handle: ServiceHandle, program: Program, x: np.ndarray) -> None:
    """A session on ``handle`` answers ``x`` as ``heinfer.infer`` does in one process (the
    same argmax, outputs within :func:`tolerance`)."""
    from heinfer.serve import connect

    with connect(handle.address, program.public(), limits=SMALL) as s:
        got = s.infer(x).outputs
    want = heinfer.infer(program, x).outputs
    assert np.array_equal(got.argmax(1), want.argmax(1))
    np.testing.assert_allclose(got, want, atol=tolerance(program))
