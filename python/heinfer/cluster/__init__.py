"""Serving on a Ray cluster: the server's work on Ray actors (layer: ``heinfer.cluster``).

The gRPC front end and the protocol server stay as they are; :class:`RayExecutor` replaces
the in-process executor (same ``run`` signature) and spreads each segment over actors as its
:class:`ShardPlan` says (:mod:`heinfer.cluster.plan`): whole queries per worker, or
output-row groups of one linear layer per worker. Ray is an optional extra, imported only
when a :class:`RayExecutor` is made (``pip install 'heinfer[ray]'``); a local cluster binds
to 127.0.0.1 only (:mod:`heinfer.cluster.local`).

This layer imports program, compiler (the cost units), runtime, errors and the native
module; never protocol, serve or cli.

>>> ex = RayExecutor(program, workers=2)                        # doctest: +SKIP
>>> server = heinfer.Server(program, executor=ex)               # doctest: +SKIP
"""

from heinfer.cluster.plan import NetworkModel, SegmentShards, ShardPlan, shard_plan

__all__ = ["NetworkModel", "RayExecutor", "SegmentShards", "ShardPlan", "shard_plan"]


def __getattr__(name: str):
    """``RayExecutor`` is loaded on first use (it loads the native module, not Ray)."""
    if name == "RayExecutor":
        from heinfer.cluster.executor import RayExecutor

        return RayExecutor
    raise AttributeError(f"module 'heinfer.cluster' has no attribute {name!r}")
