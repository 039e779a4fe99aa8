"""The versioned byte format of programs (format 4; format 3 added ``keep`` to client functions, format 4 ``lanes``), canonical so that it can be hashed.

Layer: ``heinfer.program``. A file is ``b"HEPROG\\r\\n"``, a ``u16`` version (4), a ``u8``
kind (0 public, 1 full, 2 two-party public, 3 two-party full), a ``u64`` length of the body, then the body compressed with zlib.
The body is one *section* for a public program and two for a full one (public, then
weights). A section is ``u32`` length + JSON manifest (UTF-8, sorted keys, no spaces) and a
``u32`` count of arrays, each ``u16`` name length + name, ``u8`` dtype code, ``u8`` rank,
``u64`` per dimension, then the little-endian data; arrays sorted by name. The same program
always gives the same bytes, and the **program id** is the SHA-256 of the public section.

:func:`load` checks everything before building anything: magic, version (a format-1 archive
gets a message saying to recompile), kind, declared and inflated sizes (against
``max_bytes``; zip bombs are refused before inflating), dtype codes, shapes against lengths,
unused or missing arrays, JSON types; then the dataclasses validate the contents. Every
failure is a :class:`~heinfer.errors.SerializationError` naming the problem.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib

import numpy as np

from heinfer.errors import CompileError, SerializationError
from heinfer.program.codec import public_from_json, public_to_json, weights_from_json, weights_to_json
from heinfer.program.model import Program, PublicProgram
from heinfer.program.two_party import TwoPartyProgram
from heinfer.program.two_party_codec import (
    two_party_public_from_json,
    two_party_public_to_json,
    two_party_weights_from_json,
    two_party_weights_to_json,
)

__all__ = ["dump", "load", "program_id", "FORMAT_VERSION", "MAX_PROGRAM_BYTES", "MAX_INFLATED_BYTES"]

MAGIC = b"HEPROG\r\n"
FORMAT_VERSION = 4
#: Largest program file accepted by :func:`load` (compressed; 1 GiB), and largest inflated
#: body of a public program (no weights).
MAX_PROGRAM_BYTES = 1 << 30
#: Largest inflated body of a program with weights (16 GiB): a latency-mode layer keeps its
#: expanded diagonals (LoLa's CIFAR network: 1.08 GB, 60 MB compressed), which the server
#: holds in memory anyway.
MAX_INFLATED_BYTES = 1 << 34
#: Inflated body :func:`load` accepts per byte of its ``max_bytes`` (a caller reading an
#: untrusted file passes a small ``max_bytes``): 16 for a public program, 64 for one with
#: weights (diagonals full of zeros compress ~18×).
_RATIO = {False: 16, True: 64}
_DTYPES = {1: np.dtype("<i8"), 2: np.dtype("<f8"), 3: np.dtype("u1")}
_CODES = {v: k for k, v in _DTYPES.items()}
_HEAD = struct.Struct("<8sHBQ")


def _section(manifest: dict, arrays: dict[str, np.ndarray]) -> bytes:
    head = json.dumps(manifest, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    parts = [struct.pack("<I", len(head)), head, struct.pack("<I", len(arrays))]
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        dt = np.dtype(a.dtype).newbyteorder("<") if a.dtype.kind in "if" else a.dtype
        if dt not in _CODES:
            raise SerializationError(f"cannot write array {name!r} of dtype {a.dtype}")
        a = np.ascontiguousarray(a, dtype=dt)
        nb = name.encode()
        parts += [struct.pack("<HBB", len(nb), _CODES[dt], a.ndim), nb, struct.pack(f"<{a.ndim}Q", *a.shape), a.tobytes()]
    return b"".join(parts)


def program_id(program: PublicProgram | TwoPartyProgram) -> str:
    """SHA-256 (hex) of the canonical public section of ``program``."""
    if isinstance(program, TwoPartyProgram):
        return hashlib.sha256(_section(*two_party_public_to_json(program.public()))).hexdigest()
    return hashlib.sha256(_section(*public_to_json(program.public()))).hexdigest()


def _inflated_limit(full: bool, max_bytes: int = MAX_PROGRAM_BYTES) -> int:
    """Largest inflated body :func:`load` accepts for a file of at most ``max_bytes``: a
    program with weights (``full``) or a public one."""
    return min(max_bytes * _RATIO[full], MAX_INFLATED_BYTES if full else MAX_PROGRAM_BYTES)


def dump(program: PublicProgram | TwoPartyProgram) -> bytes:
    """The program as bytes: kind 0 public, 1 full, 2 two-party public, 3 two-party full.
    Raises :class:`SerializationError` for a program :func:`load` would refuse (over its size
    limits), rather than writing a file that cannot be read back."""
    if isinstance(program, TwoPartyProgram):
        body = _section(*two_party_public_to_json(program.public()))
        full = not program.is_public
        if full:
            body += _section(*two_party_weights_to_json(program))
        kind = 2 + int(full)
    else:
        body = _section(*public_to_json(program.public()))
        full = isinstance(program, Program)
        if full:
            body += _section(*weights_to_json(program))
        kind = int(full)
    what = "with weights" if full else "public"
    if len(body) > _inflated_limit(full):
        raise SerializationError(
            f"cannot write program: its body ({what}) is {len(body)} bytes, over the {_inflated_limit(full)} bytes a program may hold"
        )
    data = _HEAD.pack(MAGIC, FORMAT_VERSION, kind, len(body)) + zlib.compress(body, 6)
    if len(data) > MAX_PROGRAM_BYTES:
        raise SerializationError(
            f"cannot write program: {len(data)} bytes compressed ({what}), over the {MAX_PROGRAM_BYTES} bytes a program file may hold"
        )
    return data


def load(data: bytes, max_bytes: int = MAX_PROGRAM_BYTES) -> PublicProgram | TwoPartyProgram:
    """Validates and decodes a program: a :class:`Program`, a :class:`PublicProgram` or a
    :class:`~heinfer.program.two_party.TwoPartyProgram` (full or public)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SerializationError(f"a program is bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise SerializationError(f"program of {len(data)} bytes exceeds the limit of {max_bytes}")
    if data[:4] == b"PK\x03\x04":
        raise SerializationError("cannot read program: this is a format-1 program (heinfer 0.1); recompile the model with this version")
    if len(data) < _HEAD.size or data[:8] != MAGIC:
        raise SerializationError("cannot read program: not a heinfer program (bad magic)")
    _, version, kind, raw_len = _HEAD.unpack_from(data)
    if version != FORMAT_VERSION:
        raise SerializationError(f"cannot read program: format version {version}, this build reads {FORMAT_VERSION}; recompile the model")
    if kind not in (0, 1, 2, 3):
        raise SerializationError(f"cannot read program: unknown kind {kind}")
    limit = _inflated_limit(kind in (1, 3), max_bytes)
    if raw_len > limit:
        raise SerializationError(f"cannot read program: it inflates to {raw_len} bytes, over the limit of {limit}")
    try:
        z = zlib.decompressobj()
        body = z.decompress(data[_HEAD.size :], raw_len + 1)
        if len(body) != raw_len or not z.eof or z.unused_data:
            raise SerializationError("cannot read program: the compressed body does not match its declared length")
    except zlib.error as e:
        raise SerializationError(f"cannot read program: corrupted body ({e})") from None
    try:
        pub_m, pub_a, off = _read_section(body, 0)
        if kind >= 2:
            program = two_party_public_from_json(pub_m, _Tracked(pub_a))
            if kind == 3:
                w_m, w_a, off = _read_section(body, off)
                program = two_party_weights_from_json(program, w_m, _Tracked(w_a))
        else:
            program = public_from_json(pub_m, _Tracked(pub_a))
        if kind == 1:
            w_m, w_a, off = _read_section(body, off)
            program = weights_from_json(program, w_m, _Tracked(w_a))
        if off != len(body):
            raise SerializationError(f"cannot read program: {len(body) - off} trailing bytes")
        return program
    except SerializationError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError, CompileError, struct.error, OverflowError, MemoryError) as e:
        raise SerializationError(f"cannot read program: malformed content ({type(e).__name__}: {e})") from None


