"""cais-bench: measured speed of the co-simulation itself.

    cais-bench harness [--requests N] [--gap-ns G] [--outstanding K] [--repeat R] [--transport ipc,shm]
                       [--spin-us US,...]
    cais-bench floor [--windows N] [--repeat R] [--transport ipc,shm] [--spin-us US,...]
    cais-bench os-floor
    cais-bench loop [--windows N]
    cais-bench layer [--model M] [--phase P] [--scheme S] [--system Y] [--workload W] [--lines 1,4,16]
                     [-- KEY=VALUE ...]

`harness` runs 8 GPUs + 4 switches in 3 engine processes (2 GPU engines of 4 GPUs, 1 network
engine) with sparse traffic, so that the lock-step loop, not the models, dominates. It reports
the wall time per executed window, windows executed, and windows that idle-skipping saved, for
each transport (and, for shm, each spin bound), with the protocol floor measured beside it.
Runs of the configurations alternate, so that load from other work hits them alike.
`layer` measures one LLM layer simulation (harness/bench_layer.py).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
import sys

from harness import bench_layer
from harness.config.schema import register
from harness.errors import CaisError


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    from harness import CONF_DIR

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def _variants(transports: list[str], spins: list[int]) -> list[tuple[str, str, int]]:
    """(label, transport, spin_us) for every transport; shm once per spin bound."""
    out = []
    for t in transports:
        if t == "shm":
            out += [(f"shm spin={s}us" if len(spins) > 1 else "shm", t, s) for s in spins]
        else:
            out.append((t, t, spins[0]))
    return out


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "all": [round(v, 1) for v in values]}


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)  # engines that have exited and been waited for
    return ru.ru_utime + ru.ru_stime


def harness_once(requests: int, gap_ns: float, outstanding: int, transport: str, spin_us: int):
    """One run; also returns the CPU time its engine processes used (spinning included)."""
    from harness.system import run_system

    cfg = _compose([f"traffic.requests_per_gpu={requests}", f"traffic.issue_gap_ns={gap_ns}",
                    f"traffic.max_outstanding={outstanding}", "cosim.gpus_per_process=4", "cosim.switches_per_process=4",
                    f"cosim.transport={transport}", f"cosim.shm_spin_us={spin_us}"])
    cpu0 = _children_cpu_s()
    result = run_system(cfg)
    return result, _children_cpu_s() - cpu0


def bench_harness(requests: int, gap_ns: float, outstanding: int, repeat: int, transports: list[str],
                  spins: list[int], floor_windows: int) -> dict:
    variants = _variants(transports, spins)
    runs: dict[str, list] = {label: [] for label, _, _ in variants}
    engine_cpu: dict[str, list] = {label: [] for label, _, _ in variants}
    floors: dict[str, list] = {label: [] for label, _, _ in variants}
    for _ in range(repeat):
        for label, transport, spin in variants:
            result, cpu_s = harness_once(requests, gap_ns, outstanding, transport, spin)
            runs[label].append(result)
            engine_cpu[label].append(cpu_s / result.windows * 1e6)
            if floor_windows:
                floors[label].append(bench_floor(floor_windows, transport=transport, spin_us=spin)["us_per_window"])
    out = {}
    for label, rs in runs.items():
        r = rs[0]
        out[label] = {
            "engine_processes": len(r.engines),
            "window_ns": r.window_ps / 1000,
            "simulated_us": r.end_ps / 1e6,
            "windows_executed": r.windows,
            "windows_skipped_by_idle_jump": r.windows_skipped,
            "us_per_window": _spread([x.loop_s / x.windows * 1e6 for x in rs]),
            "harness_cpu_us_per_window": _spread([x.loop_cpu_s / x.windows * 1e6 for x in rs]),
            # whole run (setup and stats included), all engines: what spinning costs the machine
            "engine_cpu_us_per_window": _spread(engine_cpu[label]),
            "protocol_floor_us_per_window": _spread(floors[label]) if floors[label] else None,
            "repeats": repeat,
        }
    return out


def bench_floor(windows: int, engines: int = 3, transport: str = "ipc", spin_us: int = 100) -> dict:
    """The protocol's own floor: engines that host nothing, advanced window after window."""
    from harness.cosim import launch
    from harness.protocol import cosim as pb

    names = [f"empty{i}" for i in range(engines)]
    with launch(names, transport=transport, shm_spin_us=spin_us) as coord:
        configures = []
        for i, name in enumerate(names):
            c = pb.Control()
            c.configure.engine_name = name
            c.configure.engine_index = i
            c.configure.window_ps = 250_000
            configures.append(c)
        coord.configure(configures)
        adv = pb.Control()
        t0, c0 = time.perf_counter(), time.process_time()
        for w in range(windows):
            adv.advance.until_ps = (w + 1) * 250_000
            data = adv.SerializeToString()
            for i in range(engines):
                coord.send(i, data)
            coord.gather("window_done", list(range(engines)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"engine_processes": engines, "transport": transport, "windows": windows, "us_per_window": wall / windows * 1e6,
            "harness_cpu_us_per_window": cpu / windows * 1e6}


def bench_floors(windows: int, repeat: int, transports: list[str], spins: list[int]) -> dict:
    variants = _variants(transports, spins)
    walls: dict[str, list] = {label: [] for label, _, _ in variants}
    cpus: dict[str, list] = {label: [] for label, _, _ in variants}
    for _ in range(repeat):
        for label, transport, spin in variants:
            r = bench_floor(windows, transport=transport, spin_us=spin)
            walls[label].append(r["us_per_window"])
            cpus[label].append(r["harness_cpu_us_per_window"])
    return {label: {"engine_processes": 3, "windows": windows, "us_per_window": _spread(walls[label]),
                    "harness_cpu_us_per_window": _spread(cpus[label]), "repeats": repeat} for label in walls}


class _InstantChannel:
    """Engines that answer at once, in process: what is left is the harness's own Python."""

    liveness_poll_s = 0.001
    direct_batches = False  # no packets cross it: the Coordinator sends every Advance itself

    def __init__(self, reply: bytes, windows: int, engines: int):
        self.reply, self.queue, self.left = reply, [], windows * engines

    def send(self, idx: int, control: bytes, frames: list | None = None) -> None:
        self.left -= 1
        if self.left < 0:
            raise StopIteration  # enough windows
        self.queue.append(idx)

    def poll(self, timeout_s: float, spin: bool = False):
        return self.queue.pop(), self.reply, []


class _Idle:
    name = "instant"

    def exit_code(self):
        return None

    def stderr_tail(self) -> str:
        return ""


def bench_loop(windows: int, engines: int = 3) -> dict:
    """The lock-step loop (Coordinator.run) against engines that answer instantly, every engine
    active in every window: the harness's Python cost per window, without any transport."""
    from harness.cosim.runner import Coordinator
    from harness.protocol import cosim as pb

    done = pb.Control()
    done.window_done.next_event_ps = 0  # always more to do
    coord = Coordinator(_InstantChannel(done.SerializeToString(), windows, engines), [_Idle()] * engines, 5.0)
    t0 = time.perf_counter()
    try:
        coord.run([0] * engines, 250_000, 2**62)
    except StopIteration:
        pass
    return {"engine_processes": engines, "windows": windows,
            "python_us_per_window": (time.perf_counter() - t0) / windows * 1e6}


def bench_pipe(rounds: int = 5000, same_core: bool = False) -> dict:
    """The operating system's floor: a one-byte ping-pong between two processes over pipes."""
    import os

    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    if same_core:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    pid = os.fork()
    if pid == 0:  # child: echo until told to stop
        while (data := os.read(r1, 1)) != b"q":
            os.write(w2, data)
        os._exit(0)
    t0 = time.perf_counter()
    for _ in range(rounds):
        os.write(w1, b"x")
        os.read(r2, 1)
    us = (time.perf_counter() - t0) / rounds * 1e6
    os.write(w1, b"q")
    os.waitpid(pid, 0)
    return {"pipe_round_trip_us": us, "same_core": same_core, "rounds": rounds}


def _load() -> dict:
    return dict(zip(("1min", "5min", "15min"), (round(x, 2) for x in os.getloadavg())))


def _count(least: int):
    """An argparse type: an integer >= least."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"must be an integer >= {least}, got {text!r}")
        return value
    return parse


def main(argv: list[str] | None = None) -> None:
    from harness.cosim import DEFAULT_SPIN_US, TRANSPORTS

    ap = argparse.ArgumentParser(prog="cais-bench", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)

    def transport_args(p):
        p.add_argument("--transport", default="ipc,shm", help=f"comma-separated, of: {', '.join(TRANSPORTS)}")
        p.add_argument("--spin-us", default=str(DEFAULT_SPIN_US),
                       help="shm: spin bound(s) in microseconds, comma-separated")
        p.add_argument("--repeat", type=_count(1), default=3)

    h = sub.add_parser("harness", help="harness cost per lock-step window with 3 engine processes")
    h.add_argument("--requests", type=_count(1), default=2000, help="requests per GPU")
    h.add_argument("--gap-ns", type=float, default=2000.0, help="gap between two requests of one GPU")
    h.add_argument("--outstanding", type=_count(1), default=4, help="requests in flight per GPU (more: busier windows)")
    h.add_argument("--floor-windows", type=_count(0), default=3000, help="0: no protocol floor beside each run")
    transport_args(h)
    f = sub.add_parser("floor", help="protocol floor: round trips to engines that host nothing")
    f.add_argument("--windows", type=_count(1), default=3000)
    transport_args(f)
    sub.add_parser("os-floor", help="pipe ping-pong between two processes (two cores, then one)")
    lp = sub.add_parser("loop", help="the lock-step loop's own Python cost (engines that answer instantly)")
    lp.add_argument("--windows", type=_count(1), default=20000)
    bench_layer.add_parser(sub)
    args = ap.parse_args(argv)
    out: dict = {"load_average_before": _load()}
    if args.what == "layer":
        try:
            out.update(bench_layer.bench_layers(args))
        except CaisError as e:
            print(f"cais-bench: error: {e}", file=sys.stderr)
            sys.exit(2)
    elif args.what == "os-floor":
        out.update({"two_cores": bench_pipe(), "one_core": bench_pipe(same_core=True)})
    elif args.what == "loop":
        out.update(bench_loop(args.windows))
    else:
        transports = [t for t in args.transport.split(",") if t]
        bad = [t for t in transports if t not in TRANSPORTS]
        if bad:
            ap.error(f"--transport: {', '.join(bad)} not one of {', '.join(TRANSPORTS)}")
        try:
            spins = [_count(0)(x) for x in args.spin_us.split(",") if x]
        except argparse.ArgumentTypeError as exc:
            ap.error(f"--spin-us: {exc}")
        if args.what == "harness":
            out.update(bench_harness(args.requests, args.gap_ns, args.outstanding, args.repeat, transports, spins,
                                     args.floor_windows))
        else:
            out.update(bench_floors(args.windows, args.repeat, transports, spins))
    out["load_average_after"] = _load()
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
