"""The lock-step harness: exactness, partition invariance, determinism, failures."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from harness import REPO_ROOT
from tests.conftest import compose, read_results, run_cli

# Transports for engines that the harness starts on this host.
TRANSPORTS_LOCAL = ["ipc", "shm"]

# Small but real traffic: every GPU talks to random peers through all four switch planes.
SMALL = ["traffic.requests_per_gpu=400", "traffic.max_outstanding=16"]
# Issue gaps that are not multiples of the window put sends at every phase of a window.
PHASED = ["traffic.requests_per_gpu=300", "traffic.issue_gap_ns=37.3", "traffic.max_outstanding=64"]


def run_to(tmp_path: Path, name: str, *overrides: str) -> Path:
    out = tmp_path / name
    run_cli(*overrides, f"out_dir={out}")
    return out


def same_files(a: Path, b: Path) -> None:
    for f in ("results.csv", "stats.csv", "series.csv"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f"{f} differs between {a.name} and {b.name}"


def test_default_run_is_readable(engines, tmp_path):
    out = tmp_path / "default"
    proc = run_cli(*SMALL, f"out_dir={out}")
    df = read_results(out)
    assert df.loc[0, "requests"] == 8 * 400
    assert df.loc[0, "sim_time_us"] > 0 and df.loc[0, "data_GBps_per_gpu"] > 0
    assert "sim_time_us" in proc.stdout and "results:" in proc.stdout
    assert (out / "config.yaml").exists()


@pytest.mark.parametrize("transport", TRANSPORTS_LOCAL)
def test_exact_across_process_boundaries(engines, tmp_path, transport):
    """Packets crossing processes at every phase of a window get single-process timestamps."""
    single = run_to(tmp_path, "single", *PHASED, "cosim.colocate=true")
    split = run_to(tmp_path, "split", *PHASED, "cosim.gpus_per_process=1", "cosim.switches_per_process=1",
                   f"cosim.transport={transport}")
    same_files(single, split)


def test_a_lone_engine_runs_in_slices_of_events_and_stops_anywhere_exactly(engines, monkeypatch):
    """One process exchanges nothing: the harness advances it by event budgets, not 250 ns windows,
    and where a budget ends (mid-window, between two events of one time) changes nothing."""
    from harness.cosim import runner
    from harness.system import run_system

    split = run_system(compose(*PHASED, "cosim.gpus_per_process=4", "cosim.switches_per_process=2"))
    whole = run_system(compose(*PHASED, "cosim.colocate=true"))
    assert whole.windows == 1 and split.windows > 10
    monkeypatch.setattr(runner, "SLICE_EVENTS", 997)
    sliced = run_system(compose(*PHASED, "cosim.colocate=true"))
    assert sliced.windows == -(-sliced.events // 997)
    for r in (whole, sliced):
        assert r.end_ps == split.end_ps and r.events == split.events
        assert r.stats.equals(split.stats) and r.series.equals(split.series)


def test_peer_rings_stay_within_their_budget_however_finely_a_run_is_split():
    from harness.cosim.channel_shm import PEER_RING_BYTES, PEER_RINGS_BYTES, peer_ring_bytes

    assert peer_ring_bytes(1) == 0 and peer_ring_bytes(2) == PEER_RING_BYTES
    for n in (2, 6, 12, 40, 200):
        size = peer_ring_bytes(n)
        assert size & (size - 1) == 0 and size >= 1 << 16
        assert n * (n - 1) * size <= max(PEER_RINGS_BYTES, n * (n - 1) << 16)


def test_partition_invariance_8_gpus_4_switches(engines, tmp_path):
    together = run_to(tmp_path, "together", *SMALL, "cosim.gpus_per_process=8", "cosim.switches_per_process=4")
    apart = run_to(tmp_path, "apart", *SMALL, "cosim.gpus_per_process=1", "cosim.switches_per_process=1")
    mixed = run_to(tmp_path, "mixed", *SMALL, "cosim.gpus_per_process=3", "cosim.switches_per_process=2")
    same_files(together, apart)
    same_files(together, mixed)


def test_determinism_and_seed_sensitivity(engines, tmp_path):
    a = run_to(tmp_path, "a", *SMALL, "seed=7")
    b = run_to(tmp_path, "b", *SMALL, "seed=7")
    c = run_to(tmp_path, "c", *SMALL, "seed=8")
    same_files(a, b)
    assert (a / "stats.csv").read_bytes() != (c / "stats.csv").read_bytes()


def test_tcp_transport_matches_ipc(engines, tmp_path):
    ipc = run_to(tmp_path, "ipc", *SMALL, "cosim.gpus_per_process=4", "cosim.transport=ipc")
    tcp = run_to(tmp_path, "tcp", *SMALL, "cosim.gpus_per_process=4", "cosim.transport=tcp")
    same_files(ipc, tcp)


def test_shm_transport_matches_ipc(engines, tmp_path):
    """Byte-identical results over shared memory and ZeroMQ, in three partitions and two workloads
    (the spin bound changes only timing: 0 makes every wait sleep)."""
    for name, args in [("apart", [*PHASED, "cosim.gpus_per_process=1", "cosim.switches_per_process=1"]),
                       ("mixed", [*SMALL, "cosim.gpus_per_process=3", "cosim.switches_per_process=2"]),
                       ("halves", [*SMALL, "cosim.gpus_per_process=4", "seed=7"])]:
        ipc = run_to(tmp_path, f"{name}-ipc", *args, "cosim.transport=ipc")
        shm = run_to(tmp_path, f"{name}-shm", *args, "cosim.transport=shm")
        same_files(ipc, shm)
    sleepy = run_to(tmp_path, "halves-shm-nospin", *SMALL, "cosim.gpus_per_process=4", "seed=7",
                    "cosim.transport=shm", "cosim.shm_spin_us=0")
    same_files(tmp_path / "halves-ipc", sleepy)


def test_default_transport_is_shm_for_local_launches(engines):
    from harness.cosim import DEFAULT_SPIN_US, resolve_transport

    assert compose().cosim.transport == "auto"
    assert compose().cosim.shm_spin_us == DEFAULT_SPIN_US
    assert resolve_transport("auto", "local") == "shm"
    assert resolve_transport("auto", "manual") == "ipc"


def test_traffic_gap_shorter_than_a_round_trip_does_not_stall(engines, tmp_path):
    """A completion restarts issuing when the window of outstanding requests was full (was a deadlock)."""
    out = run_to(tmp_path, "dense", "traffic.requests_per_gpu=300", "traffic.issue_gap_ns=10",
                 "traffic.max_outstanding=4")
    assert read_results(out).loc[0, "requests"] == 8 * 300


def test_conservation_of_bytes(engines, tmp_path):
    out = run_to(tmp_path, "cons", *SMALL, "traffic.read_fraction=0.25")
    import pandas as pd

    stats = pd.read_csv(out / "stats.csv")
    s = lambda pat: stats.loc[stats["name"].str.fullmatch(pat), "value"].sum()
    # Every request's flits left a GPU and arrived through one switch: GPU tx == switch tx.
    assert s(r"gpu\d+\.port\d+\.tx\.flits") == s(r"sw\d+\.port\d+\.tx\.flits")
    # 25% of 3200 requests are reads of 128 B, the rest writes of 128 B.
    assert s(r"gpu\d+\.read_bytes") + s(r"gpu\d+\.write_bytes") == 8 * 400 * 128
    # Each link's utilisation time series adds up to the link's total wire bytes.
    series = pd.read_csv(out / "series.csv")
    per_link = series[series["name"].str.endswith(".tx.wire_bytes")].groupby("name")["value"].sum()
    assert len(per_link) == 8 * 4 * 2  # every GPU port and every switch port, one direction each
    scalar = stats.set_index("name")["value"]
    for name, total in per_link.items():
        assert total == scalar[name] > 0, name  # the series' scalar is its total


# ------------------------------------------------------------------------------ failures
def dev_shm() -> set[str]:
    """Names in /dev/shm a co-simulation could leave (the project's, less the fuzzer's scratch
    folders): other programs on the machine (joblib's memmapping folders of a sweep running
    beside the tests) come and go there too."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return {n for n in names if n.startswith("cais") and not n.startswith("cais-fuzz-")}


