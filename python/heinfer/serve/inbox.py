"""Reading the client's side of a stream with a time limit (layer: ``heinfer.serve``).

gRPC's synchronous server hands a handler a blocking iterator of requests, which cannot
time out. :class:`Inbox` reads it on a helper thread into a small bounded queue (so a client
that floods parts is held back by gRPC flow control, not buffered), and the handler waits
on the queue with a deadline: a client that stops sending mid-protocol gets
``DEADLINE_EXCEEDED`` after ``query_timeout_s``. The helper thread ends with the call.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.parts import Assembler

__all__ = ["Inbox"]

_PART, _END, _ERROR = range(3)


class Inbox:
    """The parts of a request stream (requests with a ``part`` field), read ahead by a
    helper thread. ``on_bytes(n)`` is called with the serialized size of every part received."""

    def __init__(
        self, requests: Iterator, on_bytes: Callable[[int], None] | None = None, depth: int = 4
    ) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._on_bytes = on_bytes
        self._thread = threading.Thread(
            target=self._pump, args=(requests,), name="heinfer-inbox", daemon=True
        )
        self._thread.start()

    def message(self, assembler: Assembler, timeout_s: float) -> tuple[str, bytes]:
        """``(kind, bytes)`` of the next whole message, which must arrive within ``timeout_s``.

        Raises :class:`ServiceError` ``DEADLINE_EXCEEDED`` when it does not, ``CANCELLED``
        when the client cancelled the call, and :class:`~heinfer.errors.ProtocolError` when
        the stream ends first (or a part is malformed, from the assembler).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                kind, item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise ServiceError(
                    f"no complete {assembler.what} from the client within {timeout_s:g} s "
                    f"(query_timeout_s); the stream stands {assembler.describe()}",
                    code="DEADLINE_EXCEEDED",
                ) from None
            if kind == _END:
                self._queue.put((_END, None))  # later reads see the end too
                raise ProtocolError(f"the client ended its stream {assembler.describe()}")
            if kind == _ERROR:
                self._queue.put((_ERROR, item))
                raise ServiceError("the client cancelled the call", code="CANCELLED")
            done = assembler.feed(item)
            if done is not None:
                return done

    def close(self) -> None:
        """Stops handing parts over (the helper thread ends when the call ends)."""
        self._closed.set()

    def _pump(self, requests: Iterator) -> None:
        try:
            for request in requests:
                part = request.part
                if self._on_bytes is not None:
                    self._on_bytes(part.ByteSize())  # no copy of the data
                if not self._put((_PART, part)):
                    return
            self._put((_END, None))
        except Exception as e:  # noqa: BLE001 - the call was cancelled or broke: tell the handler
            self._put((_ERROR, e))

    def _put(self, item: tuple) -> bool:
        """Queues ``item`` unless the inbox is closed; whether it was queued."""
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False
