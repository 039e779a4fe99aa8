"""The inference API of heinfer: ``compile``, ``infer``, ``Client`` and ``Server``.

These names are the contract of the throughput-mode issue (ONNX or PyTorch model in,
encrypted batch predictions out); latency mode and the network service build on them. They
have **not landed yet**: every entry point raises :class:`heinfer.NotSupportedYetError`
naming what is missing, instead of returning a wrong or partial answer. The CKKS engine they
will run on is :mod:`heinfer.ckks`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from heinfer.errors import NotSupportedYetError

__all__ = ["compile", "infer", "Client", "Server"]


def _not_yet(what: str) -> NoReturn:
    raise NotSupportedYetError(
        f"{what} is not supported yet: encrypted inference (ONNX front end, compiler, "
        "batch-axis runtime, client-aided non-linear layers) is the next milestone; "
        "today heinfer provides the CKKS engine, heinfer.ckks"
    )


def compile(model: Any, mode: str = "throughput", **options: Any) -> NoReturn:  # noqa: A001
    """Compile an ONNX model (path or bytes) or a ``torch.nn.Module`` — not supported yet."""
    _not_yet("heinfer.compile")


def infer(program: Any, x: Any, **options: Any) -> NoReturn:
    """Run a compiled program on encrypted inputs — not supported yet."""
    _not_yet("heinfer.infer")


class Client:
    """The key owner's side of an encrypted query — not supported yet."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _not_yet("heinfer.Client")


class Server:
    """The evaluation side (evaluation keys only) — not supported yet."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _not_yet("heinfer.Server")