def shm_segments_held() -> list[str]:
    """This process's mappings and fds of the harness's memfd segment."""
    held = [line for line in Path("/proc/self/maps").read_text().splitlines() if "memfd:cais-cosim" in line]
    for fd in Path("/proc/self/fd").iterdir():
        try:
            if "memfd:cais-cosim" in os.readlink(fd):
                held.append(f"fd {fd.name}")
        except OSError:
            continue
    return held


def test_shm_segment_released_after_normal_and_failed_runs(engines):
    """The segment is a memfd: never a name in /dev/shm, and unmapped and closed when launch() ends."""
    from harness.cosim import launch
    from harness.errors import EngineError
    from harness.protocol import cosim as pb

    before = dev_shm()
    names = ["e0", "e1"]
    for faults in (None, {"e1": "crash:1"}):
        with pytest.raises(EngineError) if faults else nullcontext():
            with launch(names, transport="shm", faults=faults) as coord:
                assert len(shm_segments_held()) >= 2  # mapped, and the fd the engines inherit
                pids = [e.proc.pid for e in coord.engines]
                configures = []
                for i, name in enumerate(names):
                    c = pb.Control()
                    c.configure.engine_name, c.configure.engine_index, c.configure.window_ps = name, i, 1000
                    configures.append(c)
                coord.configure(configures)
                adv = pb.Control()
                adv.advance.until_ps = 1000
                for i in range(len(names)):
                    coord.send(i, adv.SerializeToString())
                coord.gather("window_done", [0, 1])
        assert shm_segments_held() == []
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert dev_shm() <= before


