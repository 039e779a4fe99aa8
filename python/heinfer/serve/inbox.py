"""Reading the client's side of a stream with a time limit (layer: ``heinfer.serve``).

gRPC's synchronous server hands a handler a blocking iterator of requests, which cannot
time out. :class:`Inbox` reads it on a helper thread that also puts the parts together
(:class:`~heinfer.serve.parts.Assembler`, every check done there, before any data is kept)
and hands over whole messages through a queue of one: the handler waits once per message,
with a deadline — a client that stops sending mid-protocol gets ``DEADLINE_EXCEEDED`` after
``query_timeout_s`` — and a client that floods parts is held back by gRPC flow control, not
buffered (at most one message waits, one is being assembled). The messages a stream may
carry are known in advance (the keys; or the query, then one reply per step): a part of any
other kind, or of a message beyond them, is refused. The helper thread ends with the call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

from heinfer.errors import ProtocolError, ServiceError
from heinfer.serve.parts import Assembler
from heinfer.serve.wire import received

__all__ = ["Expected", "Inbox"]

#: What a stream may carry, in order: ``(kind → largest message, name in errors)`` per message.
Expected = list[tuple[dict[str, int], str]]
_MESSAGE, _END, _ERROR, _BAD = range(4)


class Inbox:
    """The messages of a request stream (requests with a ``part`` field), read and
    assembled ahead by a helper thread. ``expected``: see :data:`Expected`;
    ``max_part_bytes``: the largest part accepted; ``on_bytes(n)`` is called with the
    serialized size of every part received."""

    def __init__(
        self,
        requests: Iterator,
        expected: Expected,
        max_part_bytes: int,
        on_bytes: Callable[[int], None] | None = None,
    ) -> None:
        self._expected = list(expected)
        limits, what = self._expected[0]
        self._assembler = Assembler(limits, max_part_bytes, what)
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._closed = threading.Event()
        self._on_bytes = on_bytes
        self._name: str | None = None
        self._thread = threading.Thread(
            target=self._pump, args=(requests,), name="heinfer-inbox", daemon=True
        )
        self._thread.start()

    def message(self, timeout_s: float) -> tuple[str, bytes]:
        """``(kind, bytes)`` of the next whole message, which must arrive within ``timeout_s``.

        Raises :class:`ServiceError` ``DEADLINE_EXCEEDED`` when it does not, ``CANCELLED``
        when the client cancelled the call, :class:`~heinfer.errors.ProtocolError` when the
        stream ends first, and whatever the assembler refused a part with.
        """
        try:
            kind, item = self._queue.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            a = self._assembler
            raise ServiceError(
                f"no complete {a.what} from the client within {timeout_s:g} s "
                f"(query_timeout_s); the stream stands {a.describe()}",
                code="DEADLINE_EXCEEDED",
            ) from None
        if kind == _MESSAGE:
            return item
        self._queue.put((kind, item))  # later reads see the same end
        if kind == _END:
            raise ProtocolError(f"the client ended its stream {self._assembler.describe()}")
        if kind == _ERROR:
            raise ServiceError("the client cancelled the call", code="CANCELLED")
        raise item

    def rename(self, what: str) -> None:
        """Names the messages from now on in errors (``"reply to step 0"``): for streams
        whose messages are allowed by kind, not listed one by one."""
        self._name = what
        self._assembler.what = what

    def close(self) -> None:
        """Stops reading (the helper thread ends when the call ends)."""
        self._closed.set()

    def _pump(self, requests: Iterator) -> None:
        a = self._assembler
        done = 0
        try:
            for request in requests:
                # an Infer request may carry a whole message typed; an OpenSession one only parts
                n, typed = received(request)
                if self._on_bytes is not None:
                    self._on_bytes(n)
                if done == len(self._expected):
                    raise ProtocolError(
                        f"a part after the last message this stream carries ({a.what})"
                    )
                message = a.take_typed(typed) if typed is not None else a.feed(request.part)
                if message is None:
                    continue
                done += 1
                if done < len(self._expected):
                    limits, what = self._expected[done]
                    a.expect(limits, self._name or what)
                if not self._put((_MESSAGE, message)):
                    return
            self._put((_END, None))  # described when read: by then the handler named what it waits for
        except (ProtocolError, ServiceError) as e:
            self._put((_BAD, e))
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
