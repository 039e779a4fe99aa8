"""Reaching a Ray cluster: import Ray lazily, start a local one on loopback, or join one.

Layer: ``heinfer.cluster``. Ray is an optional extra (``pip install heinfer[ray]``):
:func:`require_ray` imports it on first use and raises
:class:`~heinfer.errors.ClusterError` naming the extra when it is missing. A local cluster
(no address) is started on ``127.0.0.1`` only: the node address, the object store, the
workers and every port bind to loopback, the dashboard is off and usage reporting is
disabled, so nothing leaves the machine.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from heinfer.errors import ClusterError

__all__ = ["LOOPBACK", "ensure_ray", "release_ray", "require_ray"]

#: The only address a local cluster uses.
LOOPBACK = "127.0.0.1"

_lock = threading.Lock()
_owned = 0  # executors using a cluster this module started (shut down when the last goes)


def require_ray() -> Any:
    """The ``ray`` module, or :class:`ClusterError` telling how to install it."""
    _loopback_environment()
    try:
        import ray
    except ImportError as e:
        raise ClusterError(
            "the Ray backend needs Ray: install heinfer[ray] (pip install 'heinfer[ray]', "
            f"which pins ray==2.60.0); importing it failed: {e}"
        ) from None
    return ray


def _loopback_environment() -> None:
    """Environment Ray reads at import and passes to the processes it starts: no usage
    reporting, and the loopback address kept as the node address (by default Ray replaces
    ``127.0.0.1`` with the machine's routable address)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def ensure_ray(address: str | None, workers: int) -> bool:
    """Connects this process to Ray: to the cluster at ``address`` (``"host:port"`` of
    ``ray start --head``, or ``"auto"``), or, with ``None``, to the Ray already initialized
    in this process or to a new local one on loopback with ``workers`` CPUs. Returns whether
    this call started or joined it (then :func:`release_ray` shuts it down)."""
    global _owned
    ray = require_ray()
    with _lock:
        if ray.is_initialized():
            if address is not None and _owned == 0:
                raise ClusterError(f"Ray is already initialized in this process; cannot also join {address}")
            if _owned:
                _owned += 1
                return True
            return False
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False, "namespace": "heinfer"}
        try:
            if address is None:
                _keep_loopback(ray)
                ray.init(num_cpus=workers, _node_ip_address=LOOPBACK, **kwargs)
                if ray.nodes() and any(n.get("NodeManagerAddress") != LOOPBACK for n in ray.nodes()):
                    ray.shutdown()
                    raise ClusterError("the local Ray node did not bind to 127.0.0.1; refusing to run on another address")
            else:
                _check_address(address)
                host = address.rpartition(":")[0].strip("[]")
                local_ip = LOOPBACK if host in ("localhost", LOOPBACK) else None
                ray.init(address=address, _node_ip_address=local_ip, **kwargs) if local_ip else ray.init(address=address, **kwargs)
        except ClusterError:
            raise
        except Exception as e:  # noqa: BLE001 - Ray raises many kinds (ConnectionError, RuntimeError, ...)
            where = f"the Ray cluster at {address}" if address else "a local Ray cluster on 127.0.0.1"
            raise ClusterError(f"cannot start or reach {where}: {type(e).__name__}: {e}") from None
        _owned += 1
        return True


def kill_quietly(ray: Any, actor: Any) -> None:
    """Kills a Ray actor; one that is already gone is fine."""
    try:
        ray.kill(actor)
    except Exception:  # noqa: BLE001, S110 - already gone
        pass


def stop_actors(ray: Any, actors: list, owned: bool) -> None:
    """Kills ``actors`` and, when ``owned`` (this backend's :func:`ensure_ray` started or joined
    Ray), releases it with :func:`release_ray`."""
    for a in actors:
        kill_quietly(ray, a)
    if owned:
        release_ray()


def release_ray() -> None:
    """Undoes one :func:`ensure_ray` that returned ``True``: the last one shuts Ray down in
    this process (a local cluster stops; a joined cluster keeps running)."""
    global _owned
    ray = require_ray()
    with _lock:
        _owned = max(0, _owned - 1)
        if _owned == 0 and ray.is_initialized():
            ray.shutdown()


def _keep_loopback(ray: Any) -> None:
    """Ray imported before :func:`require_ray` set the environment read the flag already:
    set it where ``ray._private.services`` reads it at call time (a private name of Ray
    2.60; the check after ``ray.init`` refuses a non-loopback node should it move)."""
    consts = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if consts is not None and getattr(consts, "ENABLE_RAY_CLUSTER", False):
        consts.ENABLE_RAY_CLUSTER = False


def _check_address(address: str) -> None:
    if address == "auto":
        return
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"a Ray address is 'host:port' (e.g. 127.0.0.1:6379) or 'auto', got {address!r}")