def test_shm_needs_local_launcher(tmp_path):
    proc = run_cli("cosim.transport=shm", "cosim.launcher=manual", f"out_dir={tmp_path}", check=False, timeout=60)
    assert proc.returncode != 0
    assert "cosim.transport: shm needs cosim.launcher=local" in proc.stderr, proc.stderr


FAULT_BASE = ["traffic.requests_per_gpu=3000", "traffic.issue_gap_ns=20", "cosim.gpus_per_process=4"]


def engine_pids(tag: str) -> set[int]:
    """Live engine processes started by the run carrying `tag` in its environment."""
    pids = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if b"cais-engine" not in (d / "cmdline").read_bytes():
                continue
            if f"CAIS_TEST_TAG={tag}".encode() in (d / "environ").read_bytes().split(b"\0"):
                if (d / "stat").read_text().split()[2] != "Z":
                    pids.add(int(d.name))
        except OSError:
            continue
    return pids


def check_failure(proc, out: Path, engine: str, started: float, tag: str):
    assert proc.returncode != 0
    assert time.monotonic() - started < 10 + 5, "the run did not end within 10 s of the fault"
    assert engine in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (out / "results.csv").exists()
    time.sleep(0.5)
    assert engine_pids(tag) == set(), "engine processes left running"


@pytest.mark.parametrize("transport", TRANSPORTS_LOCAL)
@pytest.mark.parametrize("kind,expect", [("crash", "SIGABRT"), ("hang", "no answer"), ("garbage", "undecodable")])
def test_engine_faults_end_the_run(engines, tmp_path, kind, expect, transport):
    tag = f"{kind}-{os.getpid()}-{time.time_ns()}"
    out = tmp_path / kind
    shm_before = dev_shm()
    t0 = time.monotonic()
    proc = run_cli(*FAULT_BASE, f"cosim.fault=net_engine0:{kind}:40", f"cosim.transport={transport}",
                   f"out_dir={out}", check=False, timeout=60, env={"CAIS_TEST_TAG": tag})
    check_failure(proc, out, "net_engine0", t0, tag)
    assert expect in proc.stderr, proc.stderr
    assert "stderr of net_engine0" in proc.stderr or kind == "garbage"
    assert dev_shm() <= shm_before, "files left in /dev/shm"


