"""Reading a request stream with a time limit: parts assembled on the helper thread, whole
messages handed over, no flood buffered, only the messages the stream may carry."""

from __future__ import annotations

import threading
import time

import pytest
from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.inbox import Inbox
from heinfer.v1 import service_pb2 as pb

from .conftest import PART, infer_requests

QUERY = ({"query": 1 << 20}, "query message")


def _reply(k: int) -> tuple[dict, str]:
    return {"reply": 1 << 20}, f"reply to step {k}"


def test_messages_arrive_in_order_and_bytes_are_counted() -> None:
    counted = []
    msgs = [("query", b"a" * 40_000), ("reply", b"b"), ("reply", b"c" * 17)]
    requests = infer_requests(*msgs)
    inbox = Inbox(iter(requests), [QUERY, _reply(0), _reply(1)], PART, counted.append)
    assert [inbox.message(5) for _ in msgs] == msgs
    assert sum(counted) == sum(r.ByteSize() for r in requests) > 40_018  # the requests' bytes
    with pytest.raises(ProtocolError, match="ended its stream before the reply to step 1"):
        inbox.message(5)
    with pytest.raises(ProtocolError, match="ended its stream"):  # and again
        inbox.message(5)


@pytest.mark.parametrize(
    "msgs, text",
    [
        ([("reply", b"x")], "query message: expected a 'query' message, got 'reply'"),
        (
            [("query", b"x"), ("query", b"y")],
            "reply to step 0: expected a 'reply' message, got 'query'",
        ),
        ([("query", b"x"), ("reply", b"y"), ("reply", b"z")], "a part after the last message"),
        ([("query", b"x" * (2 << 20))], "exceeds the limit of 1048576"),
    ],
)
def test_only_the_expected_messages_pass(msgs, text) -> None:
    inbox = Inbox(iter(infer_requests(*msgs)), [QUERY, _reply(0)], PART)
    with pytest.raises((ProtocolError, ServiceError), match=text):
        for _ in range(3):
            inbox.message(5)


def test_a_silent_client_times_out() -> None:
    hold = threading.Event()

    def stream():
        yield from infer_requests(("query", b"x" * 40_000))[:1]
        hold.wait(10)

    inbox = Inbox(stream(), [QUERY], PART)
    t0 = time.monotonic()
    with pytest.raises(ServiceError, match=r"within 0.2 s .* after part 1 of 3") as e:
        inbox.message(0.2)
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - t0 < 2
    inbox.close()
    hold.set()


def test_a_broken_stream_is_cancelled() -> None:
    def stream():
        yield from infer_requests(("query", b"x"))
        raise RuntimeError("the call was cancelled")

    inbox = Inbox(stream(), [QUERY, _reply(0)], PART)
    assert inbox.message(5) == ("query", b"x")
    with pytest.raises(ServiceError, match="cancelled") as e:
        inbox.message(5)
    assert e.value.code == "CANCELLED"


def test_a_flood_is_not_buffered_and_the_thread_ends_after_close() -> None:
    pulled = []
    steps = [_reply(k) for k in range(10_000)]

    def flood():
        for i in range(10_000):
            pulled.append(i)
            part = pb.Part(kind=pb.KIND_REPLY if i else pb.KIND_QUERY, total=1, size=1, data=b"x")
            yield pb.InferRequest(part=part)

    inbox = Inbox(flood(), [QUERY, *steps], PART)
    time.sleep(0.2)
    assert len(pulled) <= 3  # one message queued, one waiting to be queued
    inbox.close()
    inbox._thread.join(2)
    assert not inbox._thread.is_alive()
