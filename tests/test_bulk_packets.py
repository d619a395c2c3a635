"""Bulk packets (gpu.bulk_lines = N): a layer run at N lines per packet converges to the run
with one packet per line as N -> 1.

Wire bytes are exact by construction (a bulk packet has the header flits of its N packets), so
the bytes of every packet type must equal the N = 1 run's; the simulated time, the link
utilisation and the merge tables' high-water marks move only because lines of one bulk leave
together, and must stay within the tolerances docs/PERFORMANCE.md ("Bulk packets") documents.
The values a functional run computes are exact at any N (test_schemes_functional.py runs at
the default N; here one scheme per kernel family runs at N = 16).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import read_results, run_cli

BASE = ("model=tiny", "system=dgx_h100_half", "phase=inference", "workload=sublayer_l1")
LINES = (1, 2, 4, 8, 16)
# Largest relative deviation from the N = 1 run (docs/PERFORMANCE.md, "Bulk packets").
TIME_TOL = 0.01
LINK_UTIL_TOL = 0.01
HIGH_WATER_TOL = 0.05


def _run(tmp_path, scheme: str, lines: int, *extra: str) -> tuple[pd.Series, dict[str, float]]:
    out = tmp_path / f"{scheme}_n{lines}"
    run_cli(*BASE, f"scheme={scheme}", f"gpu.bulk_lines={lines}", f"out_dir={out}", *extra)
    st = pd.read_csv(out / "stats.csv")
    return read_results(out).iloc[0], dict(zip(st["name"], st["value"]))


def _high_water(stats: dict[str, float]) -> float:
    return max((v for k, v in stats.items() if k.endswith(".high_water_entries")), default=0.0)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else abs(a)


@pytest.mark.parametrize("scheme", ["tp_nvls", "t3_nvls", "coconet"])
def test_layer_converges_as_bulk_lines_go_to_one(engines, tmp_path, scheme):
    extra = ("net.cais_merge.unlimited=true",) if scheme == "t3_nvls" else ()
    ref, ref_stats = _run(tmp_path, scheme, 1, *extra)
    byte_cols = [c for c in ref.index if c.startswith("bytes_")]
    assert byte_cols, "the run moved no bytes"
    for n in LINES[1:]:
        row, stats = _run(tmp_path, scheme, n, *extra)
        for c in byte_cols:
            assert row[c] == ref[c], f"N={n}: {c} {row[c]} != {ref[c]} at N=1"
        assert _rel(row["time_us"], ref["time_us"]) <= TIME_TOL, f"N={n}: time {row['time_us']} vs {ref['time_us']}"
        assert _rel(row["link_util"], ref["link_util"]) <= LINK_UTIL_TOL, \
            f"N={n}: link_util {row['link_util']} vs {ref['link_util']}"
        assert _rel(_high_water(stats), _high_water(ref_stats)) <= HIGH_WATER_TOL, \
            f"N={n}: merge high water {_high_water(stats)} vs {_high_water(ref_stats)}"
        packets = [k for k in ref_stats if k.endswith(".tx.packets")]
        assert all(stats[k] == ref_stats[k] for k in packets), f"N={n}: per-link packet counts differ"


def test_bulk_packets_cut_the_events(engines):
    """cais-bench layer's counts: the same line packets over the links, far fewer events."""
    from harness.bench_layer import bench_layer

    one, bulk = (bench_layer("tiny", "inference", "tp_nvls", "dgx_h100_half", "sublayer_l1", [f"gpu.bulk_lines={n}"])
                 for n in (1, 8))
    assert bulk["packets"] == one["packets"] > 0
    assert bulk["events"] < one["events"] / 2
    assert one["sim_time_us"] > 0 and one["wall_s"] > 0 and one["peak_rss_mb"]["engine"] > 0
    assert one["windows"] > 0 and one["window_ns"] > 0


def test_traffic_control_runs_the_bulks_its_reduction_vcs_hold(engines, tmp_path):
    """8-line bulks fill a 256-flit VC with 216 flits; traffic control's 3 reduction VCs per lane
    then hold less than a credit round trip, so CAIS's GPUs cut bulks to 7 lines (which pack as
    single lines do) while a scheme without traffic control keeps 8 (docs/PERFORMANCE.md, "Bulk
    packets")."""
    _, cais = _run(tmp_path, "cais", 8)
    _, tp = _run(tmp_path, "tp_nvls", 8)
    assert {cais[f"gpu{g}.bulk_lines"] for g in range(8)} == {7.0}
    assert {tp[f"gpu{g}.bulk_lines"] for g in range(8)} == {8.0}


