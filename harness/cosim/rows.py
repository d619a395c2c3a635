"""Simulating the rows of an experiment one after another, or several at a time, interruptibly.

With one job the rows run in the calling thread, so Ctrl-C (KeyboardInterrupt) unwinds the
simulation in progress directly. With more, rows run in worker threads, which Ctrl-C does not
reach: the CLI's SIGINT handler sets the cancellation flag (harness.cosim.cancel), every worker's
lock-step loop raises Interrupted within a window, its engines are stopped, and rows not yet
started are dropped, so the run ends in about a second instead of after the rows in progress.
The progress line counts the rows done.
"""
from __future__ import annotations

from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence

from harness.cosim import cancel, progress


def map_rows(fn: Callable[[Any], Any], rows: Sequence, jobs: int = 1, label: str = "rows") -> list:
    """[fn(row) for row in rows], `jobs` at a time; the first failure (or Ctrl-C) ends them all."""
    reporter = progress.current()
    total = len(rows)
    if reporter is not None:
        reporter.work(0, total, label)
    if jobs <= 1:
        out = []
        for i, row in enumerate(rows):
            out.append(fn(row))
            if reporter is not None:
                reporter.work(i + 1, total, label)
        return out
    pool = ThreadPoolExecutor(max_workers=jobs)
    futures = [pool.submit(fn, row) for row in rows]
    try:
        pending = set(futures)
        while pending:  # wake up now and then so that this thread sees Ctrl-C
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_EXCEPTION)
            if any(f.exception() is not None for f in finished):
                break
            if reporter is not None:
                reporter.work(total - len(pending), total, label)
    except BaseException:
        cancel.cancel()  # KeyboardInterrupt here: stop the workers' simulations too
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [f.result() for f in futures]
