"""The sessions and running queries of a service: owners, caps, expiry and counters
(layer: ``heinfer.serve``).

:class:`Registry` is the one place that decides whether a session may open, a query may
start, who may use or close a session, and when a session's keys are freed; everything it
guards is under one lock. Each session has a **secret** (32 random bytes, hex) that
``OpenSession`` returns to its creator only; every ``Infer`` and ``CloseSession`` of the
session must present it (compared with :func:`hmac.compare_digest`), so a session id seen
by someone else (a log, another client of the same server) is useless to them. Caps: sessions
and running queries in all, and per **peer address** (the client's IP, without the port).

A session is closed (its evaluation keys and any abandoned query state dropped from the
protocol :class:`~heinfer.protocol.Server`) when its owner closes it or when it has had no
running query for ``idle_timeout_s``; a session closed while a query runs on it is refused
new queries at once and freed when its last query ends.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass

from heinfer.errors import ServiceError
from heinfer.protocol import Server
from heinfer.serve.limits import Limits

__all__ = ["Registry", "check_session_caps", "peer_address", "release"]


def peer_address(peer: str) -> str:
    """The address part of a gRPC peer string (``ipv4:1.2.3.4:5678`` → ``ipv4:1.2.3.4``,
    ``ipv6:[::1]:5678`` → ``ipv6:[::1]``; a Unix socket stays whole)."""
    if peer.startswith(("ipv4:", "ipv6:")):
        host, sep, port = peer.rpartition(":")
        if sep and port.isdigit():
            return host
    return peer


def release(counts: Counter[str], peer: str) -> None:
    """One fewer for ``peer`` in ``counts``; the entry goes at zero (the caller holds the lock)."""
    counts[peer] -= 1
    if counts[peer] <= 0:
        del counts[peer]


def check_session_caps(limits: Limits, total: int, peer: str, mine: int) -> None:
    """Refuses one more session (``RESOURCE_EXHAUSTED``) when ``total`` are open, or ``mine``
    from ``peer``, at the caps of ``limits``."""
    if total >= limits.max_sessions:
        raise ServiceError(f"too many sessions: {limits.max_sessions} are open (max_sessions)", code="RESOURCE_EXHAUSTED")
    if mine >= limits.max_sessions_per_peer:
        raise ServiceError(
            f"too many sessions from {peer}: {mine} are open (max_sessions_per_peer {limits.max_sessions_per_peer})",
            code="RESOURCE_EXHAUSTED",
        )


def check_query_cap(limits: Limits, started: int, session: str) -> None:
    """Refuses one more query (``RESOURCE_EXHAUSTED``) on a session that has started
    ``limits.max_queries_per_session`` of them; ``session`` names it in the message."""
    cap = limits.max_queries_per_session
    if cap is not None and started >= cap:
        raise ServiceError(
            f"{session} has started its {cap} queries (max_queries_per_session): open a new session",
            code="RESOURCE_EXHAUSTED",
        )


@dataclass
class _Session:
    secret: bytes
    peer: str
    last_active: float
    running: int = 0
    started: int = 0
    closing: bool = False


class Registry:
    """Sessions, their owners, query slots and the service's counters (thread-safe)."""

    def __init__(self, server: Server, limits: Limits) -> None:
        self.server = server
        self.limits = limits
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._reserved: Counter[str] = Counter()
        self._running: Counter[str] = Counter()
        self._counts = dict.fromkeys(
            (
                "queries_done",
                "errors",
                "bytes_in",
                "bytes_out",
                "sessions_opened",
                "sessions_expired",
            ),
            0,
        )

    # ------------------------------------------------------------------ sessions
    def reserve_session(self, peer: str) -> None:
        """Holds a place for a session about to open (``RESOURCE_EXHAUSTED`` when full)."""
        lim = self.limits
        with self._lock:
            self._expire_locked(time.monotonic())
            mine = sum(s.peer == peer for s in self._sessions.values()) + self._reserved[peer]
            check_session_caps(lim, len(self._sessions) + sum(self._reserved.values()), peer, mine)
            self._reserved[peer] += 1

    def release_reservation(self, peer: str) -> None:
        """Gives back a place reserved by :meth:`reserve_session` that was not used."""
        with self._lock:
            release(self._reserved, peer)

    def add_session(self, session: str, peer: str) -> str:
        """Turns ``peer``'s reservation into the open session ``session``; its secret."""
        secret = secrets.token_hex(32)
        with self._lock:
            release(self._reserved, peer)
            self._sessions[session] = _Session(secret.encode(), peer, time.monotonic())
            self._counts["sessions_opened"] += 1
        return secret

    def close_session(self, session: str, secret: str | bytes) -> None:
        """Closes a session now, or when its running queries end: ``NOT_FOUND`` if unknown,
        ``PERMISSION_DENIED`` if ``secret`` is not the session's."""
        with self._lock:
            s = self._owned_locked(session, secret)
            s.closing = True
            if s.running == 0:
                self._drop_locked(session)

    def expire_idle(self) -> int:
        """Closes every session idle for longer than ``idle_timeout_s``; how many."""
        with self._lock:
            return self._expire_locked(time.monotonic())

    # ------------------------------------------------------------------ queries
    def start_query(self, peer: str, session: str, secret: str | bytes) -> None:
        """Takes a query slot on ``session`` for ``peer``: ``NOT_FOUND``/``PERMISSION_DENIED``
        as :meth:`close_session`, ``RESOURCE_EXHAUSTED`` when the slots (all or the peer's)
        are in use or the session has started ``max_queries_per_session`` queries. Give it
        back with :meth:`end_query`."""
        lim = self.limits
        with self._lock:
            s = self._owned_locked(session, secret)
            total = sum(self._running.values())
            if total >= lim.max_concurrent_queries:
                raise ServiceError(
                    f"too many queries: {total} are running (max_concurrent_queries "
                    f"{lim.max_concurrent_queries}); retry later",
                    code="RESOURCE_EXHAUSTED",
                )
            if self._running[peer] >= lim.max_queries_per_peer:
                raise ServiceError(
                    f"too many queries from {peer}: {self._running[peer]} are running "
                    f"(max_queries_per_peer {lim.max_queries_per_peer}); retry later",
                    code="RESOURCE_EXHAUSTED",
                )
            check_query_cap(lim, s.started, f"session {session[:16]!r}")
            self._running[peer] += 1
            s.running += 1
            s.started += 1
            s.last_active = time.monotonic()

    def end_query(self, peer: str, session: str, ok: bool) -> None:
        """Gives back the slot :meth:`start_query` took."""
        with self._lock:
            release(self._running, peer)
            self._counts["queries_done" if ok else "errors"] += 1
            s = self._sessions.get(session)
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
                "queries_running": sum(self._running.values()),
                **self._counts,
                # query states held by the protocol server (0 when no query runs: no leak)
                "query_states": self.server.query_count,
            }

    # ------------------------------------------------------------------ internals
    def _owned_locked(self, session: str, secret: str | bytes) -> _Session:
        s = self._sessions.get(session)
        if s is None or s.closing:
            raise ServiceError(
                f"no session {session[:16]!r} (unknown, closed, or expired after "
                f"{self.limits.idle_timeout_s:g} s idle)",
                code="NOT_FOUND",
            )
        given = secret.encode() if isinstance(secret, str) else bytes(secret)
        if not hmac.compare_digest(given, s.secret):
            raise ServiceError(
                f"wrong secret for session {session[:16]!r}: only the client that opened a "
                "session may use or close it",
                code="PERMISSION_DENIED",
            )
        return s

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
