"""GAZELLE's two-party service on Ray actors: whole sessions per actor.

Layer: ``heinfer.serve`` (it runs :class:`~heinfer.protocol.two_party.TwoPartyInferenceServer`,
which the cluster layer may not import). The two-party protocol keeps state per session and
per query — the OT extension, the garbled circuits of the query in flight, its masks — so a
session cannot move between processes: an actor (:class:`TwoPartySessions`) prepares the
program's layers once and hosts whole sessions; the gRPC front end opens each new session
on the actor with the fewest open sessions (:class:`RayTwoParty`) and forwards that
session's messages to it (:class:`RemoteParty`). Concurrent clients thus use every actor.

Faults: every call has a deadline. A session whose actor dies is lost: its call fails with
:class:`~heinfer.errors.ClusterError` saying so (the client reconnects and opens a new
session), never with a wrong answer; the actor is replaced for the sessions that follow. The
actors hold the server's weights and the sessions' public keys, never a secret key: they are
the server's own processes.
"""

from __future__ import annotations

import itertools
import os
import threading
from typing import Any

from heinfer import _native
from heinfer.cluster.local import ensure_ray, kill_quietly, require_ray, stop_actors
from heinfer.errors import ClusterError, HeinferError, ProtocolError
from heinfer.program.format import load
from heinfer.program.two_party import TwoPartyProgram
from heinfer.protocol.two_party import TwoPartyInferenceServer, _params, prepare_server_layers

__all__ = ["RayTwoParty", "RemoteParty", "TwoPartySessions"]


class TwoPartySessions:
    """One actor's body (a plain class, testable without Ray): the program's layers prepared
    once (``threads`` native threads, ``max_memory`` as for the local service) and the
    sessions opened on it, by session id."""

    def __init__(self, program_bytes: bytes, threads: int = 1, max_memory: int | None = None) -> None:
        _native.set_num_threads(int(threads))
        prog = load(program_bytes)
        if not isinstance(prog, TwoPartyProgram) or prog.is_public:
            raise TypeError("a two-party worker needs the two-party program with its weights")
        self.program = prog
        self.layers = prepare_server_layers(_params(prog), prog, max_memory)
        self._parties: dict[str, TwoPartyInferenceServer] = {}

    def ping(self) -> int:
        """The worker's process id (a liveness check)."""
        return os.getpid()

    def open(self, sid: str, keys: dict) -> bytes:
        """Opens session ``sid`` with the client's keys; returns the set-up reply."""
        if sid in self._parties:
            raise ProtocolError(f"session {sid} is already open on this worker")
        party = TwoPartyInferenceServer(self.program, keys, self.layers)
        self._parties[sid] = party
        return party.setup_reply

    def offline(self, sid: str, blobs: list) -> list[bytes]:
        """The offline phase of the session's next query."""
        return self._party(sid).offline(list(blobs))

    def layer(self, sid: str, k: int, blobs: list) -> list[bytes]:
        """Linear layer ``k`` of the session's query."""
        return self._party(sid).layer(int(k), list(blobs))

    def labels(self, sid: str, k: int, blob: bytes) -> bytes:
        """The labels of circuit step ``k`` for the client's choices."""
        return self._party(sid).labels(int(k), blob)

    def close(self, sid: str) -> None:
        """Forgets session ``sid`` (idempotent)."""
        self._parties.pop(sid, None)

    def count(self) -> int:
        """Sessions open on this worker."""
        return len(self._parties)

    def _party(self, sid: str) -> TwoPartyInferenceServer:
        if sid not in self._parties:
            raise ProtocolError(f"no session {sid} on this worker (closed, or never opened)")
        return self._parties[sid]


