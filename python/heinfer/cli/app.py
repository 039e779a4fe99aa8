"""The ``heinfer`` group and its local commands, ``compile`` and ``inspect``
(layer: ``heinfer.cli``).

Every user error (a bad file, a wrong model, a server that is down, a gRPC failure) prints
one line ``error: …`` on stderr and exits with status 1 (2 for usage errors and for features
this build does not have, :class:`~heinfer.errors.NotSupportedYetError`); no traceback. The
shared token is read from ``--token-file`` or the ``HEINFER_TOKEN`` environment variable,
never from the command line. There is no ``heinfer bench``: the service benchmark
(``bench/service.py``) needs the repository's models and scripts, which an installed package
does not have; run it from a checkout (``make bench-service``).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from typing import Any

import click

from heinfer.cli.files import (
    CliError,
    FiniteFloat,
    check_writable,
    error_line,
    load_array,
    load_program,
    to_json,
    write_atomic,
)
from heinfer.cli.network import serve
from heinfer.cli.predict import predict
from heinfer.explanation import auto_summary, bfv_choice_summary

__all__ = ["cli", "main", "public_name"]


class _Group(click.Group):
    """A click group that prints user errors as one line and exits non-zero."""

    def invoke(self, ctx: click.Context) -> Any:
        """Runs the command; turns the errors of :func:`error_line` into ``error: …``."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except KeyboardInterrupt:
            click.echo("error: interrupted", err=True)
            ctx.exit(130)
        except Exception as e:
            line = error_line(e)
            if line is None:
                raise
            message, code = line
            click.echo(f"error: {message}", err=True)
            ctx.exit(code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="heinfer", prog_name="heinfer", message="%(prog)s %(version)s")
def cli() -> None:
    """heinfer: neural-network inference on homomorphically encrypted data."""


