"""HBM's measured latency curve: the gpu.* defaults are what harness/gpu/hbm_curve.py derives from
the measurement, and a loaded GPU's reads wait longer than an idle one's."""
from __future__ import annotations

from harness.gpu import hbm_curve
from harness.params.gpu import GpuParams


def test_the_defaults_are_what_the_measurement_gives():
    p = GpuParams()
    derived = hbm_curve.derive(peak_gbps=p.hbm_bw_gbps)
    for key, value in derived.items():
        assert getattr(p, key) == value, f"gpu.{key}: params {getattr(p, key)} != derived {value}"


def test_the_curve_rises_with_load_and_writes_cost_more():
    d = hbm_curve.derive()
    read, copy = d["hbm_load_read_ns"], d["hbm_load_copy_ns"]
    assert read[0] == copy[0] == 0.0
    assert all(b >= a for a, b in zip(read, read[1:])) and all(b >= a for a, b in zip(copy, copy[1:]))
    assert all(c >= r for r, c in zip(read, copy))
    assert 150 < d["hbm_latency_ns"] < 300  # an H100's idle miss beyond L2: ~200 ns
    assert read[-1] > 300 and copy[-1] > 600  # near saturation the latency has doubled or more


def test_the_h200_systems_carry_the_h200_measurement():
    from harness.config.precheck import compose_one

    derived = hbm_curve.derive(hbm_curve.H200, peak_gbps=4800.0)
    for system in ("hgx_h200_2gpu", "hgx_h200_4gpu", "hgx_h200_8gpu"):
        gpu = compose_one([f"system={system}"]).gpu
        assert gpu.hbm_bw_gbps == 4800.0
        for key, value in derived.items():
            got = list(gpu[key]) if isinstance(value, list) else gpu[key]
            assert got == value, f"{system}: gpu.{key} {got} != derived {value}"
