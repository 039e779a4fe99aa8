"""One garbled-circuit step of a query, over its circuits (:meth:`TwoPartyStep.parts`).

Layer: ``heinfer.protocol``. A step is one circuit (ReLU, max-pool and ReLU, clip, or the
truncation before a square), or two when values pass through it (the layer's circuit, then a
truncation of each kept value: :attr:`~heinfer.program.two_party.TwoPartyStep.keep`). Each
circuit runs its own OT extension and garbling (``heinfer.twoparty``); a step's message is
the circuits' messages joined — one circuit's message as it is, several each after its
length (``u32``, little-endian) — so the message count and every one-circuit step's bytes
are as before. A joined message is split only into exactly the parts the public program
names, or refused.
"""

from __future__ import annotations

import struct

import numpy as np

from heinfer.errors import ProtocolError
from heinfer.program.two_party import TwoPartyStep
from heinfer.twoparty import LayerCircuit, TwoPartyClient, TwoPartyServer

__all__ = ["ClientStepRun", "ServerStepRun", "join", "split"]


def join(blobs: list[bytes]) -> bytes:
    """The parts' messages as one (see the module documentation)."""
    if len(blobs) == 1:
        return bytes(blobs[0])
    parts: list = []
    for b in blobs:  # one copy of each part, into the joined message (the circuits: 100s of MB)
        parts += (struct.pack("<I", len(b)), b)
    return b"".join(parts)


def split(blob: bytes, count: int, what: str) -> list[bytes]:
    """The ``count`` parts of a joined message, each checked to fit, none left over."""
    if count == 1:
        return [blob]
    view, out, at = memoryview(blob), [], 0
    for i in range(count):
        if at + 4 > len(view):
            raise ProtocolError(f"{what}: truncated before part {i + 1} of {count}")
        (n,) = struct.unpack_from("<I", view, at)
        at += 4
        if at + n > len(view):
            raise ProtocolError(f"{what}: part {i + 1} of {count} claims {n} bytes, {len(view) - at} remain")
        out.append(bytes(view[at : at + n]))
        at += n
    if at != len(view):
        raise ProtocolError(f"{what}: {len(view) - at} bytes after its {count} parts")
    return out


class ClientStepRun:
    """The client's side of step ``k`` for a query of ``items`` items: its OT-extension
    request (:attr:`request`), then the garbled circuits, its choices and the labels."""

    def __init__(self, gc: TwoPartyClient, step: TwoPartyStep, p: int, items: int, k: int) -> None:
        self.step, self.p, self.items, self.k = step, p, items, k
        self._parts, msgs = [], []
        for args, entries in step.parts(p):
            native, msg = gc.offline(LayerCircuit(*args), len(entries) * items)
            self._parts.append((native, entries))
            msgs.append(msg)
        self.request = join(msgs)

    def receive_offline(self, blob: bytes) -> None:
        """The server's garbled circuits and OT corrections of every part."""
        for (native, _), m in zip(self._parts, split(blob, len(self._parts), f"step {self.k}'s circuits")):
            native.receive_offline(m)

    def choose(self, c: np.ndarray) -> bytes:
        """The OT choices for the client's shares ``c`` (``items × in_size`` residues): each
        part's inputs, item-major."""
        return join([native.choose(np.ascontiguousarray(c[:, e.reshape(-1)].reshape(-1), dtype=np.uint64)) for native, e in self._parts])

    def finish(self, labels: bytes) -> np.ndarray:
        """The client's shares of the step's outputs (``int64``, ``items × out_size``)."""
        parts = split(labels, len(self._parts), f"step {self.k}'s labels")
        outs = [native.finish(m).astype(np.int64).reshape(self.items, -1) for (native, _), m in zip(self._parts, parts)]
        return self.step.assemble(outs, self.p)


class ServerStepRun:
    """The server's side of step ``k`` for a query of ``items`` items: answers the client's
    request (:meth:`take_reply`, once: the garbled circuits are not kept), then holds the masks
    of the step's inputs and its output shares."""

    def __init__(self, gc: TwoPartyServer, step: TwoPartyStep, p: int, items: int, k: int, request: bytes) -> None:
        self.step, self.p, self.items, self.k = step, p, items, k
        self._parts, replies = [], []
        parts = step.parts(p)
        for (args, entries), m in zip(parts, split(request, len(parts), f"step {k}'s OT-extension request")):
            sources = step.sources(items) if not self._parts else None  # kept values: read once each
            native, reply = gc.offline(LayerCircuit(*args), len(entries) * items, m, sources)
            self._parts.append((native, entries))
            replies.append(reply)
        self._reply: bytes | None = join(replies)

    def take_reply(self) -> bytes:
        """The garbled circuits and OT corrections for the client, handed over once (the server
        keeps no copy of a query's circuits: at 36-bit shares MobileNetV2's are 4.5 GB)."""
        reply, self._reply = self._reply, None
        if reply is None:
            raise ProtocolError(f"step {self.k}'s offline reply was already sent")
        return reply

    @property
    def entries(self) -> np.ndarray:
        """The input values every circuit input reads, per item, in the parts' order."""
        return np.concatenate([e.reshape(-1) for _, e in self._parts])

    def masks(self) -> np.ndarray:
        """The masks of the circuits' inputs (``items × len(entries)``), as :attr:`entries`."""
        return np.concatenate([native.masks().reshape(self.items, -1) for native, _ in self._parts], axis=1)

    def output_shares(self) -> np.ndarray:
        """The server's shares of the step's outputs (``int64``, ``items × out_size``)."""
        outs = [native.output_shares().astype(np.int64).reshape(self.items, -1) for native, _ in self._parts]
        return self.step.assemble(outs, self.p)

    def labels(self, choices: bytes) -> bytes:
        """The client's input labels of every part by oblivious transfer."""
        parts = split(choices, len(self._parts), f"step {self.k}'s OT choices")
        return join([native.labels(m) for (native, _), m in zip(self._parts, parts)])
