"""``heinfer predict``: a client of the gRPC service (layer: ``heinfer.cli``).

Opens a session (:func:`heinfer.serve.connect`: keys generated locally, evaluation keys
uploaded), runs the inputs as encrypted queries, writes the decrypted outputs and prints a
summary; against a two-party service, one query per item (:mod:`heinfer.serve.two_party`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import click
import numpy as np

from heinfer.cli.files import CliError, FiniteFloat, check_writable, load_array, load_client_program, load_program, read_pem, read_token, to_json
from heinfer.errors import HeinferError
from heinfer.program.two_party import TwoPartyProgram

__all__ = ["predict"]


def _client_tls(ca: str | None, cert: str | None, key: str | None) -> Any:
    if ca is None:
        if cert is not None or key is not None:
            raise CliError("a client certificate needs --tls-ca (the server's CA)")
        return None
    if (cert is None) != (key is None):
        raise CliError("a client certificate needs both --tls-cert and --tls-key")
    from heinfer.serve import TlsConfig

    return TlsConfig(
        root_cert=read_pem(ca, "CERTIFICATE", "--tls-ca"),
        cert_chain=read_pem(cert, "CERTIFICATE", "--tls-cert") if cert else None,
        private_key=read_pem(key, "PRIVATE KEY", "--tls-key") if key else None,
    )


def _check_address(server: str) -> None:
    host, sep, port = server.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--server must be HOST:PORT (e.g. 127.0.0.1:50051), got {server!r}")


@click.command("predict")
@click.argument("inputs", type=click.Path(dir_okay=False))
@click.option("--server", required=True, help="HOST:PORT of a `heinfer serve`.")
@click.option(
    "--model",
    required=True,
    type=click.Path(dir_okay=False),
    help="The public program of the model the server runs (NAME.public.hep; a file with the "
    "weights works but draws a warning).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Where to write the decrypted outputs (.npy).",
)
@click.option("--input-key", default="x", show_default=True, help="Array of an .npz input.")
@click.option(
    "--features",
    type=click.Path(dir_okay=False),
    help="The public feature extractor (ONNX) a deep-feature classifier was compiled for: run on "
    "INPUTS in the clear here, only its features are encrypted.",
)
@click.option("--tls-ca", type=click.Path(dir_okay=False), help="CA of the server (PEM): use TLS.")
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Client certificate (mTLS).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="Client private key (mTLS).")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="File holding the shared token (default: $HEINFER_TOKEN, if set).",
)
@click.option(
    "--timeout", type=FiniteFloat(0.0, open_low=True), default=600.0, show_default=True, help="Seconds each call may take."
)
@click.option("--threads", type=click.IntRange(1, 1024), help="Client threads (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object; no progress bars.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
def predict(
    inputs: str,
    server: str,
    model: str,
    output: str,
    input_key: str,
    features: str | None,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    token_file: str | None,
    timeout: float,
    threads: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Encrypts INPUTS (.npy, or .npz with array 'x'), runs them on a server, decrypts."""
    import heinfer
    from heinfer.cli.progress import ProgressBars

    _check_address(server)
    check_writable(output)  # before the queries: their results are not lost to a bad path
    prog = load_program(model)
    if isinstance(prog, TwoPartyProgram):
        if not prog.is_public:
            click.echo(
                f"warning: {model!r} holds the model's weights (a server program); a client needs only the public "
                "program (NAME.public.hep from heinfer compile) — do not hand the weights to clients",
                err=True,
            )
        tls = _client_tls(tls_ca, tls_cert, tls_key)
        _predict_two_party(prog.public(), inputs, server, output, input_key, timeout, threads, as_json, tls, read_token(token_file))
        return
    prog = load_client_program(model)
    x = load_array(inputs, key=input_key)
    if features is not None or "features_sha256" in prog.meta:
        from heinfer.features import FeatureExtractor

        if features is None:
            raise CliError("this model classifies deep features: give --features EXTRACTOR.onnx (the one it was compiled with)")
        if not os.path.isfile(features):
            raise CliError(f"feature extractor {features!r} does not exist")
        ext = FeatureExtractor(features)
        ext.check_program(prog.meta)
        x = ext(x)
    x = _items(x, prog.input_shape)
    if threads is not None:
        heinfer.set_num_threads(threads)
    tls = _client_tls(tls_ca, tls_cert, tls_key)
    token = read_token(token_file)
    from heinfer.serve import connect

    t0 = time.perf_counter()
    bars = ProgressBars(enabled=False if (as_json or quiet) else None)
    try:
        with bars, connect(server, prog, tls=tls, token=token, timeout_s=timeout,
                           progress=bars) as s:  # fmt: skip
            result = s.infer(x)
    except HeinferError as e:
        if getattr(e, "code", None) != "UNAVAILABLE":
            raise
        hint = (
            "with TLS: is --tls-ca the server's CA, and does the server want a client "
            "certificate (--tls-cert/--tls-key)?"
            if tls is not None
            else "is the server running there, and does it use TLS (then give --tls-ca)?"
        )
        raise CliError(f"unavailable: {e} ({hint})") from None
    wall = time.perf_counter() - t0
    out = np.asarray(result.outputs)
    _save(output, out)
    r = dict(result.report)
    n = int(r.get("items", len(x)))
    summary = {
        "server": server,
        "model": model,
        "output": output,
        "output_shape": list(out.shape),
        "wall_s": wall,
        **r,
    }
    latency = float(r.get("queries_s", wall))
    summary["items_per_s"] = n / latency if latency > 0 else None
    if as_json:
        click.echo(to_json(summary))
    else:
        click.echo(_summary_text(summary))


