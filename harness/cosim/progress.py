"""The progress line: simulated time, share of the expected work where known (with the time
left), events per second.

The CLI opens one reporter per run (:func:`reporting`), on stderr, with ``cosim.progress``:
``auto`` shows it only when stderr is a terminal, ``true`` always, ``false`` never. It appears
once the run has taken DELAY_S, so short runs print nothing extra. The lock-step loop feeds it
(:meth:`Progress.simulated`, throttled there to a few calls a second); experiments made of
several simulations or engine runs say how far they are (:meth:`Progress.work`). Rendering is
rich's: a transient line that disappears when the run ends.
"""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

from harness.errors import ConfigError

MODES = ("auto", "true", "false")
DELAY_S = 2.0
# How often the lock-step loop reports (seconds of wall time): rich redraws 4 times a second.
TICK_S = 0.25

_current: "Progress | None" = None


def parse_mode(value) -> str:
    """cosim.progress as one of MODES (Hydra turns true/false into booleans, the schema into 'True')."""
    text = str(value).strip().lower()
    if text not in MODES:
        raise ConfigError("cosim.progress", f"'{value}' is not one of: {', '.join(MODES)}")
    return text


def wanted(mode: str, stream=None) -> bool:
    stream = stream or sys.stderr
    if mode == "auto":
        return hasattr(stream, "isatty") and stream.isatty()
    return mode == "true"


class Progress:
    """One run's progress line. Thread-safe: rows simulated in worker threads all report here."""

    def __init__(self, force_terminal: bool, delay_s: float = DELAY_S):
        self._force = force_terminal
        self._start = time.monotonic()
        self._delay_s = delay_s
        self._lock = threading.Lock()
        self._bar = None
        self._task = None
        self._done = 0
        self._total: int | None = None
        self._label = ""
        self._sim_ps = 0
        self._events = 0
        self._rate_mark: tuple[float, int] | None = None
        self._events_per_s = 0.0
        self._work_start: tuple[float, int] | None = None

    # ------------------------------------------------------------ what the run reports
    def work(self, done: int, total: int | None, label: str = "") -> None:
        """Units of the expected work finished (rows, injection rates, a figure's runs) out of
        total; the line then shows the time left, from the mean time per unit so far."""
        with self._lock:
            if self._work_start is None:
                self._work_start = (time.monotonic(), done)
            self._done, self._total, self._label = done, total, label
            self._refresh()

    def _eta_s(self) -> float | None:
        if not self._total or self._work_start is None or self._done <= self._work_start[1]:
            return None
        per_unit = (time.monotonic() - self._work_start[0]) / (self._done - self._work_start[1])
        return per_unit * (self._total - self._done)

    def simulated(self, sim_ps: int, events: int) -> None:
        """The lock-step loop's simulated time and the engines' cumulative event count."""
        with self._lock:
            now = time.monotonic()
            if self._rate_mark is not None and events >= self._rate_mark[1] and now > self._rate_mark[0]:
                self._events_per_s = (events - self._rate_mark[1]) / (now - self._rate_mark[0])
            self._rate_mark = (now, events)
            self._sim_ps, self._events = sim_ps, events
            self._refresh()

    # ------------------------------------------------------------ drawing
    def _status(self) -> str:
        parts = [f"sim {self._sim_ps / 1e6:,.3f} us"]
        if self._events_per_s:
            parts.append(f"{self._events_per_s / 1e6:.2f} M events/s")
        if self._total:
            parts.insert(0, f"{self._label or 'done'} {self._done}/{self._total}")
            eta = self._eta_s()
            if eta is not None:
                parts.append(f"~{eta / 60:.1f} min left" if eta >= 60 else f"~{eta:.0f} s left")
        return " | ".join(parts)

    def _refresh(self) -> None:
        if self._bar is None:
            if time.monotonic() - self._start < self._delay_s:
                return
            self._open()
        self._bar.update(self._task, completed=self._done, total=self._total, status=self._status())

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress as RichProgress, TaskProgressColumn, TextColumn, TimeElapsedColumn

        console = Console(stderr=True, force_terminal=self._force or None)
        self._bar = RichProgress(TextColumn("cais-sim"), BarColumn(), TaskProgressColumn(),
                                 TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                                 console=console, transient=True)
        self._task = self._bar.add_task("run", total=self._total, status="")
        self._bar.start()

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.stop()
                self._bar = None


def current() -> Progress | None:
    """The reporter of the run in progress, or None (progress off, or not run from the CLI)."""
    return _current


@contextmanager
def reporting(mode, stream=None, delay_s: float = DELAY_S):
    """Open the run's reporter for `mode` (cosim.progress) and close it however the run ends."""
    global _current
    mode = parse_mode(mode)
    if not wanted(mode, stream):
        yield None
        return
    _current = Progress(force_terminal=mode == "true", delay_s=delay_s)
    try:
        yield _current
    finally:
        _current.close()
        _current = None
