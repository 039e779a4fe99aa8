"""Test helpers that look for a secret key where it must not be (see test_secret_hygiene.py).

:class:`SecretScanner` finds any 16-byte run of a secret key's payload in bytes, arrays or
text (raw, hex in either case, base64 at any alignment); :func:`walk` lists every object
reachable from a root through ``gc.get_referents`` without wandering into modules, classes or
function globals (so the walk stays on the root's own data, not the whole interpreter).
"""

from __future__ import annotations

import base64
import gc
import types

import numpy as np

#: Serialized objects start with a 16-byte header (magic, version, kind, parameter id).
HEADER = 16
#: Length of the shortest run of key bytes that counts as a leak.
WINDOW = 16

_STOP = (types.ModuleType, type, types.CodeType, types.FrameType, types.BuiltinFunctionType)


class SecretScanner:
    """Detects secret-key bytes (runs of ``WINDOW`` bytes of a payload) in data or text."""

    def __init__(self, secret_keys: list[bytes]) -> None:
        payloads = [sk[HEADER:] for sk in secret_keys]
        raw = {p[i : i + WINDOW] for p in payloads for i in range(len(p) - WINDOW + 1)}
        b64 = set()
        for p in payloads:
            for shift in range(3):
                enc = base64.b64encode(p[shift:])
                b64 |= {enc[i : i + 24] for i in range(0, len(enc) - 24 - 4, 4)}  # 18 bytes
        self._needles = [raw, {w.hex().encode() for w in raw}, b64]

    def found(self, data: object) -> bool:
        """Whether ``data`` (bytes-like, ndarray or str) holds a run of a secret key."""
        if isinstance(data, str):
            text = data.encode("utf-8", "surrogatepass")
            return any(_contains(t, n) for t in (text, text.lower()) for n in self._needles)
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data).view(np.uint8).reshape(-1).tobytes()
        return _contains(bytes(data), self._needles[0])

    def found_in_object(self, obj: object) -> bool:
        """Whether ``obj``'s own data, its serialization (``to_bytes``) or its repr leaks."""
        if isinstance(obj, (bytes, bytearray, memoryview, str)):
            return self.found(obj)
        if isinstance(obj, np.ndarray):
            return obj.dtype != object and self.found(obj)
        to_bytes = getattr(type(obj), "to_bytes", None)
        if callable(to_bytes) and not isinstance(obj, int):
            try:
                if self.found(obj.to_bytes()):
                    return True
            except TypeError:
                pass
        try:
            return self.found(repr(obj))
        except Exception:  # noqa: BLE001 - an object that cannot print leaks nothing by printing
            return False


def _contains(data: bytes, needles: set[bytes]) -> bool:
    """Whether some element of ``needles`` (all of one length ≥ 4) is a substring of ``data``."""
    if not needles:
        return False
    size = len(next(iter(needles)))
    if len(data) < size:
        return False
    a = np.frombuffer(data, dtype=np.uint8).astype(np.uint32)
    heads = a[:-3] | a[1:-2] << 8 | a[2:-1] << 16 | a[3:] << 24
    wanted = np.array(sorted({int.from_bytes(n[:4], "little") for n in needles}), np.uint32)
    heads = heads[: len(data) - size + 1]
    pos = np.minimum(np.searchsorted(wanted, heads), len(wanted) - 1)
    hits = np.nonzero(wanted[pos] == heads)[0]
    return any(data[i : i + size] in needles for i in hits)


def walk(root: object) -> list[object]:
    """Every object reachable from ``root`` through ``gc.get_referents``, ``root`` included.

    Modules, classes, code and frames are not entered; functions contribute their closures
    and defaults (not their globals); bound methods their ``__self__``.
    """
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _STOP):
            continue
        seen[id(obj)] = obj
        if isinstance(obj, types.FunctionType):
            cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
            stack += [*cells, obj.__defaults__ or (), obj.__kwdefaults__ or {}]
        elif isinstance(obj, types.MethodType):
            stack += [obj.__self__, obj.__func__]
        else:
            stack += gc.get_referents(obj)
    return list(seen.values())


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
