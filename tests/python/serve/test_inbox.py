"""Reading a request stream with a time limit, without buffering a flood."""

from __future__ import annotations

import threading
import time

import pytest
from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.framing import Assembler, frames
from heinfer.serve.inbox import Inbox

from .conftest import SMALL


def test_messages_arrive_in_order_and_bytes_are_counted() -> None:
    counted = []
    msgs = [b"a" * 40_000, b"b", b"c" * 17]
    inbox = Inbox((f for m in msgs for f in frames(m, 16 << 10)), counted.append)
    assert [inbox.message(Assembler(SMALL), 5) for _ in msgs] == msgs
    assert sum(counted) == 40_000 + 1 + 17 + 5 * 24
    with pytest.raises(ProtocolError, match="ended its stream before the message"):
        inbox.message(Assembler(SMALL), 5)
    with pytest.raises(ProtocolError, match="ended its stream"):  # and again
        inbox.message(Assembler(SMALL), 5)


def test_a_silent_client_times_out() -> None:
    hold = threading.Event()

    def stream():
        yield from list(frames(b"x" * 40_000, 16 << 10))[:1]
        hold.wait(10)

    inbox = Inbox(stream())
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=r"within 0.2 s .* after chunk 1 of 3") as e:
        inbox.message(Assembler(SMALL, what="query message"), 0.2)
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - t0 < 2
    inbox.close()
    hold.set()


def test_a_broken_stream_is_cancelled() -> None:
    def stream():
        yield from frames(b"x", 1024)
        raise RuntimeError("the call was cancelled")

    inbox = Inbox(stream())
    assert inbox.message(Assembler(SMALL), 5) == b"x"
    with pytest.raises(ServiceError, match="cancelled") as e:
        inbox.message(Assembler(SMALL), 5)
    assert e.value.code == "CANCELLED"


def test_a_flood_is_not_buffered_and_the_thread_ends_after_close() -> None:
    pulled = []

    def flood():
        for i in range(10_000):
            pulled.append(i)
            yield b"x"

    inbox = Inbox(flood(), depth=4)
    time.sleep(0.2)
    assert len(pulled) <= 6  # the queue holds 4, one waits to be queued
    inbox.close()
    inbox._thread.join(2)
    assert not inbox._thread.is_alive()