@pytest.mark.parametrize("transport", TRANSPORTS_LOCAL)
def test_kill_9_of_an_engine(engines, tmp_path, transport):
    tag = f"kill-{os.getpid()}-{time.time_ns()}"
    out = tmp_path / "kill"
    cmd = [sys.executable, "-m", "harness.cli", "traffic.requests_per_gpu=200000", "traffic.issue_gap_ns=5",
           "cosim.gpus_per_process=4", f"cosim.transport={transport}", f"out_dir={out}"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CAIS_TEST_TAG": tag})
    victim = None
    deadline = time.monotonic() + 30
    while victim is None and time.monotonic() < deadline:
        time.sleep(0.2)
        pids = [p for p in engine_pids(tag) if b"gpu_engine1" in Path(f"/proc/{p}/cmdline").read_bytes()]
        victim = pids[0] if pids else None
    assert victim, "engine never started"
    time.sleep(0.5)
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    stdout, stderr = proc.communicate(timeout=30)
    assert time.monotonic() - killed_at < 10
    proc.stderr = stderr  # check_failure reads returncode and stderr
    check_failure(proc, out, "gpu_engine1", killed_at, tag)
    assert "SIGKILL" in stderr


@pytest.mark.parametrize("transport", TRANSPORTS_LOCAL)
def test_engines_exit_when_the_harness_is_killed(engines, tmp_path, transport):
    tag = f"orphan-{os.getpid()}-{time.time_ns()}"
    cmd = [sys.executable, "-m", "harness.cli", "traffic.requests_per_gpu=200000", "traffic.issue_gap_ns=5",
           "cosim.gpus_per_process=4", "cosim.switches_per_process=4", f"cosim.transport={transport}",
           f"out_dir={tmp_path / 'orphan'}"]  # three engines: two of GPUs, one of the switches
    # A killed harness cannot remove its engines' log directory: give it a temp dir of its own.
    tmp = tempfile.mkdtemp(prefix="cais-kill-")
    try:
        harness = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "CAIS_TEST_TAG": tag, "TMPDIR": tmp})
        deadline = time.monotonic() + 30
        while len(engine_pids(tag)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(engine_pids(tag)) == 3, "engines never started"
        time.sleep(0.5)
        harness.kill()
        harness.wait()
        killed_at = time.monotonic()
        while engine_pids(tag) and time.monotonic() - killed_at < 10:
            time.sleep(0.1)
        assert engine_pids(tag) == set(), "engines outlived their harness by 10 s"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_manual_launcher_over_tcp(engines, tmp_path):
    """Engines started by someone else (as on other hosts) join over tcp:// and give the same result."""
    ref = run_to(tmp_path, "ref", *SMALL, "cosim.gpus_per_process=4")
    out = tmp_path / "manual"
    cmd = [sys.executable, "-m", "harness.cli", *SMALL, "cosim.gpus_per_process=4", "cosim.switches_per_process=4",
           "cosim.transport=tcp",
           "cosim.launcher=manual", "cache.enabled=false", f"out_dir={out}"]  # the reference would be a hit
    harness = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = []
    try:
        while len(started) < 3:
            line = harness.stderr.readline()
            assert line, "harness ended before printing the engine command lines"
            if line.startswith("start on its host: "):
                started.append(subprocess.Popen(line.split(": ", 1)[1].split()))
        harness.communicate(timeout=120)
        assert harness.returncode == 0
    finally:
        for p in started:
            p.wait(timeout=10)
    same_files(ref, out)


def test_bench_floor_reports_each_transport(engines):
    """cais-bench floor runs over both local transports and says how loaded the machine was."""
    import json

    proc = subprocess.run([sys.executable, "-m", "harness.bench", "floor", "--windows", "50", "--repeat", "1",
                           "--transport", "ipc,shm", "--spin-us", "0,1000"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"ipc", "shm spin=0us", "shm spin=1000us", "load_average_before", "load_average_after"} <= set(out)
    assert all(out[k]["us_per_window"]["median"] > 0 for k in ("ipc", "shm spin=0us", "shm spin=1000us"))


def test_bench_loop_times_the_lock_step_loop_alone():
    """cais-bench loop drives the Coordinator against in-process engines that answer at once."""
    import json

    proc = subprocess.run([sys.executable, "-m", "harness.bench", "loop", "--windows", "300"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["windows"] == 300 and out["engine_processes"] == 3 and out["python_us_per_window"] > 0


@pytest.mark.parametrize("args,message", [
    (["loop", "--windows", "0"], "argument --windows: must be an integer >= 1, got '0'"),
    (["floor", "--repeat", "-1"], "argument --repeat: must be an integer >= 1, got '-1'"),
    (["floor", "--spin-us", "fast"], "--spin-us: must be an integer >= 0, got 'fast'"),
    (["harness", "--outstanding", "0"], "argument --outstanding: must be an integer >= 1, got '0'"),
])
def test_bench_refuses_counts_it_cannot_use(args, message):
    proc = subprocess.run([sys.executable, "-m", "harness.bench", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_processes_each_host_a_share_of_the_gpus_and_of_the_switches():
    from harness import topology
    from harness.cosim.partition import partition
    topo = topology.build(compose("system=dgx_h100").system)  # GPUs 0-7, switches 8-11
    two = partition(topo)
    assert [e.nodes for e in two.engines] == [[0, 1, 2, 3, 8, 9], [4, 5, 6, 7, 10, 11]]
    assert two.window_ps == 250_000  # a GPU's links to the other half's switches cross
    # More processes than switches: runs of all the nodes, none of them empty.
    for n in range(1, 13):
        hosted = [e.nodes for e in partition(topo, processes=n).engines]
        assert len(hosted) == n and all(hosted)
        assert sorted(sum(hosted, [])) == list(range(12))
    by_kind = partition(topo, gpus_per_process=4)
    assert [e.name for e in by_kind.engines] == ["gpu_engine0", "gpu_engine1", "net_engine0", "net_engine1",
                                                  "net_engine2", "net_engine3"]


def test_manual_engines_nobody_starts_are_named_with_what_to_do(engines, tmp_path):
    """Not a hang and no empty stderr section (the harness has none of a manual engine's)."""
    proc = run_cli(*SMALL, "cosim.transport=tcp", "cosim.launcher=manual", "cosim.connect_timeout_s=1",
                   "cache.enabled=false", f"out_dir={tmp_path}", check=False, timeout=60)
    assert proc.returncode == 2
    errors = [l for l in proc.stderr.splitlines() if not l.startswith("start on its host: ")]
    assert errors == ["cais-sim: error: engine engine0, engine1: did not connect within 1 s "
                      "(cosim.connect_timeout_s): start each with its command above"], proc.stderr
