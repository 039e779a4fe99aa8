"""The sessions and running queries of a service, their caps, expiry and counters
(layer: ``heinfer.serve``).

:class:`Registry` is the one place that decides whether a session may open, a query may
start, and when a session's keys are freed; everything it guards is under one lock. A
session is closed (its evaluation keys and any abandoned query state dropped from the
protocol :class:`~heinfer.protocol.Server`) when its client closes it or when it has had no
running query for ``idle_timeout_s``; a session closed while a query runs on it is refused
new queries at once and freed when its last query ends.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from heinfer.errors import ServiceError
from heinfer.protocol import Server
from heinfer.serve.limits import Limits

__all__ = ["Registry", "forget_query"]


def forget_query(server: Server, query_id: str) -> None:
    """Drops the protocol server's state of an abandoned query (idempotent)."""
    server.cancel(query_id)


@dataclass
class _Session:
    last_active: float
    running: int = 0
    closing: bool = False


class Registry:
    """Sessions, query slots and the service's counters (thread-safe)."""

    def __init__(self, server: Server, limits: Limits) -> None:
        self.server = server
        self.limits = limits
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._reserved = 0
        self._running = 0
        self._counts = {
            "queries_done": 0,
            "errors": 0,
            "bytes_in": 0,
            "bytes_out": 0,
            "sessions_opened": 0,
            "sessions_expired": 0,
        }

    # ------------------------------------------------------------------ sessions
    def reserve_session(self) -> None:
        """Holds a place for a session about to open (``RESOURCE_EXHAUSTED`` when full)."""
        with self._lock:
            self._expire_locked(time.monotonic())
            if len(self._sessions) + self._reserved >= self.limits.max_sessions:
                raise ServiceError(
                    f"too many sessions: {self.limits.max_sessions} are open (max_sessions)",
                    code="RESOURCE_EXHAUSTED",
                )
            self._reserved += 1

    def release_reservation(self) -> None:
        """Gives back a place reserved by :meth:`reserve_session` that was not used."""
        with self._lock:
            self._reserved -= 1

    def add_session(self, session: str) -> None:
        """Turns a reservation into the open session ``session``."""
        with self._lock:
            self._reserved -= 1
            self._sessions[session] = _Session(time.monotonic())
            self._counts["sessions_opened"] += 1

    def close_session(self, session: str) -> None:
        """Closes a session now, or when its running queries end (``NOT_FOUND`` if unknown)."""
        with self._lock:
            s = self._sessions.get(session)
            if s is None or s.closing:
                raise ServiceError(f"no session {session[:16]!r}", code="NOT_FOUND")
            s.closing = True
            if s.running == 0:
                self._drop_locked(session)

    def expire_idle(self) -> int:
        """Closes every session idle for longer than ``idle_timeout_s``; how many."""
        with self._lock:
            return self._expire_locked(time.monotonic())

    # ------------------------------------------------------------------ queries
    def start_query(self) -> None:
        """Takes a query slot (``RESOURCE_EXHAUSTED`` when all are in use)."""
        with self._lock:
            if self._running >= self.limits.max_concurrent_queries:
                raise ServiceError(
                    f"too many queries: {self._running} are running "
                    f"(max_concurrent_queries {self.limits.max_concurrent_queries}); retry later",
                    code="RESOURCE_EXHAUSTED",
                )
            self._running += 1

    def attach(self, session: str) -> None:
        """Marks a query running on ``session`` (``NOT_FOUND`` if unknown or closed)."""
        with self._lock:
            s = self._sessions.get(session)
            if s is None or s.closing:
                raise ServiceError(
                    f"no session {session[:16]!r} (unknown, closed, or expired after "
                    f"{self.limits.idle_timeout_s:g} s idle)",
                    code="NOT_FOUND",
                )
            s.running += 1
            s.last_active = time.monotonic()

    def end_query(self, session: str | None, ok: bool) -> None:
        """Gives back the slot of a query (attached to ``session`` if not ``None``)."""
        with self._lock:
            self._running -= 1
            self._counts["queries_done" if ok else "errors"] += 1
            s = self._sessions.get(session) if session is not None else None
            if s is not None:
                s.running -= 1
                s.last_active = time.monotonic()
                if s.closing and s.running == 0:
                    self._drop_locked(session)

    # ------------------------------------------------------------------ counters
    def count(self, name: str, n: int = 1) -> None:
        """Adds ``n`` to a counter (``errors``, ``bytes_in``, ``bytes_out``)."""
        with self._lock:
            self._counts[name] += n

    def stats(self) -> dict:
        """Open sessions, running and finished queries, errors, bytes each way, and the query
        states the protocol server holds."""
        with self._lock:
            return {
                "sessions": len(self._sessions),
                "queries_running": self._running,
                **self._counts,
                # query states held by the protocol server (0 when no query runs: no leak)
                "query_states": self.server.query_count,
            }

    # ------------------------------------------------------------------ internals
    def _expire_locked(self, now: float) -> int:
        idle = [
            sid
            for sid, s in self._sessions.items()
            if s.running == 0 and now - s.last_active > self.limits.idle_timeout_s
        ]
        for sid in idle:
            self._drop_locked(sid)
        self._counts["sessions_expired"] += len(idle)
        return len(idle)

    def _drop_locked(self, session: str) -> None:
        """Frees a session's keys and query states in the protocol server."""
        del self._sessions[session]
        self.server.close_session(session)
