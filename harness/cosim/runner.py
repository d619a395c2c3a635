"""The conservative lock-step loop.

Every engine reports the time of its next event. The harness picks the earliest time T among
those events and the packets waiting to be delivered, and lets every engine that has work before
T+W (W = the window, the smallest latency of a link crossing processes) run up to T+W. Packets an
engine emits during [T, T+W) arrive no earlier than T+W, so handing them over at the window
boundary is exact. Windows in which nobody has anything to do are never executed: the harness
jumps straight to the next event. Packet batches pass through as opaque frames, or, over shared
memory, go from engine to engine through peer rings while the harness only passes on where they
wait (WindowDone.batch_dst, Advance.batch_src).

A single engine process (the whole system colocated) exchanges nothing, so it needs no windows:
it runs in slices of SLICE_EVENTS events instead (Advance.max_events), which keep Ctrl-C, the
progress line and the hang watchdog responsive without a round trip every 250 ns.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.cosim import cancel, progress
from harness.cosim.channel_errors import BadMessage, ChannelError
from harness.cosim.process import EngineProcess, describe_exit
from harness.errors import ConfigError, EngineError, EngineTimeout, SimulationError
from harness.protocol import cosim as pb

NEVER = 2**64 - 1
# Events per Advance of a lone engine: a fraction of a second at a few million events per second,
# far inside cosim.reply_timeout_s even on a loaded machine.
SLICE_EVENTS = 1 << 19


SERIES_COLUMNS = ["name", "bin", "start_ns", "bin_ns", "value"]


def series_frame(series: list[tuple[str, float, np.ndarray]]) -> pd.DataFrame:
    """(name, bin width ns, values) per statistic as one frame sorted by name and bin, built from
    arrays: a 32-GPU layer has some 15 M bins, which as Python tuples took gigabytes."""
    if not series:
        return pd.DataFrame(columns=SERIES_COLUMNS)
    names = sorted({n for n, _, _ in series})
    code = {n: i for i, n in enumerate(names)}
    counts = [len(v) for _, _, v in series]
    bins = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
    width = np.repeat([w for _, w, _ in series], counts)
    frame = pd.DataFrame({
        "name": pd.Categorical.from_codes(np.repeat([code[n] for n, _, _ in series], counts), categories=names),
        "bin": bins, "start_ns": bins * width, "bin_ns": width,
        "value": np.concatenate([v for _, _, v in series])})
    return frame.sort_values(["name", "bin"], kind="stable").reset_index(drop=True)


@dataclass
class SimResult:
    stats: pd.DataFrame
    end_ps: int
    windows: int
    windows_skipped: int
    window_ps: int
    wall_s: float
    loop_s: float
    loop_cpu_s: float = 0.0
    """CPU time the harness itself spent in the lock-step loop (excludes waiting for engines)."""
    engines: list[str] = field(default_factory=list)
    series: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SERIES_COLUMNS))
    """Time series statistics (per-link wire bytes per bin): one row per (name, bin)."""
    events: int = 0
    """Events the engines processed, all processes together (cost, not a result: kept out of stats)."""

    def stat(self, name: str) -> float:
        rows = self.stats.loc[self.stats["name"] == name, "value"]
        if rows.empty:
            raise KeyError(name)
        return float(rows.iloc[0])

    def stats_matching(self, pattern: str) -> pd.DataFrame:
        return self.stats[self.stats["name"].str.fullmatch(pattern)]


class Coordinator:
    """Drives the engines over a channel (ZmqChannel or ShmChannel: send, poll, liveness_poll_s)."""

    def __init__(self, channel, engines: list[EngineProcess], reply_timeout_s: float):
        self.channel = channel
        self.engines = engines
        self.reply_timeout_ms = int(reply_timeout_s * 1000)
        self._slice_s = min(channel.liveness_poll_s, reply_timeout_s)
        self.events = 0  # engine events, set by collect_stats

    # ---------------------------------------------------------------- receiving
    def _check_alive(self, grace_s: float = 0.0) -> None:
        """Fail naming the first engine that has exited; with grace_s, wait that long for one to."""
        deadline = time.monotonic() + grace_s
        while True:
            for e in self.engines:
                code = e.exit_code()
                if code is not None:
                    raise EngineError(e.name, f"{describe_exit(code)} unexpectedly", e.stderr_tail())
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)

    def _poll(self, budget_ms: int, waiting: set[int], spin: bool = True) -> tuple[int, bytes, list]:
        """The next message; between slices of liveness_poll_s, looks for dead engines."""
        slice_s = min(self.channel.liveness_poll_s, budget_ms / 1000)
        try:
            got = self.channel.poll(slice_s, spin)  # only the first slice spins
            if got is not None:
                return got
            deadline = time.monotonic() + budget_ms / 1000
            while True:
                cancel.check()  # Ctrl-C: this thread may not be the one that got it
                self._check_alive()
                if time.monotonic() > deadline:
                    names = ", ".join(self.engines[i].name for i in sorted(waiting))
                    first = self.engines[min(waiting)]
                    raise EngineTimeout(names, f"no answer within {budget_ms / 1000:.1f} s (hung?)", first.stderr_tail())
                got = self.channel.poll(slice_s, False)
                if got is not None:
                    return got
        except BadMessage as bad:
            self._undecodable(bad)

    def _undecodable(self, bad: BadMessage) -> None:
        eng = self.engines[bad.idx]
        raise EngineError(eng.name, f"sent an undecodable message ({bad.reason})", eng.stderr_tail()) from None

    def recv(self, waiting: set[int], timeout_ms: int | None = None,
             kind: str | None = None) -> tuple[int, "pb.Control", list]:
        """Next message from one of `waiting` (of `kind`, if given); fails on death, silence,
        garbage, Error, or a message nobody asked for."""
        try:  # the common case first: a message within the first slice
            got = self.channel.poll(self._slice_s, True) if timeout_ms is None else None
        except BadMessage as bad:
            self._undecodable(bad)
        if got is None:
            got = self._poll(self.reply_timeout_ms if timeout_ms is None else timeout_ms, waiting, timeout_ms is not None)
        idx, ctl_bytes, frames = got
        try:
            ctl = pb.Control.FromString(ctl_bytes)
            what = ctl.WhichOneof("msg")
        except Exception as exc:  # protobuf raises DecodeError, upb may raise others
            eng = self.engines[idx]
            raise EngineError(eng.name, f"sent an undecodable message ({exc})", eng.stderr_tail()) from None
        if what is None or what == "error" or idx not in waiting or (kind is not None and what != kind):
            self._reject(idx, ctl, what, kind)
        return idx, ctl, frames

    def _reject(self, idx: int, ctl, got: str | None, kind: str | None) -> None:
        eng = self.engines[idx]
        if got is None:
            raise EngineError(eng.name, "sent an undecodable message (no known field)", eng.stderr_tail())
        if got == "error":
            err = ctl.error
            if err.key:
                raise ConfigError(err.key, f"rejected by engine {eng.name}: {err.message}")
            raise EngineError(eng.name, err.message, eng.stderr_tail())
        if got != kind and kind is not None:
            raise EngineError(eng.name, f"sent '{got}' where '{kind}' was expected", eng.stderr_tail())
        raise EngineError(eng.name, f"sent '{got}' when no answer was expected", eng.stderr_tail())

    def send(self, idx: int, ctl_bytes: bytes, frames: list | None = None) -> None:
        try:
            self.channel.send(idx, ctl_bytes, frames)
        except ChannelError as exc:
            # A killed engine's socket closes before the kernel reports its exit: give the exit
            # a moment to show, so the error names the signal rather than the transport.
            self._check_alive(grace_s=1.0)
            eng = self.engines[idx]
            raise EngineError(eng.name, f"cannot be reached ({exc})", eng.stderr_tail()) from None

    def send_many(self, messages: list[tuple[int, bytes]]) -> None:
        """One control message to each of several engines (the channel's send_many: shared memory)."""
        try:
            self.channel.send_many(messages)
        except ChannelError as exc:
            self._check_alive(grace_s=1.0)
            eng = self.engines[messages[0][0]]
            raise EngineError(eng.name, f"cannot be reached ({exc})", eng.stderr_tail()) from None

    def gather(self, kind: str, targets: list[int], timeout_ms: int | None = None) -> dict[int, tuple]:
        waiting = set(targets)
        replies = {}
        while waiting:
            idx, ctl, rest = self.recv(waiting, timeout_ms, kind)
            waiting.discard(idx)
            replies[idx] = (ctl, rest)
        return replies

    # ---------------------------------------------------------------- protocol
    def configure(self, configures: list["pb.Control"]) -> list[int]:
        for i, c in enumerate(configures):
            self.send(i, c.SerializeToString())
        replies = self.gather("ready", list(range(len(self.engines))))
        return [replies[i][0].ready.next_event_ps for i in range(len(self.engines))]

    def run(self, next_event: list[int], window_ps: int, max_time_ps: int) -> tuple[int, int, int, list]:
        n = len(self.engines)
        direct = self.channel.direct_batches
        pending: list[list] = [[] for _ in range(n)]  # per engine: batch frames, or (direct) source engines
        pending_min = [NEVER] * n
        done = [False] * n
        blocked = [""] * n
        t_end = 0
        last_event = 0  # the run's end: the last event anywhere (independent of the partition)
        windows = 0
        advance = pb.Control()
        adv = advance.advance
        single = n == 1  # nobody to exchange packets with: slices of events, not windows
        if single:
            adv.max_events = SLICE_EVENTS
        send, recv = self.send, self.recv
        cancelled = cancel.cancelled
        reporter = progress.current()
        events = [0] * n  # cumulative per engine, read only for the progress line
        next_tick = time.monotonic() + progress.TICK_S
        while True:
            t0 = min(min(next_event), min(pending_min))
            if t0 == NEVER:
                break
            if cancelled():
                cancel.check()
            if reporter is not None and (single or not windows & 63) and time.monotonic() >= next_tick:
                reporter.simulated(last_event, sum(events))
                next_tick = time.monotonic() + progress.TICK_S
            if t0 > max_time_ps:
                raise SimulationError(f"simulated time passed cosim.max_sim_time_us ({max_time_ps / 1e6:.0f} us); "
                                      "raise it if the workload is meant to run that long")
            until = max_time_ps + 1 if single else t0 + window_ps
            adv.until_ps = until
            adv.num_batches = 0
            plain = advance.SerializeToString()  # one Advance for every engine without inbound batches
            active = [i for i in range(n) if next_event[i] < until or pending_min[i] < until]
            advances = []  # (engine, Advance, batch frames or None)
            for i in active:
                batches = pending[i]
                if not batches:
                    advances.append((i, plain, None))
                    continue
                if direct:  # the batches wait in peer rings: name their sources
                    adv.batch_src[:] = batches
                else:
                    adv.num_batches = len(batches)
                advances.append((i, advance.SerializeToString(), None if direct else batches))
                del adv.batch_src[:]
                adv.num_batches = 0
                pending[i] = []
                pending_min[i] = NEVER
            if direct:  # every Advance written before any sleeping engine is woken
                self.send_many([(i, control) for i, control, _ in advances])
            else:
                for i, control, frames in advances:
                    send(i, control, frames)
            waiting = set(active)
            while waiting:
                idx, ctl, frames = recv(waiting, None, "window_done")
                waiting.discard(idx)
                wd = ctl.window_done
                now = wd.now_ps
                if now > last_event:
                    last_event = now
                next_event[idx] = wd.next_event_ps
                finished = done[idx] = wd.done
                if reporter is not None:
                    events[idx] = wd.events
                if not finished:
                    blocked[idx] = wd.blocked_reason
                dsts = wd.batch_dst
                if (frames if direct else len(dsts) != len(frames)) or len(wd.batch_min_ps) != len(dsts):
                    raise EngineError(self.engines[idx].name, "batch frames do not match their headers",
                                      self.engines[idx].stderr_tail())
                if dsts:
                    for dst, tmin, frame in zip(dsts, wd.batch_min_ps, [idx] * len(dsts) if direct else frames):
                        if dst >= n:
                            raise EngineError(self.engines[idx].name, f"batch for unknown engine {dst}",
                                              self.engines[idx].stderr_tail())
                        if tmin < until:
                            raise SimulationError(f"engine {self.engines[idx].name} sent a packet arriving at {tmin} "
                                                  f"ps, inside the current window ending {until} ps (lookahead broken)")
                        pending[dst].append(frame)
                        if tmin < pending_min[dst]:
                            pending_min[dst] = tmin
            windows += 1
            t_end = last_event if single else until
        # Everyone is idle. Engines that never ran report their state through an empty window.
        silent = [i for i in range(n) if not done[i]]
        if silent:
            adv.until_ps = t_end
            adv.num_batches = 0
            adv.max_events = 0
            for i in silent:
                self.send(i, advance.SerializeToString())
            for i, (ctl, _) in self.gather("window_done", silent).items():
                done[i] = ctl.window_done.done
                blocked[i] = ctl.window_done.blocked_reason
        stuck = [f"{self.engines[i].name}: {blocked[i] or 'not done'}" for i in range(n) if not done[i]]
        if stuck:
            raise SimulationError("deadlock: every engine is idle but the workload is not complete at "
                                  f"{t_end / 1e6:.3f} us; " + "; ".join(stuck))
        # Windows a loop without idle skipping would have run from 0 to the last event.
        skipped = max(0, -(-(last_event + 1) // window_ps) - windows)
        return last_event, windows, skipped, done

    def collect_stats(self, end_ps: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Scalar statistics (name, value, unit) and time series (SERIES_COLUMNS) of every engine."""
        get = pb.Control()
        get.get_stats.end_ps = end_ps
        data = get.SerializeToString()
        for i in range(len(self.engines)):
            self.send(i, data)
        rows, series = [], []
        replies = self.gather("stats", list(range(len(self.engines))))
        self.events = 0
        for i in range(len(self.engines)):
            for s in replies[i][0].stats.stats:
                if s.name.startswith("engine."):
                    if s.name.endswith(".events"):
                        self.events += int(s.value)
                    continue  # per-process bookkeeping would break partition invariance
                rows.append((s.name, s.value, s.unit))
                if len(s.series):
                    series.append((s.name, s.series_bin_ps / 1e3, np.asarray(s.series, dtype=float)))
        df = pd.DataFrame(rows, columns=["name", "value", "unit"])
        return df.sort_values("name", kind="stable").reset_index(drop=True), series_frame(series)

    def shutdown(self) -> None:
        bye = pb.Control()
        bye.shutdown.SetInParent()
        data = bye.SerializeToString()
        for i in range(len(self.engines)):
            try:
                self.channel.send(i, data)
            except ChannelError:
                pass