def _save(path: str, out: np.ndarray) -> None:
    try:
        with open(path, "wb") as f:
            np.save(f, out, allow_pickle=False)
    except OSError as e:
        raise CliError(f"cannot write {path!r}: {e.strerror or e}") from None


def _plural(queries: object) -> str:
    return "query" if queries == 1 else "queries"


def _summary_text(s: dict) -> str:
    n = s.get("items", 0)
    up = s.get("wire_bytes_up", s.get("bytes_up", 0))
    down = s.get("wire_bytes_down", s.get("bytes_down", 0))
    queries = s.get("queries", "?")
    rate = f"{s['items_per_s']:.0f} items/s" if s.get("items_per_s") else "n/a"
    return "\n".join(
        [
            f"{n} items in {queries} encrypted {_plural(queries)} on {s['server']}",
            (
                f"  latency:     {s.get('queries_s', s['wall_s']):.3f} s for the queries, "
                f"{s.get('rounds', 0)} client-aided rounds (session set-up: keys generated and "
                f"uploaded in {s.get('session_s', 0.0):.3f} s; {s['wall_s']:.3f} s in all)"
            ),
            f"  throughput:  {rate}",
            (
                f"  on the wire: {up / 1e6:.2f} MB up, {down / 1e6:.2f} MB down "
                f"({(up + down) / max(n, 1) / 1e3:.1f} kB per item)"
            ),
            f"  outputs:     {s['output']} {tuple(s['output_shape'])}",
        ]
    )


def _items(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` as a batch of items of ``shape`` (one item may come without its batch axis)."""
    if x.shape == tuple(shape):
        x = x[None]
    if x.ndim != len(shape) + 1 or x.shape[1:] != tuple(shape):
        raise CliError(f"inputs have shape {x.shape}; the model takes (n, *{tuple(shape)})")
    return x


def _predict_two_party(
    prog: TwoPartyProgram, inputs: str, server: str, output: str, input_key: str, timeout: float, threads: int | None, as_json: bool,
    tls: Any = None, token: str | None = None,
) -> None:
    """``heinfer predict`` against a two-party service: one query per item."""
    import heinfer
    from heinfer.serve.two_party import connect_two_party

    x = _items(load_array(inputs, key=input_key), prog.input_shape)
    if threads is not None:
        heinfer.set_num_threads(threads)
    t0 = time.perf_counter()
    try:
        with connect_two_party(server, prog, timeout_s=timeout, tls=tls, token=token) as conn:
            out, rep = conn.infer(x)
    except HeinferError as e:
        raise CliError(f"two-party query failed: {e}") from None
    _save(output, out)
    report = {"items": len(x), "seconds": time.perf_counter() - t0, "protocol": "two-party", **rep}
    if as_json:
        click.echo(to_json(report))
    else:
        click.echo(
            f"wrote {output}: {len(x)} item(s) in {report['seconds']:.2f} s (two-party: offline "
            f"{rep['offline_bytes'] / 1e6:.1f} MB, online {rep['online_bytes'] / 1e6:.1f} MB, set-up {rep['setup_bytes'] / 1e6:.1f} MB)"
        )