def _finite(text: str) -> float:
    """A manifest number: finite (``1e999`` parses to infinity, which no field may hold and
    which :func:`dump` could not write back)."""
    v = float(text)
    if not math.isfinite(v):
        raise SerializationError(f"cannot read program: the number {text[:40]!r} is not finite")
    return v


def _no_constant(text: str) -> float:
    """``NaN`` and ``Infinity``: not JSON, and no field holds them."""
    raise SerializationError(f"cannot read program: {text!r} where a number belongs")


def _read_section(body: bytes, off: int) -> tuple[dict, dict, int]:
    (n,) = struct.unpack_from("<I", body, off)
    off += 4
    if off + n > len(body):
        raise SerializationError("cannot read program: truncated manifest")
    manifest = json.loads(body[off : off + n].decode(), parse_float=_finite, parse_constant=_no_constant)
    if not isinstance(manifest, dict):
        raise SerializationError("cannot read program: the manifest is not an object")
    off += n
    (count,) = struct.unpack_from("<I", body, off)
    off += 4
    if count > (len(body) - off) // 4:
        raise SerializationError(f"cannot read program: {count} arrays cannot fit in {len(body) - off} bytes")
    arrays: dict[str, np.ndarray] = {}
    for _ in range(count):
        ln, code, ndim = struct.unpack_from("<HBB", body, off)
        off += 4
        name = body[off : off + ln].decode()
        off += ln
        if code not in _DTYPES or ndim > 4 or name in arrays:
            raise SerializationError(f"cannot read program: array {name!r} has dtype code {code}, rank {ndim} or a repeated name")
        shape = struct.unpack_from(f"<{ndim}Q", body, off)
        off += 8 * ndim
        dt = _DTYPES[code]
        nbytes = int(np.prod(shape, dtype=object)) * dt.itemsize
        if nbytes > len(body) - off:
            raise SerializationError(f"cannot read program: array {name!r} of shape {shape} overruns the body")
        arrays[name] = np.frombuffer(body, dtype=dt, count=nbytes // dt.itemsize, offset=off).reshape(shape).astype(dt.newbyteorder("="))
        off += nbytes
    return manifest, arrays, off


class _Tracked(dict):
    """Arrays of a section; :meth:`done` refuses members the manifest did not use."""

    def __init__(self, arrays: dict) -> None:
        super().__init__(arrays)
        self.seen: set[str] = set()

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self:
            raise SerializationError(f"cannot read program: array {key!r} is missing")
        self.seen.add(key)
        return super().__getitem__(key)

    def done(self) -> None:
        """Raises when arrays were left unused."""
        extra = sorted(set(self) - self.seen)
        if extra:
            raise SerializationError(f"cannot read program: unexpected arrays {extra[:5]}")