class RayTwoParty:
    """The two-party program's sessions on ``workers`` Ray actors of ``threads`` CPUs each
    (on the cluster at ``address``, or with ``None`` the Ray of this process or a new local
    one on 127.0.0.1). :meth:`open` starts a session on the actor with the fewest sessions.
    ``timeout_s`` bounds every call (a query's offline phase garbles all its circuits)."""

    def __init__(
        self,
        program: TwoPartyProgram,
        *,
        workers: int = 2,
        address: str | None = None,
        threads: int = 1,
        timeout_s: float = 600.0,
        max_memory: int | None = None,
    ) -> None:
        if not isinstance(program, TwoPartyProgram) or program.is_public:
            raise ProtocolError("the server needs the two-party program with its weights")
        if not isinstance(workers, int) or workers < 1 or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"workers and threads must be positive integers, got {workers!r}, {threads!r}")
        if not timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        self.program = program
        self.timeout_s = float(timeout_s)
        self._ray = require_ray()
        self._owns = ensure_ray(address, workers * threads)
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._closed = False
        try:
            self._ref = self._ray.put(program.to_bytes())
            self._cls = self._ray.remote(num_cpus=threads, max_restarts=0, max_task_retries=0)(TwoPartySessions)
            self._threads, self._max_memory = threads, max_memory
            self._actors = [self._cls.remote(self._ref, threads, max_memory) for _ in range(workers)]
            self._open = [0] * workers
            for i, a in enumerate(self._actors):
                self._call(i, a, a.ping.remote(), f"worker {i} failed to start")
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        """Number of actors."""
        return len(self._actors)

    def sessions_on_workers(self) -> list[int]:
        """How many sessions each actor holds (asks them)."""
        return [self._call(i, a, a.count.remote(), f"worker {i}") for i, a in enumerate(list(self._actors))]

    def worker_pids(self) -> list[int]:
        """Each actor's process id."""
        return [self._call(i, a, a.ping.remote(), f"worker {i}") for i, a in enumerate(list(self._actors))]

    def open(self, keys: dict) -> RemoteParty:
        """A new session with the client's ``keys`` (public key, rotation keys, base OT) on
        the least loaded actor."""
        if self._closed:
            raise ClusterError("this Ray two-party backend was closed")
        with self._lock:
            i = min(range(len(self._actors)), key=lambda j: self._open[j])
            self._open[i] += 1
            actor, sid = self._actors[i], f"s{next(self._ids)}"
        try:
            reply = self._call(i, actor, actor.open.remote(sid, keys), "opening the session")
        except BaseException:
            self._settle(i)
            raise
        return RemoteParty(self, i, actor, sid, reply)

    def close(self) -> None:
        """Kills the actors and, when this backend started Ray, shuts it down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        stop_actors(self._ray, getattr(self, "_actors", []), getattr(self, "_owns", False))

    def _settle(self, i: int) -> None:
        with self._lock:
            self._open[i] = max(0, self._open[i] - 1)

    def _call(self, i: int, actor: Any, ref: Any, what: str) -> Any:
        """Waits for ``ref`` from actor ``i``: its answer, the worker's own error re-raised,
        or :class:`ClusterError` when the actor died (replaced for later sessions) or the
        deadline passed."""
        ray = self._ray
        try:
            return ray.get(ref, timeout=self.timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise ClusterError(f"{what}: no answer from worker {i} within {self.timeout_s:.0f} s") from None
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as e:
            self._replace(i, actor)
            raise ClusterError(
                f"{what}: worker {i}, which held this session, died ({type(e).__name__}): the session is lost, "
                "open a new one"
            ) from None
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, (HeinferError, ValueError)):  # the protocol's own refusals
                raise cause from None
            raise ClusterError(f"{what}: worker {i} failed: {type(e).__name__}") from None

    def _replace(self, i: int, dead: Any) -> None:
        """Actor ``i`` is replaced by a fresh one (its sessions are gone)."""
        with self._lock:
            if self._closed or self._actors[i] is not dead:
                return
            kill_quietly(self._ray, dead)
            self._actors[i] = self._cls.remote(self._ref, self._threads, self._max_memory)
            self._open[i] = 0


class RemoteParty:
    """A session on an actor, with :class:`~heinfer.protocol.two_party.TwoPartyInferenceServer`'s
    interface (``setup_reply``, :meth:`offline`, :meth:`layer`, :meth:`labels`) for the
    service; :meth:`close` ends it on the actor."""

    def __init__(self, pool: RayTwoParty, i: int, actor: Any, sid: str, setup_reply: bytes) -> None:
        self._pool, self._i, self._actor, self._sid = pool, i, actor, sid
        self.setup_reply = setup_reply
        self._closed = False

    def offline(self, blobs: list[bytes]) -> list[bytes]:
        """The offline phase of the next query, on the session's actor."""
        return self._pool._call(self._i, self._actor, self._actor.offline.remote(self._sid, blobs), "the offline phase")

    def layer(self, k: int, blobs: list[bytes]) -> list[bytes]:
        """Linear layer ``k``, on the session's actor."""
        return self._pool._call(self._i, self._actor, self._actor.layer.remote(self._sid, k, blobs), f"layer {k}")

    def labels(self, k: int, blob: bytes) -> bytes:
        """Circuit step ``k``'s labels, on the session's actor."""
        return self._pool._call(self._i, self._actor, self._actor.labels.remote(self._sid, k, blob), f"step {k}")

    def close(self) -> None:
        """Ends the session on its actor (idempotent; nothing to do if the actor is gone)."""
        if self._closed:
            return
        self._closed = True
        if self._pool._actors[self._i] is self._actor:  # a replaced actor's count started afresh
            self._pool._settle(self._i)
        try:
            self._actor.close.remote(self._sid)
        except Exception:  # noqa: BLE001, S110 - the actor is gone: so is the session
            pass
