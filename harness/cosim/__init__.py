"""Co-simulation: start engine processes, configure them, run them in lock-step, collect stats.

    result = simulate(topology, params, seed=1, gpus_per_process=8, switches_per_process=4)
    result.stats      # pandas DataFrame: name, value, unit (hierarchical names, e.g. sw0.port3.tx.flits)
    result.end_ps     # simulated time at which the last event happened (window granularity)
"""
from __future__ import annotations

import shutil
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterable

from harness import engines as engine_paths
from harness.cosim import shm_lib
from harness.cosim.channel_shm import ShmChannel
from harness.cosim.channel_zmq import ZmqChannel
from harness.cosim.partition import Partition, partition
from harness.cosim.process import EngineProcess, make_log_dir
from harness.cosim.runner import Coordinator, SimResult
from harness.errors import ConfigError, EngineError, EngineTimeout
from harness.protocol import cosim as pb

__all__ = ["simulate", "launch", "SimResult", "partition", "to_param_value", "TRANSPORTS", "resolve_transport"]

DEFAULT_TRANSPORT = "auto"
# How long a process waiting on the shared-memory channel spins before it sleeps (docs/PERFORMANCE.md).
DEFAULT_SPIN_US = 1000


def to_param_value(value: Any) -> "pb.ParamValue":
    pv = pb.ParamValue()
    if isinstance(value, bool):
        pv.b = value
    elif isinstance(value, int):
        pv.i = value
    elif isinstance(value, float):
        pv.d = value
    elif isinstance(value, str):
        pv.s = value
    elif isinstance(value, (list, tuple)):
        pv.list.SetInParent()
        for item in value:
            pv.list.items.append(to_param_value(item))
    elif value is None:
        pv.s = ""
    else:
        raise ConfigError("", f"cannot send parameter value {value!r} of type {type(value).__name__}")
    return pv


def _parse_faults(spec: str, names: Iterable[str]) -> dict[str, str]:
    """'gpu_engine0:crash:5,net_engine0:hang:3' -> {name: 'crash:5', ...}"""
    out: dict[str, str] = {}
    valid = set(names)
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, what = item.partition(":")
        if name not in valid or not what:
            raise ConfigError("cosim.fault", f"'{item}' must be ENGINE:KIND:WINDOW with ENGINE one of {sorted(valid)}")
        out[name] = what
    return out


TRANSPORTS = ("auto", "shm", "ipc", "tcp")


def resolve_transport(transport: str, launcher: str) -> str:
    """auto: shared memory for engines we start here, ZeroMQ over ipc:// for engines started by
    hand, and for a build without the shm extension (no Python headers, or built before it)."""
    if transport not in TRANSPORTS:
        raise ConfigError("cosim.transport", f"'{transport}' is not one of: {', '.join(TRANSPORTS)}")
    if transport == "auto":
        return "shm" if launcher == "local" and shm_lib.available() else "ipc"
    return transport


def open_channel(names: list[str], transport: str, launcher: str, log_dir, tcp_host: str, spin_us: int):
    """shm: shared memory, engines on this host started by us; ipc/tcp: ZeroMQ."""
    transport = resolve_transport(transport, launcher)
    if transport == "shm":
        if launcher != "local":
            raise ConfigError("cosim.transport", "shm needs cosim.launcher=local (engines inherit the segment); "
                              "use ipc or tcp for engines started by hand")
        if isinstance(spin_us, bool) or not isinstance(spin_us, int) or spin_us < 0:
            raise ConfigError("cosim.shm_spin_us", f"must be an integer >= 0, got {spin_us!r}")
        return ShmChannel(names, spin_us)
    return ZmqChannel(names, transport, log_dir, tcp_host)


