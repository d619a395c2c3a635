"""Ctrl-C reaches only the main thread; simulations in worker threads watch this flag.

The CLI sets it on SIGINT. The lock-step loop and every wait for an engine check it, so a
worker in the middle of a long simulation raises Interrupted within one window (or one poll
slice), its launch() context stops its engines, and the run ends within a second or two instead
of after the current row.
"""
from __future__ import annotations

import threading

from harness.errors import Interrupted

_CANCELLED = threading.Event()


def cancel() -> None:
    _CANCELLED.set()


def cancelled() -> bool:
    return _CANCELLED.is_set()


def reset() -> None:
    """Clear the flag (tests running several interrupted runs in one process)."""
    _CANCELLED.clear()


def check() -> None:
    """Raise Interrupted when the run was cancelled."""
    if _CANCELLED.is_set():
        raise Interrupted()