@cli.command("compile")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Where to write the server's program (NAME.hep, with the weights); the client's "
    "public program (no weights) goes to NAME.public.hep next to it.",
)
@click.option(
    "--mode",
    type=click.Choice(["throughput", "latency", "auto"]),
    default="throughput",
    show_default=True,
    help="throughput: a batch per query; latency: one input, now; auto: the faster for "
    "--batch-size items.",
)
@click.option(
    "--security",
    type=click.Choice(["128", "192", "256"]),
    default="128",
    show_default=True,
    help="Classical security level in bits.",
)
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    help="Sample inputs sizing the scales: .npy, or .npz with array 'x'.",
)
@click.option("--input-bound", type=FiniteFloat(0.0, open_low=True), help="Largest |input| (without --calibration).")
@click.option("--packing", help="Throughput mode's batch layout: real, complex or coeff.")
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Items per request that --mode auto plans for; with --protocol two-party --mode "
    "throughput, the most items per query (default 256, fewer for networks with many "
    "activations).",
)
@click.option(
    "--protocol",
    type=click.Choice(["client-aided", "two-party"]),
    default="client-aided",
    show_default=True,
    help="How ReLU/max-pooling run: client-aided (the client sees pre-activations: no model "
    "privacy) or two-party (GAZELLE, latency or throughput mode: the client learns the output "
    "only; served by heinfer serve like any program).",
)
@click.option(
    "--features",
    type=click.Path(dir_okay=False),
    help="A public feature extractor (ONNX): MODEL classifies its outputs (LoLa's deep features); "
    "--calibration then holds raw inputs of the extractor.",
)
@click.option(
    "--items",
    type=click.IntRange(1),
    help="Latency mode (client-aided; --mode auto's latency candidate too): items per query, a "
    "power of two, each in its own lane of the slots (the layouts get N/(2·items) slots each; "
    "the ring grows if they need more).",
)
@click.option("--input-bits", type=click.IntRange(1), help="Throughput mode: bits of the inputs' encryption scale (default 24).")
@click.option("--weight-bits", type=click.IntRange(1), help="Throughput mode: bits of the largest weight (default 16).")
@click.option(
    "--tune-precision",
    is_flag=True,
    help="Throughput mode, with --calibration: move bits between --input-bits and "
    "--weight-bits (±4) where the plan keeps its parameters and levels, and keep the split "
    "whose simulated error on the calibration inputs is least (heinfer.tune_precision).",
)
@click.option(
    "--max-error",
    type=click.FloatRange(min=0.0, min_open=True),
    help="With --tune-precision: lower --input-bits and --weight-bits (by up to 4 each) to the "
    "plan the cost model prices cheapest whose simulated error, over the largest output on the "
    "calibration inputs, is at most this (e.g. 2e-4).",
)
@click.option(
    "--link-mbps",
    type=click.FloatRange(min=0.001),
    help="--protocol two-party: the client's link in Mbit/s (default 1000, GAZELLE's LAN), which "
    "latency mode's layouts and --mode auto price ciphertexts on: a slow link favours fewer "
    "ciphertexts over faster compute.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def compile_cmd(
    model: str,
    output: str,
    mode: str,
    security: str,
    calibration: str | None,
    input_bound: float | None,
    packing: str | None,
    batch_size: int,
    protocol: str,
    features: str | None,
    items: int | None,
    input_bits: int | None,
    weight_bits: int | None,
    tune_precision: bool,
    max_error: float | None,
    link_mbps: float | None,
    as_json: bool,
) -> None:
    """Compiles an ONNX MODEL into a program for encrypted inference: the server's
    (``-o NAME.hep``, with the weights) and the client's (``NAME.public.hep``, no weights;
    give clients only this one).

    Latency mode measures the engine's primitives on first use (cached), which takes a few
    seconds once.
    """
    import heinfer

    if not os.path.isfile(model):
        raise CliError(f"model file {model!r} does not exist")
    if os.path.basename(output).endswith(".public.hep"):  # clients are handed *.public.hep
        raise CliError(
            f"-o {output!r}: the server's program holds the weights and must not be named like a public one "
            "(*.public.hep); give -o NAME.hep and the public program is written to NAME.public.hep"
        )
    check_writable(output)  # before the compile, not after it
    calib = load_array(calibration, what="calibration") if calibration else None
    options: dict[str, Any] = {"packing": packing} if packing else {}
    if features is not None:
        if not os.path.isfile(features):
            raise CliError(f"feature extractor {features!r} does not exist")
        options["features"] = features
    bits = {k: v for k, v in (("input_bits", input_bits), ("weight_bits", weight_bits)) if v is not None}
    if (bits or tune_precision) and (mode != "throughput" or protocol != "client-aided" or features is not None):
        raise CliError("--input-bits, --weight-bits and --tune-precision apply to --mode throughput, client-aided, without --features")
    if max_error is not None and not tune_precision:
        raise CliError("--max-error applies with --tune-precision")
    if tune_precision and calib is None:
        raise CliError("--tune-precision needs --calibration (the inputs the splits are simulated on)")
    options.update(bits)
    if items is not None:
        if mode == "throughput" or protocol != "client-aided":
            raise CliError("--items applies to --mode latency or auto, client-aided")
        options["items"] = items
    if link_mbps is not None:
        if protocol != "two-party" or mode == "throughput":
            raise CliError("--link-mbps applies to --protocol two-party with --mode latency or auto")
        options["bandwidth"] = link_mbps * 1e6 / 8
    t0 = time.perf_counter()
    tuned = None
    if tune_precision:
        from heinfer.precision import tuned_program

        with _Spinner("tuning the precision", enabled=not as_json):
            found, table, program = tuned_program(
                model, calib, max_error=max_error, input_bound=input_bound, security=int(security), **options
            )
        options = {k: v for k, v in found.items() if k not in ("input_bound", "security")}
        tuned = next(r for r in table if (r["input_bits"], r["weight_bits"]) == (options["input_bits"], options["weight_bits"]))
    else:
        with _Spinner("compiling", enabled=not as_json), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", heinfer.PrecisionWarning)
            program = heinfer.compile(
                model,
                mode=mode,
                calibration=calib,
                input_bound=input_bound,
                security=int(security),
                batch_size=batch_size,
                protocol=protocol,
                **options,
            )
        for w in caught:  # the compiler's precision warning as a plain line on stderr; others as they were
            if issubclass(w.category, heinfer.PrecisionWarning):
                click.echo(f"warning: {w.message}", err=True)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    seconds = time.perf_counter() - t0
    data = program.to_bytes()
    public_path = public_name(output)
    public = program.public().to_bytes()
    write_atomic(output, data)
    write_atomic(public_path, public)
    if protocol == "two-party":
        _two_party_summary(program, output, public_path, data, public, seconds, as_json)
        return
    p = program.params
    summary = {
        **_written(program, output, public_path, data, public, seconds),
        "packing": program.packing,
        "batch_capacity": program.batch_capacity,
        "params": dict(p),
        "segments": len(program.segments),
        "client_steps": len(program.steps),
        "key_manifest": program.key_manifest,
        "predicted_error": (program.meta.get("predicted_error") or [None])[-1],
    }
    if tuned is not None:
        summary["tuned"] = tuned
    if program.mode == "latency":
        summary["predicted_s"] = program.predicted_s
    if "auto" in program.meta:
        summary["auto"] = program.meta["auto"]
    if as_json:
        click.echo(to_json(summary))
        return
    click.echo(
        _wrote_line(output, public_path, data, public, seconds) + "\n"
        f"  {program.mode} mode, {program.packing} packing, {program.batch_capacity} item(s) per "
        f"query; program id {program.id[:16]}…\n"
        f"  CKKS N = 2^{p['log_n']}, q = {p['log_q']} bits, P = {p['log_p'] or 'none'}, "
        f"{p['security']}-bit security; {len(program.segments)} server segment(s), "
        f"{len(program.steps)} client-aided step(s)"
        + (
            f"\n  precision tuned: input_bits={tuned['input_bits']}, weight_bits={tuned['weight_bits']} "
            f"(simulated error {tuned['simulated_error']:.2g} of the largest output)"
            if tuned
            else ""
        )
    )


