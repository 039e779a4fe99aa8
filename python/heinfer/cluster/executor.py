"""The Ray executor: the server's segments run on Ray actors, with the in-process signature.

Layer: ``heinfer.cluster``. :class:`RayExecutor` has :class:`heinfer.runtime.Executor`'s
``run(k, batch, relin, galois)``, so a protocol server takes it as it is
(``Server(program, executor=RayExecutor(program))``) and the gRPC front end is unchanged.
Each actor (:class:`~heinfer.cluster.worker.ShardWorker`, ``threads`` CPUs) holds the
program's prepared weights and its row slices; a session's evaluation keys are sent to an
actor once, before its first shard of that session, and dropped from every actor by
:meth:`RayExecutor.forget_keys` (the server calls it when the session closes). How a
segment is split comes from the :class:`~heinfer.cluster.plan.ShardPlan`.

Faults: every wait has a deadline (``timeout_s``). An actor that dies while holding a shard
is replaced by a fresh one (same program, keys re-sent on demand) and the shard re-run, up
to ``retries`` times per shard; beyond that, or on a timeout, the query fails with
:class:`~heinfer.errors.ClusterError` naming the segment and the shard. Outputs are only
ever a complete set of shard answers, each checked for its count and decoded with full
validation: a query gets the right answer or an error, never a partial one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from heinfer import _native
from heinfer.cluster.local import ensure_ray, kill_quietly, require_ray, stop_actors
from heinfer.cluster.plan import NetworkModel, ShardPlan, prepared_bytes, shard_plan, single_linear, split_outputs
from heinfer.cluster.wire import JoinedBatch, batch_count, join_batches
from heinfer.cluster.worker import ShardWorker
from heinfer.errors import ClusterError, HeinferError, NotSupportedYetError, ProtocolError
from heinfer.program.model import Program
from heinfer.runtime.executor import native_params

__all__ = ["RayExecutor"]


class RayExecutor:
    """A program's segments on ``workers`` Ray actors (see the module documentation).

    ``address``: a running cluster (``"host:port"`` or ``"auto"``); ``None`` uses the Ray
    initialized in this process or starts a local one on 127.0.0.1. ``split``: ``"auto"``,
    ``"queries"``, ``"rows"``, ``"channels"``, ``"giant-steps"`` or ``"layers"`` (:func:`heinfer.cluster.plan.shard_plan`). ``baseline`` as
    for :class:`heinfer.Server`. ``max_worker_bytes``: the most bytes of prepared weights
    (:func:`~heinfer.cluster.plan.prepared_bytes`) one worker may hold: every worker prepares
    the whole program, except with ``split="layers"`` (a block of segments each); beyond it
    :class:`~heinfer.errors.NotSupportedYetError` naming ``split="layers"``, or under it
    :class:`~heinfer.errors.ClusterError` asking for more workers.
    ``setup_seconds``: the time to start and prepare the actors.
    """

    def __init__(
        self,
        program: Program,
        *,
        workers: int = 2,
        address: str | None = None,
        split: str = "auto",
        threads: int = 1,
        baseline: bool | None = None,
        timeout_s: float = 120.0,
        retries: int = 2,
        network: NetworkModel = NetworkModel(),  # noqa: B008 - immutable
        max_worker_bytes: int | None = None,
    ) -> None:
        if not isinstance(program, Program):
            raise ProtocolError("executing a program needs its weights: give the cluster the full program, not the public one")
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        if not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        if timeout_s <= 0 or retries < 0:
            raise ValueError("timeout_s must be positive and retries non-negative")
        t0 = time.perf_counter()
        program_bytes = program.to_bytes()
        self.program = program
        self.params = native_params(program.params)
        self.baseline = (not bool(program.meta.get("lazy", True))) if baseline is None else baseline
        self.plan: ShardPlan = shard_plan(program, workers, split, network)
        if max_worker_bytes is not None:
            _check_worker_bytes(program, self.plan, max_worker_bytes)
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.threads = threads
        #: Shards re-run after their actor died (a counter for tests and benchmarks).
        self.reruns = 0
        self._ray = require_ray()
        self._owns_ray = ensure_ray(address, workers * threads)
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._wait_for_cpus(workers * threads)
            self._program_ref = self._ray.put(program_bytes)
            self._cls = self._ray.remote(num_cpus=threads, max_restarts=0, max_task_retries=0)(ShardWorker)
            self._actors: list[Any] = [self._spawn(i) for i in range(workers)]
            self._inflight = [0] * workers
            self._has_keys: list[set] = [set() for _ in range(workers)]
            self._keys: dict[str, tuple] = {}
            for i in range(workers):
                self._ready(i, self._actors[i])
        except BaseException:
            self.close()
            raise
        self.setup_seconds = time.perf_counter() - t0

    # ------------------------------------------------------------------ the executor API
    def run(
        self,
        k: int,
        batch: _native.CiphertextBatch,
        relin: _native.RelinKey | None,
        galois: _native.GaloisKeys | None,
    ) -> JoinedBatch:
        """Segment ``k`` on its input ciphertexts; returns its output ciphertexts (exactly
        those of the in-process executor), as a :class:`~heinfer.cluster.wire.JoinedBatch`
        (their bytes, decoded on demand). Raises :class:`ClusterError` when the cluster
        cannot answer, and the worker's own :class:`~heinfer.errors.HeinferError` when the
        computation itself fails."""
        return self.run_serialized(k, [batch.to_bytes()], len(batch), relin, galois)

    def run_serialized(
        self,
        k: int,
        parts: list[bytes],
        count: int,
        relin: _native.RelinKey | None,
        galois: _native.GaloisKeys | None,
        drop_bits: list[int] | None = None,
    ) -> JoinedBatch:
        """:meth:`run` on the input as serialized batches ``parts`` (in order, ``count``
        ciphertexts in all), shipped as they are: the workers decode them, with full
        validation. :class:`heinfer.Server` calls this with the chunks
        it received, having validated them without decoding them
        (``CiphertextBatch.check_bytes``): the front end never builds the ciphertexts.
        ``drop_bits``: the workers serialize the output rounded (``CiphertextBatch.to_bytes``),
        as the server sends it to the client."""
        if self._closed:
            raise ClusterError("this Ray executor was closed")
        if (held := sum(batch_count(p) for p in parts)) != count:
            raise ProtocolError(f"the input parts hold {held} ciphertexts, segment {k} takes {count}")
        # the parts as they are, each a uint8 array: Ray copies them into the object store
        # once (no joined copy here) and each worker reads them there in place (bytes would
        # be copied out of the store in every worker); the worker decodes them one by one
        data = self._ray.put([np.frombuffer(p, np.uint8) for p in parts])
        key_id = self._key_id(relin, galois)
        shards = self.plan.segments[k]
        if shards.how == "giant-steps":  # the groups' sums on every worker, then one finishes
            sums = self._run_shards(k, data, count, key_id, [("giant", a, b) for a, b in shards.groups], None)
            n = self.program.layers[single_linear(self.program, k)].n_out
            (out,) = self._run_shards(k, self._ray.put(sums), len(sums) * n, key_id, [("finish", len(sums))], drop_bits)
            return join_batches(self.params, [out], batch_count(out), drop_bits)
        if shards.groups:  # rows or channels: one group of the outputs per worker
            outs = self._run_shards(k, data, count, key_id, list(shards.groups), drop_bits)
            return join_batches(self.params, outs, split_outputs(self.program, k), drop_bits)
        (part,) = self._run_shards(k, data, count, key_id, [None], drop_bits, shards.worker)
        return join_batches(self.params, [part], batch_count(part), drop_bits)

    def replan(self, split: str, network: NetworkModel | None = None) -> ShardPlan:
        """Changes how segments are split (:func:`~heinfer.cluster.plan.shard_plan` on the
        same workers) without restarting the actors; they prepare the new plan's output
        groups before this returns. A segment already running finishes under the plan it
        started with. Returns the new plan."""
        plan = shard_plan(self.program, len(self._actors), split, network or self.plan.network)
        if "layers" in (split, self.plan.split) and split != self.plan.split:
            raise NotSupportedYetError("switching to or from split='layers' changes what each actor holds: start a new RayExecutor")
        with self._lock:
            self.plan = plan
        for i in range(len(self._actors)):
            self._ready(i, self._actors[i])
        return plan

    def forget_keys(self, relin: _native.RelinKey | None, galois: _native.GaloisKeys | None) -> None:
        """Drops a session's keys from every actor (called when the session closes)."""
        key_id = _identity(relin, galois)
        with self._lock:
            if key_id is None or self._keys.pop(key_id, None) is None:
                return
            holders = [i for i, s in enumerate(self._has_keys) if key_id in s]
            for i in holders:
                self._has_keys[i].discard(key_id)
                self._actors[i].drop_keys.remote(key_id)

    def sessions_on_workers(self) -> list[int]:
        """How many sessions' keys each actor holds (asks them; for tests and monitoring)."""
        return self._ray.get([a.key_count.remote() for a in self._actors], timeout=self.timeout_s)

    def worker_stats(self) -> list[dict]:
        """Each actor's ``{"shards", "busy_s"}`` since it started (for benchmarks)."""
        return self._ray.get([a.stats.remote() for a in self._actors], timeout=self.timeout_s)

    @property
    def workers(self) -> int:
        """Number of actors."""
        return len(self._actors)

    def worker_pids(self) -> list[int]:
        """The process id of each actor, replacing the ones found dead (a health check)."""
        pids = []
        for i in range(len(self._actors)):
            actor = self._actors[i]
            try:
                pids.append(self._ray.get(actor.ping.remote(), timeout=self.timeout_s))
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.WorkerCrashedError):
                self._replace(i, actor)
                pids.append(self._ray.get(self._actors[i].ping.remote(), timeout=self.timeout_s))
        return pids

    def close(self) -> None:
        """Kills the actors and, when this executor started Ray, shuts it down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        stop_actors(self._ray, getattr(self, "_actors", []), getattr(self, "_owns_ray", False))

    def __enter__(self) -> RayExecutor:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals
    def _wait_for_cpus(self, need: int, grace_s: float = 10.0) -> None:
        """:class:`ClusterError` at once (after ``grace_s`` for CPUs being released) when
        the cluster cannot place the actors, rather than waiting ``timeout_s`` for them."""
        deadline = time.monotonic() + grace_s
        while True:
            free = float(self._ray.available_resources().get("CPU", 0.0))
            if free >= need:
                return
            if time.monotonic() > deadline:
                total = float(self._ray.cluster_resources().get("CPU", 0.0))
                raise ClusterError(
                    f"the Ray cluster has {free:g} free CPU(s) of {total:g}; {need} are needed "
                    f"({self.plan.workers} worker(s) of {self.threads} thread(s))"
                )
            time.sleep(0.1)

    def _spawn(self, i: int) -> Any:
        """A fresh actor for worker slot ``i`` (under ``layers``, holding that slot's block;
        the segments the plan splits prepared by groups of outputs, not whole)."""
        split = tuple(s.segment for s in self.plan.segments if s.groups)
        return self._cls.remote(self._program_ref, self.baseline, self.threads, self.plan.held_by(i), split)

    def _ready(self, i: int, actor: Any) -> None:
        """Waits until actor ``i`` is up and has prepared its output slices (and under
        ``layers``, holds the block of slot ``i``)."""
        groups: list[tuple] = []
        for s in self.plan.segments:
            layer = single_linear(self.program, s.segment)
            if s.how == "giant-steps":  # shard j runs on worker j (others prepare it on demand)
                groups += [("giant", layer, a, b) for j, (a, b) in enumerate(s.groups) if j % len(self._actors) == i]
                groups.append(("finish", layer))
            else:
                groups += [(layer, a, b) for a, b in s.groups]
        try:
            self._ray.get(actor.prepare.remote(groups), timeout=self.timeout_s)
        except self._ray.exceptions.GetTimeoutError:
            raise ClusterError(
                f"worker {i} did not start within {self.timeout_s:.0f} s: does the cluster have "
                f"{self.threads} free CPU(s) for each of the {len(self._actors) if hasattr(self, '_actors') else '?'} workers?"
            ) from None
        except self._ray.exceptions.RayError as e:
            raise ClusterError(f"worker {i} failed to start: {_short(e)}") from None

    def _key_id(self, relin: Any, galois: Any) -> str | None:
        key_id = _identity(relin, galois)
        if key_id is not None:
            with self._lock:
                if key_id not in self._keys:
                    rb = relin.to_bytes() if relin is not None else None
                    gb = galois.to_bytes() if galois is not None else None
                    # The objects are kept so that their ids stay unique while cached.
                    self._keys[key_id] = (relin, galois, self._ray.put((rb, gb)))
        return key_id

    def _submit(self, i: int, k: int, data: Any, count: int, key_id: str | None, rows: tuple | None, drop: list[int] | None) -> tuple[Any, Any]:
        """Submits one shard to actor ``i`` (its keys first, once); returns (actor, ref)."""
        with self._lock:
            actor = self._actors[i]
            if key_id is not None and key_id not in self._has_keys[i]:
                kb = self._keys.get(key_id)
                if kb is None:
                    raise ClusterError("the session's keys were dropped while its query ran")
                actor.put_keys.remote(key_id, kb[2])
                self._has_keys[i].add(key_id)
            self._inflight[i] += 1
        return actor, actor.run.remote(k, data, count, key_id, rows, drop)

    def _pick(self, n: int, owner: int | None = None) -> list[int]:
        """``n`` actor indices: the segment's ``owner`` (layers), the least busy first
        (queries), all of them in order (rows, channels)."""
        if owner is not None:
            return [owner]
        with self._lock:
            order = sorted(range(len(self._actors)), key=lambda i: self._inflight[i])
        return order[:n] if n == 1 else [j % len(self._actors) for j in range(n)]

    def _run_shards(
        self, k: int, data: Any, count: int, key_id: str | None, shards: list, drop: list[int] | None, owner: int | None = None
    ) -> list[bytes]:
        """Runs every shard (a group of outputs, or ``None`` for the whole segment; on worker
        ``owner`` when one holds the segment) to completion, replacing dead actors and
        re-running their shards; answers in shard order."""
        deadline = time.monotonic() + self.timeout_s
        slots = self._pick(len(shards), owner)
        pending = {j: (slots[j], *self._submit(slots[j], k, data, count, key_id, shards[j], drop)) for j in range(len(shards))}
        out: list[bytes | None] = [None] * len(shards)
        tries = [0] * len(shards)
        ray = self._ray
        while pending:
            j = next(iter(pending))
            i, actor, ref = pending.pop(j)
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ray.exceptions.GetTimeoutError()
                out[j] = ray.get(ref, timeout=left)
            except ray.exceptions.GetTimeoutError:
                self._settle(i)
                self._replace(i, actor)  # a stuck actor may hold the CPU: start afresh
                for ii, _, _ in pending.values():
                    self._settle(ii)
                raise ClusterError(
                    f"segment {k}, shard {j + 1}/{len(shards)} ({_rows(shards[j])}) got no answer within "
                    f"{self.timeout_s:.0f} s; the query was abandoned"
                ) from None
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError) as e:
                self._settle(i)
                tries[j] += 1
                self._replace(i, actor)
                if tries[j] > self.retries:
                    for ii, _, _ in pending.values():
                        self._settle(ii)
                    raise ClusterError(
                        f"segment {k}, shard {j + 1}/{len(shards)} ({_rows(shards[j])}): its worker died "
                        f"{tries[j]} times ({_short(e)}); giving up after {self.retries} re-runs"
                    ) from None
                with self._lock:
                    self.reruns += 1
                pending[j] = (i, *self._submit(i, k, data, count, key_id, shards[j], drop))
                continue
            except ray.exceptions.RayTaskError as e:
                self._settle(i)
                for ii, _, _ in pending.values():
                    self._settle(ii)
                cause = getattr(e, "cause", None)
                if isinstance(cause, HeinferError):
                    raise cause from None
                raise ClusterError(f"segment {k}, shard {j + 1}/{len(shards)} failed on its worker: {_short(e)}") from None
            self._settle(i)
        return out  # type: ignore[return-value]

    def _settle(self, i: int) -> None:
        with self._lock:
            self._inflight[i] = max(0, self._inflight[i] - 1)

    def _replace(self, i: int, dead: Any) -> None:
        """Actor ``i`` is replaced by a fresh one, unless another thread already did."""
        with self._lock:
            if self._closed or self._actors[i] is not dead:
                return
            kill_quietly(self._ray, dead)
            fresh = self._spawn(i)
            self._actors[i] = fresh
            self._has_keys[i] = set()
        self._ready(i, fresh)


def _check_worker_bytes(program: Program, plan: ShardPlan, limit: int) -> None:
    """Refuses a plan whose workers would prepare more than ``limit`` bytes of weights each
    (:func:`~heinfer.cluster.plan.prepared_bytes`: every worker prepares the whole program,
    except under ``layers``, where each prepares its block)."""
    sizes = [prepared_bytes(program, k) for k in range(len(program.segments))]
    held = [plan.held_by(i) for i in range(plan.workers)]
    need = max(sum(sizes[k] for k in h) if h is not None else sum(sizes) for h in held)
    if need <= limit:
        return
    if plan.split != "layers":
        raise NotSupportedYetError(
            f"each worker would prepare the program's whole weights ({sum(sizes)} bytes), more than one may hold "
            f"({limit}): split the program by layer tiles (split='layers') over enough workers"
        )
    raise ClusterError(
        f"with split='layers' on {plan.workers} worker(s) the largest block prepares {need} bytes of weights, more than "
        f"one worker may hold ({limit}): use more workers (a block is at least one segment: the largest takes "
        f"{max(sizes)} bytes)"
    )


def _identity(relin: Any, galois: Any) -> str | None:
    """A session's key id: the identities of its key objects (kept alive while cached)."""
    if relin is None and galois is None:
        return None
    return f"{id(relin):x}-{id(galois):x}"


def _rows(shard: tuple | None) -> str:
    if shard is None:
        return "whole segment"
    if shard[0] == "giant":
        return f"giant-step groups {shard[1]}–{shard[2]}"
    if shard[0] == "finish":
        return f"the sum of {shard[1]} giant-step shards"
    return f"outputs {shard[0]}–{shard[1]}"


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]
