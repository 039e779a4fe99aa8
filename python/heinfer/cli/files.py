"""Files, secrets and errors of the command line (layer: ``heinfer.cli``).

Everything here turns a user's mistake (a missing file, an array of the wrong kind, an empty
token) into a :class:`CliError` with a one-line message; :func:`error_line` does the same for
heinfer and gRPC exceptions. ``heinfer`` prints ``error: <message>`` and exits with
:data:`EXIT_FAILURE` (or :data:`EXIT_USAGE` for unsupported requests), never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
from typing import Any

import click
import numpy as np

from heinfer.errors import HeinferError, NotSupportedYetError
from heinfer.program.model import Program, PublicProgram

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "TOKEN_ENV",
    "CliError",
    "check_writable",
    "error_line",
    "load_array",
    "load_client_program",
    "load_program",
    "load_server_program",
    "read_pem",
    "read_token",
    "to_json",
    "write_atomic",
]

#: Exit status of a failed command (bad file, server down, protocol error).
EXIT_FAILURE = 1
#: Exit status of a request the program cannot serve (usage error, feature not supported yet);
#: the same status click gives its own usage errors.
EXIT_USAGE = 2
#: Environment variable read for the shared token when no ``--token-file`` is given.
TOKEN_ENV = "HEINFER_TOKEN"
#: Largest token file read (a token is a short secret, not a document).
MAX_TOKEN_BYTES = 4096


class FiniteFloat(click.ParamType):
    """A finite float at least ``low`` (above it with ``open_low``): ``inf`` and ``nan``, which
    ``click.FloatRange`` lets through, are usage errors naming the option."""

    name = "float"

    def __init__(self, low: float, open_low: bool = False) -> None:
        self.low, self.open_low = low, open_low

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(v) or v < self.low or (self.open_low and v == self.low):
            bound = f"above {self.low:g}" if self.open_low else f"at least {self.low:g}"
            self.fail(f"{value!r} is not a finite number {bound}", param, ctx)
        return v


class CliError(Exception):
    """A user-facing failure: ``message`` is printed after ``error: ``; ``code`` is the exit
    status."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def error_line(e: BaseException) -> tuple[str, int] | None:
    """``(message, exit code)`` for an exception a user can cause, ``None`` for a bug.

    Covers :class:`CliError`, every :class:`~heinfer.errors.HeinferError` (named by its
    class), gRPC failures (named by their status code) and ``OSError`` (files, sockets).
    """
    if isinstance(e, CliError):
        return str(e), e.code
    if isinstance(e, NotSupportedYetError):
        return str(e), EXIT_USAGE
    code = getattr(e, "code", None)
    if isinstance(e, HeinferError) and isinstance(code, str):  # ServiceError: a gRPC status
        return f"{code.lower().replace('_', ' ')}: {e}", EXIT_FAILURE
    if isinstance(e, HeinferError):
        return f"{_words(type(e).__name__)}: {e}", EXIT_FAILURE
    grpc = sys.modules.get("grpc")
    if grpc is not None and isinstance(e, grpc.RpcError):
        code = e.code() if callable(getattr(e, "code", None)) else None
        details = e.details() if callable(getattr(e, "details", None)) else str(e)
        name = code.name.lower().replace("_", " ") if code is not None else "rpc failed"
        return f"{name}: {details}", EXIT_FAILURE
    if isinstance(e, OSError):
        if e.filename is not None and e.strerror:
            return f"{e.strerror}: {e.filename}", EXIT_FAILURE
        return str(e), EXIT_FAILURE
    return None


def _words(class_name: str) -> str:
    """``"SerializationError"`` → ``"serialization error"``."""
    out = "".join(" " + c.lower() if c.isupper() else c for c in class_name).strip()
    return out


def load_program(path: str) -> PublicProgram:
    """Reads and validates a compiled program of either kind (``.hep``: the server's
    :class:`~heinfer.Program`, or ``.public.hep``: a :class:`~heinfer.PublicProgram`)."""
    from heinfer.program import load

    return load(_read(path, "program"))


def _refuse_two_party(prog: object, path: str) -> None:
    from heinfer.program.two_party import TwoPartyProgram

    if isinstance(prog, TwoPartyProgram):
        raise CliError(
            f"{path!r} is a two-party program: it runs on the two-party service (heinfer serve and "
            "heinfer predict route it there), not on the CKKS one"
        )


