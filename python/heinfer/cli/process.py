"""``heinfer serve`` in a child process, for the demo, the service benchmark and tests
(layer: ``heinfer.cli``).

:class:`ServerProcess` launches ``python -m heinfer.cli serve PROGRAM --port 0 …`` with
the running interpreter (so it works whether or not the ``heinfer`` script is installed),
reads the ``listening on HOST:PORT`` line (or the JSON event of ``--json``), waits until
the port accepts connections, and on exit sends SIGTERM (a graceful stop), then SIGKILL if
the server has not exited in time.

>>> with ServerProcess("model.hep") as server:          # doctest: +SKIP
...     run_cli("predict", "--server", server.address, "--model", "model.hep", ...)
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from types import TracebackType

__all__ = ["HEINFER", "ServerProcess", "rss_bytes", "run_cli"]

#: The command line of ``heinfer`` with this interpreter (no installed script needed).
HEINFER = [sys.executable, "-m", "heinfer.cli"]


def run_cli(
    *args: str, timeout: float | None = None, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Runs ``heinfer ARGS…`` in a child process, capturing stdout and stderr as text.

    With ``check`` a non-zero exit raises ``RuntimeError`` carrying the command's stderr.
    """
    proc = subprocess.run(
        [*HEINFER, *args], check=False, capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"heinfer {args[0]} exited with {proc.returncode}: {proc.stderr.strip()[-2000:]}"
        )
    return proc


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` (``VmRSS`` of ``/proc/PID/status``; Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no VmRSS for process {pid}")


class ServerProcess:
    """A ``heinfer serve`` child process listening on a free port of ``host``.

    ``args``: further options of ``heinfer serve`` (TLS, limits, ``--threads``…). ``env``:
    the child's environment (default: this one). ``address`` (``HOST:PORT``) and ``pid``
    are set once :meth:`start` returns; :meth:`stop` returns the server's exit status.
    """

    def __init__(
        self,
        program: str,
        *args: str,
        host: str = "127.0.0.1",
        env: dict | None = None,
        startup_timeout: float = 60.0,
        stop_timeout: float = 15.0,
    ) -> None:
        self.command = [*HEINFER, "serve", program, "--host", host, "--port", "0", *args]
        self.host = host
        self.env = env
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.address = ""
        self.proc: subprocess.Popen | None = None
        self.output = ""
        # closed in __exit__: the server's stderr outlives start() and stop()
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115

    @property
    def pid(self) -> int:
        """Process id of the server."""
        if self.proc is None:
            raise RuntimeError("the server is not running")
        return self.proc.pid

    def start(self) -> ServerProcess:
        """Launches the server and returns once its port accepts connections."""
        self.proc = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=self.env
        )
        try:
            line = self._first_line()
            if line.startswith("{"):  # --json: {"event": "listening", "address": …}
                self.address = str(json.loads(line).get("address", ""))
            elif line.startswith("listening on "):
                self.address = line.split()[-1]
            if not self.address:
                raise RuntimeError(f"heinfer serve printed {line!r}{self._stderr_tail()}")
            self._wait_accepting()
        except BaseException:
            self.stop()
            raise
        return self

    def _first_line(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        box: list[str] = []
        reader = threading.Thread(
            target=lambda: box.append(self.proc.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(self.startup_timeout)
        if not box or not box[0]:
            status = self.proc.poll()
            why = (
                f"exited with status {status}"
                if status is not None
                else f"printed no address within {self.startup_timeout:.0f} s"
            )
            raise RuntimeError(f"heinfer serve {why}{self._stderr_tail()}")
        return box[0].strip()

    def _wait_accepting(self) -> None:
        host, _, port = self.address.rpartition(":")
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                    return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(
                        f"heinfer serve does not accept connections on "
                        f"{self.address}{self._stderr_tail()}"
                    ) from None
                time.sleep(0.05)

    def _stderr_tail(self) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        text = self._stderr.read().strip()
        return f"\n--- server stderr ---\n{text[-3000:]}" if text else ""

    @property
    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after ``stop_timeout`` seconds; the exit status."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        self.output += out or ""
        return proc.returncode

    def __enter__(self) -> ServerProcess:  # noqa: PYI034 - Python 3.10: no typing.Self
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self._stderr.close()
