"""The service's housekeeping thread: idle sessions and stalled sends (layer: ``heinfer.serve``).

A client that stops *reading* would hold a worker thread forever: gRPC's synchronous server
blocks in a send until the client's flow-control window opens. :class:`SendWatch` records
when each call started its current send; :class:`Reaper` cancels any call whose send has
waited longer than ``query_timeout_s`` (the handler then frees the query as for any
cancelled call), and closes the sessions idle for longer than ``idle_timeout_s``.
"""

from __future__ import annotations

import threading
import time

import grpc

from heinfer.serve.sessions import Registry

__all__ = ["Reaper", "SendWatch"]


class SendWatch:
    """When each call's pending send started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[int, tuple[grpc.ServicerContext, float]] = {}

    def sending(self, key: int, context: grpc.ServicerContext) -> None:
        """Call ``key`` is about to hand a message to gRPC."""
        with self._lock:
            self._since[key] = (context, time.monotonic())

    def sent(self, key: int) -> None:
        """Call ``key``'s send completed (or the call ended)."""
        with self._lock:
            self._since.pop(key, None)

    def stalled(self, timeout_s: float) -> list[grpc.ServicerContext]:
        """The calls whose send has waited longer than ``timeout_s`` (forgotten here)."""
        now = time.monotonic()
        with self._lock:
            keys = [k for k, (_, t) in self._since.items() if now - t > timeout_s]
            return [self._since.pop(k)[0] for k in keys]


class Reaper:
    """A daemon thread that expires idle sessions and cancels stalled sends every
    ``period_s`` seconds until :meth:`stop`."""

    def __init__(self, registry: Registry, watch: SendWatch, period_s: float) -> None:
        self.registry = registry
        self.watch = watch
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heinfer-reaper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread (and waits for it)."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        timeout = self.registry.limits.query_timeout_s
        while not self._stop.wait(self.period_s):
            self.registry.expire_idle()
            for context in self.watch.stalled(timeout):
                context.cancel()