def test_bulk_lines_out_of_range_is_one_line(engines, tmp_path):
    proc = run_cli(*BASE, "scheme=tp_nvls", "gpu.bulk_lines=17", f"out_dir={tmp_path / 'bad'}", check=False)
    assert proc.returncode == 2
    assert "gpu.bulk_lines" in proc.stderr and "1 to 16" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("scheme", ["tp_nvls", "t3_nvls", "coconet", "fuselib_nvls"])
def test_values_are_exact_at_any_bulk_size(engines, tmp_path, scheme):
    """Every buffer's sum, min, max and order-sensitive hash on every GPU equal the N = 1 run's:
    lines of a bulk packet land where their own packets would."""
    _, one = _run(tmp_path, scheme, 1, "net.functional=true")
    _, bulk = _run(tmp_path, scheme, 16, "net.functional=true")
    mem = {k: v for k, v in one.items() if ".mem." in k}
    assert mem, "no functional memory statistics"
    assert {k: bulk[k] for k in mem} == mem


REFERENCE_N1 = Path(__file__).parent / "data" / "n1_reference_t3_nvls_tiny_l1_stats.csv.gz"
REFERENCE_ROW = {"time_us": 47.2162, "link_util": 0.0321, "bytes_cais_red": 3670016, "bytes_dma": 524288,
                 "bytes_write": 448}


def test_one_line_per_packet_is_the_engine_before_bulk_packets(engines, tmp_path):
    """N = 1 is exactly the engine before bulk packets existed: every statistic of a small run
    (model=tiny L1 under t3_nvls: remote pushes, red.cais merged in the switch, DMA multicast)
    equals the one recorded with the engines of main at 30e877e, without them, re-recorded when
    HBM's latency became the measured loaded-latency curve: times moved (local loads wait 205 ns
    plus the load's share instead of 972 ns), and with them which red.cais lines met in the
    switch's merge tables (gpu6 receives 512 merged CAIS_RED packets instead of 1024); the bytes
    per request type did not. Statistics
    added since are not in the reference; one that changes value must be explained and the
    reference re-recorded (`cais-sim model=tiny system=dgx_h100_half phase=inference
    workload=sublayer_l1 scheme=t3_nvls gpu.bulk_lines=1 net.sw_alloc_granularity=packet out_dir=DIR`,
    gzip DIR/stats.csv). The reference was recorded with the packet-level switch allocator, the
    default until flit allocation (which moves this run's time by 0.3 ns) became it. The merge
    unit's merged sums enter the crossbar at their outputs since the unit sits on the home's port
    (`packets_injected_at_outputs` rose by the 1277 / 991 / 1012 / 1328 `merged_writes` of
    sw0-sw3; nothing else moved). Re-recorded when a load's data began to cross the SM's port
    after its latency (port_calendar.h): time 43.4005 -> 44.9594 us, and gpu6 receives 1024
    merged CAIS_RED packets again instead of 512; the bytes per request type did not move.
    Re-recorded when the SM's port got two rates (116 B per clock in, 32 out; an SM's remote
    stores cross it) and the GPU was recalibrated for them: time 44.9594 -> 47.1915 us, which
    red.cais lines met in the merge tables moved again (gpu2 receives 1024 merged CAIS_RED
    packets instead of 512); the bytes per request type did not move. Re-recorded when a warp's
    register loads got their own rate (LocalMemory::warp_round_end): the one loads_via_l1 kernel,
    the LayerNorm, holds its SMs 6.58 -> 6.78 us on GPU 0, and every later kernel starts 24 ns later
    (time 47.1915 -> 47.2174 us), and every later time and utilisation with it; bytes and packets
    did not move. Re-recorded when an SM's remote store op began to book all its bytes on the SM's
    port when its first line may go (remote_packetizer.h): the LayerNorm's release and every later
    time 1.15 ns earlier (time 47.2174 -> 47.2162 us), the merge tables' waits and lives with them;
    bytes, packets and merges did not move."""
    row, stats = _run(tmp_path, "t3_nvls", 1, "net.sw_alloc_granularity=packet")
    assert {k: row[k] for k in REFERENCE_ROW} == REFERENCE_ROW
    ref = pd.read_csv(REFERENCE_N1)
    missing = [n for n in ref["name"] if n not in stats]
    assert not missing, f"statistics gone: {missing[:5]}"
    differ = [(n, v, stats[n]) for n, v in zip(ref["name"], ref["value"]) if stats[n] != v]
    assert not differ, f"{len(differ)} statistics differ, e.g. {differ[:5]}"
