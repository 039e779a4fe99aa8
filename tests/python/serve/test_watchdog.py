"""Stalled sends are found after the timeout; the reaper thread stops cleanly."""

from __future__ import annotations

import time

from heinfer.serve.sessions import Registry
from heinfer.serve.watchdog import Reaper, SendWatch

from .conftest import SMALL


class _Context:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def test_only_sends_older_than_the_timeout_are_stalled() -> None:
    w = SendWatch()
    old, new, done = _Context(), _Context(), _Context()
    w.sending(1, old)
    w.sending(3, done)
    w.sent(3)
    time.sleep(0.15)
    w.sending(2, new)
    assert w.stalled(0.1) == [old]
    assert w.stalled(0.1) == []  # reported once


def test_the_reaper_cancels_stalled_sends_and_stops(mlp) -> None:
    import dataclasses

    from heinfer.protocol import Server

    lim = dataclasses.replace(SMALL, query_timeout_s=0.1)
    w = SendWatch()
    reaper = Reaper(Registry(Server(mlp), lim), w, 0.02)
    ctx = _Context()
    w.sending(7, ctx)
    time.sleep(0.4)
    reaper.stop()
    assert ctx.cancelled and not reaper._thread.is_alive()