def _written(program: Any, output: str, public_path: str, data: bytes, public: bytes, seconds: float) -> dict:
    """The summary fields every ``heinfer compile`` prints: files, sizes, id, time, mode."""
    return {
        "output": output,
        "public_output": public_path,
        "program_id": program.id,
        "bytes": len(data),
        "public_bytes": len(public),
        "seconds": seconds,
        "mode": program.mode,
    }


def _wrote_line(output: str, public_path: str, data: bytes, public: bytes, seconds: float) -> str:
    """The first line ``heinfer compile`` prints: both files, their sizes, the time."""
    return (
        f"wrote {output} ({len(data) / 1e3:.1f} kB, the server's: weights) and {public_path} "
        f"({len(public) / 1e3:.1f} kB, the clients': no weights) in {seconds:.2f} s"
    )


def _two_party_summary(program: Any, output: str, public_path: str, data: bytes, public: bytes, seconds: float, as_json: bool) -> None:
    """What ``heinfer compile --protocol two-party`` wrote."""
    b = program.bfv
    summary = {
        **_written(program, output, public_path, data, public, seconds),
        "protocol": "two-party",
        "bfv": dict(b),
        "segments": len(program.segments),
        "garbled_circuit_steps": len(program.steps),
        "rotation_keys": program.galois_key_count,
        "mode": program.mode,
        "batch_capacity": program.batch_capacity,
    }
    auto = program.meta.get("auto")
    if auto is not None:
        summary["auto"] = auto
    sim = program.meta.get("simulated_error")
    if sim is not None:
        summary["simulated_error"] = sim
    choice = program.meta.get("bfv_choice")
    if choice is not None:
        summary["bfv_choice"] = choice
    if as_json:
        click.echo(to_json(summary))
        return
    chosen = f"  {auto_summary(auto)}; the link priced at {auto['bandwidth'] * 8 / 1e9:g} Gbit/s\n" if auto is not None else ""
    if choice is not None:
        chosen += f"  {bfv_choice_summary(choice)}\n"
    if sim is not None:
        chosen += f"  fixed point simulated exactly on {sim['items']} calibration input(s): outputs off by up to {sim['rel_error']:.1%} of the largest\n"
    click.echo(
        _wrote_line(output, public_path, data, public, seconds) + "\n"
        + chosen
        + f"  two-party protocol (GAZELLE), {program.mode} mode, {program.batch_capacity} item(s) per query; "
        f"program id {program.id[:16]}…\n"
        f"  BFV N = 2^{b['log_n']}, q = {b['log_q']} bits, P = {b['log_p']}, p = {b['plain_modulus']}, "
        f"{b['security']}-bit security; {len(program.segments)} linear layer(s), {len(program.steps)} "
        f"garbled-circuit step(s), {program.galois_key_count} rotation keys\n"
        f"  serve it with heinfer serve {output}; clients run heinfer predict --model {public_path}"
    )


@cli.command("inspect")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option(
    "--ray-workers",
    type=click.IntRange(1, 4096),
    help="Also show how `heinfer serve --ray` would shard a server's program on this many workers.",
)
@click.option(
    "--ray-split",
    type=click.Choice(["auto", "queries", "rows", "channels", "giant-steps", "layers"]),
    default="auto",
    show_default=True,
    help="With --ray-workers: the split to show (as `heinfer serve --ray-split`).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def inspect_cmd(program: str, ray_workers: int | None, ray_split: str, as_json: bool) -> None:
    """Shows a compiled PROGRAM: parameters, levels, client steps, plan, keys and sizes."""
    from heinfer.cli.describe import describe, render

    prog = load_program(program)
    from heinfer.program.two_party import TwoPartyProgram

    if isinstance(prog, TwoPartyProgram):
        from heinfer.cli.describe_two_party import describe_two_party, render_two_party

        if ray_workers is not None:
            raise click.UsageError("--ray-workers: a two-party program's sessions go whole to one actor each; there is no shard plan to show")
        desc2 = describe_two_party(prog, size_bytes=os.path.getsize(program))
        if as_json:
            click.echo(to_json(desc2))
            return
        from rich.console import Console

        render_two_party(desc2, Console(soft_wrap=True))
        return
    desc = describe(prog, size_bytes=os.path.getsize(program), ray_workers=ray_workers, ray_split=ray_split)
    if as_json:
        click.echo(to_json(desc))
        return
    from rich.console import Console

    render(desc, Console(soft_wrap=True))


class _Spinner:
    """A rich spinner on stderr while a step runs (nothing when not a terminal)."""

    def __init__(self, text: str, enabled: bool = True) -> None:
        self.text, self.enabled = text, enabled and sys.stderr.isatty()
        self._status: Any = None

    def __enter__(self) -> None:
        if self.enabled:
            from rich.console import Console

            self._status = Console(stderr=True).status(self.text)
            self._status.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)


cli.add_command(serve)
cli.add_command(predict)


def public_name(output: str) -> str:
    """Where ``compile -o OUTPUT`` writes the public program: ``NAME.public.hep`` for
    ``NAME.hep`` (``OUTPUT.public.hep`` for other names)."""
    base = output.removesuffix(".hep")
    return base + ".public.hep"


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``heinfer`` console script."""
    cli.main(args=argv, prog_name="heinfer")


if __name__ == "__main__":
    main()
