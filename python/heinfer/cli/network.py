"""``heinfer serve``: the gRPC service on a compiled program (layer: ``heinfer.cli``).

``serve`` runs the service (:func:`heinfer.serve.serve`) until SIGINT or SIGTERM, then stops
with a grace period; its first line on stdout is ``listening on HOST:PORT`` (``--port 0`` picks
a free port). Its client, ``heinfer predict``, is :mod:`heinfer.cli.predict`.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from typing import Any

import click

from heinfer.cli.files import CliError, FiniteFloat, load_program, load_server_program, read_pem, read_token, to_json
from heinfer.program.two_party import TwoPartyProgram

__all__ = ["LIMIT_OPTIONS", "serve"]

#: ``(Limits field, option, type, help)`` of every limit ``heinfer serve`` can set.
LIMIT_OPTIONS = (
    (
        "max_message_bytes",
        "--max-message-bytes",
        int,
        "Lower the program's message size bound (bytes).",
    ),
    (
        "max_key_bytes",
        "--max-key-bytes",
        int,
        "Lower the program's evaluation-key size bound (bytes).",
    ),
    ("max_part_bytes", "--max-part-bytes", int, "Largest part of a message on the wire (bytes)."),
    ("max_sessions", "--max-sessions", int, "Sessions open at once."),
    (
        "max_sessions_per_peer",
        "--max-sessions-per-peer",
        int,
        "Sessions open at once per client address.",
    ),
    ("max_concurrent_queries", "--max-concurrent-queries", int, "Queries running at once."),
    (
        "max_queries_per_peer",
        "--max-queries-per-peer",
        int,
        "Queries running at once per client address.",
    ),
    (
        "max_queries_per_session",
        "--max-queries-per-session",
        int,
        "Queries one session may start over its life (then the client opens a new one).",
    ),
    ("idle_timeout_s", "--idle-timeout", float, "Seconds before an idle session is closed."),
    ("query_timeout_s", "--query-timeout", float, "Seconds to wait for a client message."),
)


def _limit_options(f: Any) -> Any:
    from heinfer.serve.limits import Limits

    defaults = Limits()
    for field, opt, typ, text in reversed(LIMIT_OPTIONS):
        shown = getattr(defaults, field, None)
        if shown is None:
            shown = "no cap" if field == "max_queries_per_session" else "the program's bound"
        f = click.option(opt, field, type=typ, default=None, help=f"{text} [default: {shown}]")(f)
    return f


def _limits(given: dict[str, Any]) -> Any:
    """A :class:`heinfer.serve.Limits` with the given fields over its defaults."""
    from heinfer.serve import Limits

    known = {f.name for f in dataclasses.fields(Limits)}
    set_ = {k: v for k, v in given.items() if v is not None}
    for k, v in set_.items():
        if k not in known:
            raise CliError(f"this server has no limit {k!r}")
        if v <= 0:
            raise CliError(f"--{k.replace('_', '-')} must be positive, got {v}")
    try:
        return Limits(**set_)
    except ValueError as e:
        raise CliError(str(e)) from None


@click.command("serve")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on (0.0.0.0: every interface; needs TLS or --insecure).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=50051,
    show_default=True,
    help="TCP port (0 picks a free one; the first line printed names it).",
)
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Server certificate chain (PEM).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="Server private key (PEM).")
@click.option(
    "--tls-client-ca",
    type=click.Path(dir_okay=False),
    help="CA of client certificates: require mutual TLS.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="File holding the shared token clients must present (default: $HEINFER_TOKEN, if set).",
)
@click.option(
    "--insecure",
    is_flag=True,
    help="Allow listening without TLS on an address that is not loopback (everything, session "
    "secrets and token included, travels in clear; the inputs stay encrypted).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=8,
    show_default=True,
    help="gRPC worker threads.",
)
@click.option(
    "--threads", type=click.IntRange(1, 1024), help="Threads of the HE engine (default: all cores)."
)
@click.option(
    "--grace",
    type=FiniteFloat(0.0),
    default=5.0,
    show_default=True,
    help="Seconds running queries get to finish on SIGINT/SIGTERM.",
)
@click.option(
    "--ray",
    "ray_address",
    is_flag=False,
    flag_value="local",
    default=None,
    metavar="[ADDRESS]",
    help="Run the server's work on Ray actors: on the cluster at ADDRESS (host:port of `ray "
    "start --head`, or auto), or, with no ADDRESS, on a local Ray started on 127.0.0.1. "
    "Needs heinfer[ray].",
)
@click.option(
    "--ray-workers",
    type=click.IntRange(1, 4096),
    default=2,
    show_default=True,
    help="Ray actors (one CPU each) with --ray.",
)
@click.option(
    "--ray-split",
    type=click.Choice(["auto", "queries", "rows", "channels", "giant-steps", "layers"]),
    default="auto",
    show_default=True,
    help="With --ray: whole queries per actor, output-row groups of a throughput-mode layer, groups of "
    "output ciphertexts or of giant steps of a latency-mode layer, chosen per segment, or layer tiles (each "
    "actor holds a block of the segments: large models).",
)
@click.option(
    "--max-memory-gb",
    type=FiniteFloat(0.0),
    help="GB of encoded plaintexts the server keeps; beyond it the largest segments are encoded "
    "during each query (default: half of physical memory, at most 0.8 of what is available).",
)
@_limit_options
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON lines.")
def serve(
    program: str,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    tls_client_ca: str | None,
    token_file: str | None,
    insecure: bool,
    workers: int,
    threads: int | None,
    grace: float,
    ray_address: str | None,
    ray_workers: int,
    ray_split: str,
    max_memory_gb: float | None,
    as_json: bool,
    **limits: Any,
) -> None:
    """Serves encrypted inference on a compiled PROGRAM (the server's NAME.hep, with the
    weights; a public program is refused) until SIGINT or SIGTERM. With --ray the gRPC front
    end stays here and the segments run on Ray actors."""
    import heinfer

    prog = load_program(program)
    if isinstance(prog, TwoPartyProgram):
        if threads is not None:
            heinfer.set_num_threads(threads)
        tls2 = _server_tls(tls_cert, tls_key, tls_client_ca)
        ray = _ray_options(ray_address, ray_workers, ray_split)
        ray.pop("ray_split", None)  # whole sessions per actor: the protocol keeps state per session
        _serve_two_party(
            prog, program, host, port, grace, as_json, tls2, read_token(token_file), insecure,
            None if max_memory_gb is None else int(max_memory_gb * 1e9), _limits(limits), ray,
        )
        return
    prog = load_server_program(program)
    tls = _server_tls(tls_cert, tls_key, tls_client_ca)
    token = read_token(token_file)
    limits_ = _limits(limits)
    if threads is not None:
        heinfer.set_num_threads(threads)
    from heinfer.serve import serve as start

    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            handle = start(
                prog,
                f"{_host(host)}:{port}",
                limits=limits_,
                tls=tls,
                token=token,
                max_workers=workers,
                insecure=insecure,
                max_memory=None if max_memory_gb is None else int(max_memory_gb * 1e9),
                **_ray_options(ray_address, ray_workers, ray_split),
            )
        except (ValueError, NotImplementedError) as e:  # the service refuses an argument
            raise CliError(f"cannot serve: {e}") from None
        except heinfer.ClusterError as e:
            raise CliError(f"cannot start the Ray backend: {e}") from None
        if ray_address:  # ray.init installs its own SIGTERM handler: ours must win
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        security = ("mutual TLS" if tls_client_ca else "TLS") if tls else "no TLS (plaintext)"
        facts = {"tls": tls is not None, "mtls": bool(tls_client_ca), "token": token is not None}
        if ray_address:
            facts["ray"] = {"address": ray_address, "workers": ray_workers, "split": ray_split}
        address = f"{_host(host)}:{handle.port}"
        if as_json:
            event = {"event": "listening", "address": address, "port": handle.port, **facts}
            click.echo(to_json({**event, "pid": os.getpid()}))
        else:
            click.echo(f"listening on {address}")
            click.echo(
                f"  program {program}: {prog.mode} mode, {prog.batch_capacity} item(s)/query; "
                f"{security}; token {'required' if token else 'not required'}; "
                f"{workers} workers"
                + (f"; Ray backend, {ray_workers} actor(s) on {_ray_where(ray_address)}" if ray_address else "")
                + ". Stop with Ctrl-C or SIGTERM."
            )
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
        _stop(handle, grace, as_json)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _serve_two_party(
    prog: TwoPartyProgram, path: str, host: str, port: int, grace: float, as_json: bool, tls: Any, token: str | None, insecure: bool,
    max_memory: int | None = None, limits: Any = None, ray: dict | None = None,
) -> None:
    """``heinfer serve`` for a two-party program: the ``TwoParty`` service (its session caps and
    idle timeout from the same limit options as the CKKS service); with ``--ray``, whole
    sessions on Ray actors."""
    import heinfer
    from heinfer.serve.two_party import serve_two_party

    if prog.is_public:
        raise CliError(f"{path!r} is a public program (no weights): serve the NAME.hep that heinfer compile wrote")
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            handle = serve_two_party(prog, f"{_host(host)}:{port}", tls=tls, token=token, insecure=insecure, max_memory=max_memory,
                                     limits=limits, **(ray or {}))
        except ValueError as e:
            raise CliError(f"cannot serve: {e}") from None
        except heinfer.ClusterError as e:
            raise CliError(f"cannot start the Ray backend: {e}") from None
        if ray:  # ray.init installs its own SIGTERM handler: ours must win
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
        address = f"{_host(host)}:{handle.port}"
        if as_json:
            facts = {"tls": tls is not None, "token": token is not None}
            if ray:
                facts["ray"] = {"address": ray["ray_address"] or "local", "workers": ray["ray_workers"]}
            click.echo(to_json({"event": "listening", "address": address, "port": handle.port, "protocol": "two-party", **facts, "pid": os.getpid()}))
        else:
            security = "TLS" if tls else "no TLS (plaintext)"
            where = f"; Ray backend, {ray['ray_workers']} actor(s) holding whole sessions" if ray else ""
            click.echo(f"listening on {address}\n  program {path}: two-party protocol (GAZELLE), one item per query; {security}; "
                       f"token {'required' if token else 'not required'}{where}. Stop with Ctrl-C or SIGTERM.")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
        t0 = time.perf_counter()
        handle.stop(grace)
        stats = {"sessions": handle.service.sessions, "errors": handle.service.errors}
        if as_json:
            click.echo(to_json({"event": "stopped", "seconds": time.perf_counter() - t0, "stats": stats}))
        else:
            click.echo(f"stopped: {stats['sessions']} session(s), {stats['errors']} error(s)")
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _ray_options(address: str | None, workers: int, split: str) -> dict:
    """The keyword arguments of :func:`heinfer.serve.serve` for ``--ray [ADDRESS]``."""
    if address is None:
        return {}
    return {"backend": "ray", "ray_address": None if address == "local" else address, "ray_workers": workers, "ray_split": split}


def _ray_where(address: str) -> str:
    return "a local Ray (127.0.0.1)" if address == "local" else f"the Ray cluster at {address}"


def _stop(handle: Any, grace: float, as_json: bool) -> None:
    """Stops the service (running queries get ``grace`` seconds) and prints its counters."""
    t0 = time.perf_counter()
    handle.stop(grace)
    seconds = time.perf_counter() - t0
    stats = _stats(handle)
    if as_json:
        click.echo(to_json({"event": "stopped", "seconds": seconds, "stats": stats}))
    else:
        click.echo(f"stopped ({seconds:.1f} s)" + (f": {_stats_line(stats)}" if stats else ""))


def _host(host: str) -> str:
    """An IPv6 literal in brackets, as gRPC addresses want it."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _stats(handle: Any) -> dict:
    try:
        return dict(handle.stats())
    except Exception:  # noqa: BLE001 - statistics are a courtesy at shutdown
        return {}


def _stats_line(stats: dict) -> str:
    return ", ".join(
        f"{k.replace('_', ' ')} {v}" for k, v in stats.items() if isinstance(v, (int, float, str))
    )


def _server_tls(cert: str | None, key: str | None, client_ca: str | None) -> Any:
    if cert is None and key is None:
        if client_ca is not None:
            raise CliError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        raise CliError("TLS needs both --tls-cert and --tls-key")
    from heinfer.serve import TlsConfig

    return TlsConfig(
        cert_chain=read_pem(cert, "CERTIFICATE", "--tls-cert"),
        private_key=read_pem(key, "PRIVATE KEY", "--tls-key"),
        root_cert=read_pem(client_ca, "CERTIFICATE", "--tls-client-ca") if client_ca else None,
        require_client_cert=client_ca is not None,
    )