def load_server_program(path: str) -> Program:
    """The server's CKKS program at ``path``; a public program (no weights) is refused, and so
    is a two-party program (the two-party service takes those)."""
    prog = load_program(path)
    _refuse_two_party(prog, path)
    if not isinstance(prog, Program):
        raise CliError(
            f"{path!r} is a public program (no weights): heinfer serve needs the server's "
            "program, the NAME.hep that heinfer compile wrote next to NAME.public.hep"
        )
    return prog


def load_client_program(path: str) -> PublicProgram:
    """The public program at ``path`` for a client. Given the server's program (with the
    weights) it prints a warning on stderr and keeps only the public part."""
    prog = load_program(path)
    _refuse_two_party(prog, path)
    if isinstance(prog, Program):
        click.echo(
            f"warning: {path!r} holds the model's weights (a server program); a client needs "
            "only the public program (NAME.public.hep from heinfer compile) — do not hand the "
            "weights to clients",
            err=True,
        )
        return prog.public()
    return prog


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise CliError(f"{what} file {path!r} does not exist") from None
    except IsADirectoryError:
        raise CliError(f"{what} file {path!r} is a directory") from None
    except OSError as e:
        raise CliError(f"cannot read {what} file {path!r}: {e.strerror or e}") from None


def load_array(path: str, key: str = "x", what: str = "input") -> np.ndarray:
    """A numeric array from ``.npy``, or from member ``key`` of an ``.npz`` (no pickles)."""
    head = _read_head(path, what)
    if not head.startswith((b"\x93NUMPY", b"PK\x03\x04")):
        raise CliError(f"{what} file {path!r} is not a .npy or .npz array file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise CliError(f"cannot read {what} file {path!r}: {e}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            if key not in loaded.files:
                raise CliError(
                    f"{what} file {path!r} has no array {key!r} (it has {loaded.files[:8]})"
                )
            arr = loaded[key]
    else:
        arr = loaded
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        raise CliError(
            f"{what} file {path!r} holds {getattr(arr, 'dtype', type(arr))}, not numbers"
        )
    return arr


def _read_head(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(8)
    except FileNotFoundError:
        raise CliError(f"{what} file {path!r} does not exist") from None
    except OSError as e:
        raise CliError(f"cannot read {what} file {path!r}: {e.strerror or e}") from None


def read_pem(path: str, kind: str, option: str) -> bytes:
    """The bytes of a PEM file given to ``option``, checked to hold a ``kind`` block
    (``"CERTIFICATE"``, ``"PRIVATE KEY"``: any ``-----BEGIN … PRIVATE KEY-----``)."""
    data = _read(path, f"{option}")
    if b"-----BEGIN " not in data or f"{kind}-----".encode() not in data:
        raise CliError(f"{option} {path!r} is not a PEM file holding a {kind.lower()}")
    return data


def read_token(token_file: str | None) -> str | None:
    """The shared token: from ``token_file`` (surrounding whitespace stripped), else from the
    environment variable :data:`TOKEN_ENV`, else ``None``. An empty token is refused."""
    if token_file is not None:
        data = _read(token_file, "token")
        if len(data) > MAX_TOKEN_BYTES:
            raise CliError(f"token file {token_file!r} is over {MAX_TOKEN_BYTES} bytes")
        try:
            token = data.decode().strip()
        except UnicodeDecodeError:
            raise CliError(f"token file {token_file!r} is not UTF-8 text") from None
        if not token:
            raise CliError(f"token file {token_file!r} is empty")
        return token
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def check_writable(path: str) -> None:
    """:class:`CliError` now, rather than after minutes of work, when ``path``'s directory does
    not exist or cannot be written (what :func:`write_atomic` will need)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"cannot write {path!r}: directory {directory!r} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CliError(f"cannot write {path!r}: directory {directory!r} is not writable")


def write_atomic(path: str, data: bytes) -> None:
    """Writes ``data`` to ``path`` through a temporary file in the same directory (a reader
    never sees half a file)."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".heinfer-", dir=directory)
    except OSError as e:
        raise CliError(f"cannot write {path!r}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise CliError(f"cannot write {path!r}: {e.strerror or e}") from None


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (tuple, set)):
        return list(v)
    return str(v)


def to_json(obj: Any) -> str:
    """One line of JSON (numpy scalars and arrays as plain numbers and lists)."""
    return json.dumps(obj, default=_plain)
