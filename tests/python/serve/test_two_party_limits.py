"""The two-party server's limits on client messages, computed from the program: an honest
client's every message fits them (networks A, C, D), and a message beyond them is refused at
its first frame or as soon as it carries too many bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import heinfer
from heinfer.errors import ProtocolError
from heinfer.protocol.two_party import TwoPartyInferenceClient, TwoPartyInferenceServer
from heinfer.serve.two_party import PART_BYTES, Kind, Reassembler, frames
from heinfer.serve.two_party_limits import client_limits, items_per_query, server_limits
from heinfer.v1 import service_pb2 as pb

MODELS = Path(__file__).resolve().parents[3] / "models"
DIGITS = np.load(MODELS / "digits_test.npz")["x"]


def _compile(name: str, mode: str = "latency"):
    return heinfer.compile(MODELS / f"{name}.onnx", mode=mode, protocol="two-party", calibration=DIGITS[100:164], batch_size=3)


def _messages(prog) -> tuple[list, list]:
    """Every message an honest client, and an honest server, send in a session of one query
    (of the program's capacity): ``(kind, step, blobs)`` each."""
    client = TwoPartyInferenceClient(prog.public())
    keys = client.keys_message()
    server = TwoPartyInferenceServer(prog, keys)
    client.finish_setup(server.setup_reply)
    sent = [(Kind.KEYS, 0, [keys["pk"], keys["galois"], keys["ot"]])]
    back = [(Kind.SETUP, 0, [server.setup_reply])]
    req = client.offline_request(prog.batch_capacity)
    sent.append((Kind.OFFLINE, 0, req))
    garbled = server.offline(req)
    back.append((Kind.GARBLED, 0, garbled))
    client.offline_finish(garbled)
    msgs = client.query(DIGITS[: prog.batch_capacity])
    for k in range(len(prog.segments)):
        sent.append((Kind.LAYER, k, msgs))
        res = server.layer(k, msgs)
        back.append((Kind.RESULT, k, res))
        if k == len(prog.steps):
            break
        choices = client.choose(k, res)
        sent.append((Kind.CHOICES, k, [choices]))
        labels = server.labels(k, choices)
        back.append((Kind.LABELS, k, [labels]))
        msgs = client.next_input(k, labels)
    return sent, back


@pytest.mark.parametrize("name", ["cryptonets_relu", "mnist_a", "mnist_d", "cryptonets_relu/throughput"])
def test_honest_parties_fit_the_limits(name: str) -> None:
    prog = _compile(*name.split("/"))
    sent, back = _messages(prog)
    for limit, messages in ((client_limits(prog), sent), (server_limits(prog), back)):
        for kind, step, blobs in messages:
            most, cap = limit(kind, step)
            size = sum(map(len, blobs))
            assert len(blobs) <= most and size <= cap, (kind.name, step, len(blobs), most, size, cap)
            assert Reassembler(frames(kind, step, blobs), limit=limit).next() == (kind, step, blobs)
            assert cap < 1 << 30  # far below the 3 GiB of a message without limits
            # and not far above it (keys without rotation keys: a public key under a bound
            # of two switching keys, 2.5 MB)
            assert size > cap / 8 or cap < 1 << 20 or (kind == Kind.KEYS and not prog.rotation_steps), (kind.name, size, cap)


def test_messages_beyond_the_limits_are_refused_early() -> None:
    prog = _compile("cryptonets_relu")
    limit = client_limits(prog)
    n = prog.segments[0].n_input_cts
    with pytest.raises(ProtocolError, match=f"at most {n} blobs"):
        Reassembler(frames(Kind.LAYER, 0, [b"x"] * (n + 1)), limit=limit).next()
    for kind, step in ((Kind.RESULT, 0), (Kind.LAYER, len(prog.segments)), (Kind.CHOICES, len(prog.steps))):
        with pytest.raises(ProtocolError, match="is expected here"):
            Reassembler(frames(kind, step, [b"x"]), limit=limit).next()
    # a blob that declares more bytes than its kind allows is refused at its first frame,
    # before the rest is read
    _, cap = limit(Kind.CHOICES, 0)
    first = pb.TwoPartyFrame(kind=Kind.CHOICES, step=0, count=1, blob=0, size=cap + 1, offset=0, data=b"y" * 10)

    def stream():
        yield first
        raise AssertionError("the reassembler read past the refused frame")

    with pytest.raises(ProtocolError, match=f"limit of {cap} bytes"):
        Reassembler(stream(), limit=limit).next()
    assert PART_BYTES < limit(Kind.KEYS, 0)[1]


def test_queries_are_cut_to_fit_a_message() -> None:
    """A throughput program's garbled circuits grow with the items of a query: a client cuts
    its input into queries whose circuits fit the transport's largest message."""
    prog = heinfer.compile(MODELS / "cryptonets_relu.onnx", mode="throughput", protocol="two-party", calibration=DIGITS[100:164])
    assert items_per_query(prog, 3 << 30) == prog.batch_capacity == 256
    garbled = server_limits(prog)(Kind.GARBLED, 0)[1]
    small = items_per_query(prog, garbled // 10)
    assert 20 <= small <= 26
    assert items_per_query(prog, 1000) == 1  # never zero: the receiver's limit names the problem