@contextmanager
def launch(names: list[str], *, transport: str = DEFAULT_TRANSPORT, tcp_host: str = "127.0.0.1",
           launcher: str = "local", connect_timeout_s: float = 30.0, reply_timeout_s: float = 5.0,
           faults: dict[str, str] | None = None, shm_spin_us: int = DEFAULT_SPIN_US):
    """Start one engine process per name, wait for each to say hello, yield a Coordinator.

    On exit (normal or not) every process is stopped and its files (and shared memory) removed."""
    binary = str(engine_paths.engine_binary())
    if launcher not in ("local", "manual"):
        raise ConfigError("cosim.launcher", f"'{launcher}' is not one of: local, manual")
    log_dir = make_log_dir()
    procs: list[EngineProcess] = []
    channel = None
    try:
        channel = open_channel(names, transport, launcher, log_dir, tcp_host, shm_spin_us)
        for idx, name in enumerate(names):
            argv = [binary, *channel.engine_args(idx), "--name", name]
            if faults and name in faults:
                argv += ["--fault", faults[name]]
            procs.append(EngineProcess(name, argv, launch=launcher == "local", log_dir=log_dir,
                                       pass_fds=channel.pass_fds))
            if launcher == "manual":
                print("start on its host: " + " ".join(argv), file=sys.stderr)
        coord = Coordinator(channel, procs, reply_timeout_s)
        # Hello from every engine (they connect on their own schedule).
        try:
            coord.gather("ready", list(range(len(procs))), timeout_ms=int(connect_timeout_s * 1000))
        except EngineTimeout as exc:
            if launcher != "manual":
                raise
            raise EngineError(exc.engine, f"did not connect within {connect_timeout_s:g} s "
                              "(cosim.connect_timeout_s): start each with its command above", None) from None
        yield coord
        coord.shutdown()
        for p in procs:
            if p.proc is not None:
                try:
                    p.proc.wait(timeout=5)
                except Exception:
                    pass
    finally:
        for p in procs:
            p.close()
        if channel is not None:
            channel.close()
        shutil.rmtree(log_dir, ignore_errors=True)  # stderr tails are already in any error raised


def simulate(topology, params: dict[str, Any], *, seed: int = 0, workload: bytes = b"",
             gpus_per_process: int | None = None, switches_per_process: int | None = None,
             colocate: bool = False, processes: int = 2, transport: str = DEFAULT_TRANSPORT, tcp_host: str = "127.0.0.1",
             launcher: str = "local", connect_timeout_s: float = 30.0, reply_timeout_s: float = 5.0,
             max_sim_time_us: float = 1.0e7, fault: str = "", watch: list[str] | None = None,
             shm_spin_us: int = DEFAULT_SPIN_US) -> SimResult:
    if not max_sim_time_us > 0:  # the run would stop before its first event
        raise ConfigError("cosim.max_sim_time_us", f"must be > 0, got {max_sim_time_us}")
    part: Partition = partition(topology, gpus_per_process, switches_per_process, colocate, processes)
    faults = _parse_faults(fault, (e.name for e in part.engines))
    wall0 = time.perf_counter()
    with launch([e.name for e in part.engines], transport=transport, tcp_host=tcp_host, launcher=launcher,
                connect_timeout_s=connect_timeout_s, reply_timeout_s=reply_timeout_s, faults=faults,
                shm_spin_us=shm_spin_us) as coord:
        configures = []
        for idx, spec in enumerate(part.engines):
            c = pb.Control()
            cfg = c.configure
            cfg.engine_name = spec.name
            cfg.engine_index = idx
            cfg.hosted_nodes.extend(spec.nodes)
            cfg.node_engine.extend(part.node_engine)
            cfg.topology.CopyFrom(topology)
            for key, value in params.items():
                cfg.params[key].CopyFrom(to_param_value(value))
            cfg.seed = seed
            cfg.workload = workload
            cfg.window_ps = part.window_ps
            cfg.watch.extend(watch or [])
            configures.append(c)
        next_event = coord.configure(configures)

        loop0, cpu0 = time.perf_counter(), time.process_time()
        end_ps, windows, skipped, _ = coord.run(next_event, part.window_ps, int(max_sim_time_us * 1e6))
        loop_s, loop_cpu_s = time.perf_counter() - loop0, time.process_time() - cpu0
        stats, series = coord.collect_stats(end_ps)
    return SimResult(stats=stats, series=series, end_ps=end_ps, windows=windows, windows_skipped=skipped, window_ps=part.window_ps,
                     wall_s=time.perf_counter() - wall0, loop_s=loop_s, loop_cpu_s=loop_cpu_s,
                     engines=[e.name for e in part.engines], events=coord.events)
