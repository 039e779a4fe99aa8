"""Progress bars of the command line (layer: ``heinfer.cli``).

:class:`ProgressBars` turns the ``progress(stage, done, total)`` callbacks of a remote session
(stages ``"keygen"``, ``"upload"``, ``"query"``, ``"segment"``) into rich progress bars on
stderr. It draws
nothing when disabled (``--json``, ``--quiet``) or when stderr is not a terminal, so scripts
and logs see only the final summary.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

__all__ = ["LABELS", "ProgressBars"]

#: What each stage's bar says, and the unit it counts.
LABELS = {
    "keygen": ("generating keys", ""),
    "upload": ("uploading keys", "bytes"),
    "query": ("encrypted queries", "items"),
    "segment": ("segments of a query", "segments"),
}


class ProgressBars:
    """A context manager whose instances are ``progress(stage, done, total)`` callbacks.

    ``enabled=None`` draws when stderr is a terminal. Unknown stages get a bar of their own.
    """

    def __init__(self, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> ProgressBars:  # noqa: PYI034 - Python 3.10: no typing.Self
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description:<20}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Advances the bar of ``stage`` to ``done`` of ``total``."""
        if self._progress is None:
            return
        label, unit = LABELS.get(stage, (stage, ""))
        count = _count(done, total, unit)
        task = self._tasks.get(stage)
        if task is None:
            task = self._progress.add_task(label, total=max(total, 1), count=count)
            self._tasks[stage] = task
        self._progress.update(task, completed=done, total=max(total, 1), count=count)


def _count(done: int, total: int, unit: str) -> str:
    """``"3/5 items"``, or ``"1.2/3.4 MB"`` for bytes."""
    if unit == "bytes":
        return f"{done / 1e6:.1f}/{total / 1e6:.1f} MB"
    return f"{done}/{total}" + (f" {unit}" if unit else "")
