"""Reading a request stream with a time limit, without buffering a flood."""

from __future__ import annotations

import threading
import time

import pytest
from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.inbox import Inbox
from heinfer.serve.parts import Assembler
from heinfer.v1 import service_pb2 as pb

from .conftest import PART, infer_requests

LIMITS = {"query": 1 << 20}


def _asm(what: str = "message") -> Assembler:
    return Assembler(LIMITS, PART, what)


def test_messages_arrive_in_order_and_bytes_are_counted() -> None:
    counted = []
    msgs = [b"a" * 40_000, b"b", b"c" * 17]
    requests = infer_requests(*(("query", m) for m in msgs))
    inbox = Inbox(iter(requests), counted.append)
    assert [inbox.message(_asm(), 5) for _ in msgs] == [("query", m) for m in msgs]
    assert sum(counted) == sum(r.part.ByteSize() for r in requests) > 40_018
    with pytest.raises(ProtocolError, match="ended its stream before the message"):
        inbox.message(_asm(), 5)
    with pytest.raises(ProtocolError, match="ended its stream"):  # and again
        inbox.message(_asm(), 5)


def test_a_silent_client_times_out() -> None:
    hold = threading.Event()

    def stream():
        yield from infer_requests(("query", b"x" * 40_000))[:1]
        hold.wait(10)

    inbox = Inbox(stream())
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=r"within 0.2 s .* after part 1 of 3") as e:
        inbox.message(_asm("query message"), 0.2)
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - t0 < 2
    inbox.close()
    hold.set()


def test_a_broken_stream_is_cancelled() -> None:
    def stream():
        yield from infer_requests(("query", b"x"))
        raise RuntimeError("the call was cancelled")

    inbox = Inbox(stream())
    assert inbox.message(_asm(), 5) == ("query", b"x")
    with pytest.raises(ServiceError, match="cancelled") as e:
        inbox.message(_asm(), 5)
    assert e.value.code == "CANCELLED"


def test_a_flood_is_not_buffered_and_the_thread_ends_after_close() -> None:
    pulled = []

    def flood():
        for i in range(10_000):
            pulled.append(i)
            yield pb.InferRequest(part=pb.Part(kind=pb.KIND_QUERY, total=1, size=1, data=b"x"))

    inbox = Inbox(flood(), depth=4)
    time.sleep(0.2)
    assert len(pulled) <= 6  # the queue holds 4, one waits to be queued
    inbox.close()
    inbox._thread.join(2)
    assert not inbox._thread.is_alive()
