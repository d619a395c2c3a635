"""The SM clock under the power limit (harness/gpu/power.py) and its use by runs and validation."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.experiments import validate_kernels
from harness.gpu import power, standalone
from harness.params.gpu import GpuParams

P = dataclasses.asdict(GpuParams())


def test_fewer_sms_run_faster_up_to_the_boost_clock():
    f132, f66, f33 = (power.settled_clock_mhz(n, "tensor", P) for n in (132, 66, 33))
    assert f132 < f66 < f33 == P["max_clock_mhz"]
    # measured steady state on the H100 at 700 W (h100_power.csv medians): 1395 and ~1770 MHz
    assert 1300 <= f132 <= 1500 and 1700 <= f66 <= 1900
    assert power.settled_clock_mhz(132, "memory", P) == P["max_clock_mhz"]


def test_settled_clock_is_the_highest_step_within_the_limit():
    for n in (132, 100, 66):
        f = power.settled_clock_mhz(n, "tensor", P)
        assert power.board_power_w(f, n, "tensor", P) <= P["power_limit_w"]
        assert power.board_power_w(f + 15, n, "tensor", P) > P["power_limit_w"]
    lower_limit = dict(P, power_limit_w=650.0)
    assert power.settled_clock_mhz(132, "tensor", lower_limit) < power.settled_clock_mhz(132, "tensor", P)


def test_a_burst_runs_between_the_settled_and_the_maximum_clock():
    """Before the power controller settles, a GEMM on every SM is held under the burst limit: the
    SMs' counters read 1606-1696 MHz in H200 bursts of 132-CTA GEMMs (h200_burst_clock.csv), the
    sustained clock is ~1400; a memory-bound burst stays at the maximum clock."""
    burst, settled = power.burst_clock_mhz(132, "tensor", P), power.settled_clock_mhz(132, "tensor", P)
    assert settled < burst < P["max_clock_mhz"] and 1600 <= burst <= 1700
    assert power.board_power_w(burst, 132, "tensor", P) <= P["power_burst_limit_w"]
    assert power.board_power_w(burst + 15, 132, "tensor", P) > P["power_burst_limit_w"]
    assert power.burst_clock_mhz(132, "memory", P) == P["max_clock_mhz"]


def test_unknown_load_kind_is_refused():
    with pytest.raises(ValueError, match="allowed: tensor, memory"):
        power.settled_clock_mhz(132, "video", P)


def test_resolve_clock_fills_power_aware_keeps_fixed_and_hides_model_keys():
    flat = standalone.gpu_params({"num_sms": 66})
    out = power.resolve_clock(dict(flat))
    assert out["gpu.clock_mhz"] == power.settled_clock_mhz(66, "tensor", P)
    assert not set(power.MODEL_KEYS) & set(out)
    fixed = power.resolve_clock(dict(flat, **{"gpu.clock_mhz": 1234.0}))
    assert fixed["gpu.clock_mhz"] == 1234.0


@pytest.mark.parametrize("resolve", [power.resolve_clock, power.resolve_burst_clocks])
@pytest.mark.parametrize("key", ["gpu.clock_mhz", "gpu.clock_mhz_without_mma"])
def test_a_negative_clock_is_refused_not_read_as_power_aware(resolve, key):
    flat = standalone.gpu_params({"num_sms": 66})
    with pytest.raises(ConfigError, match=f"^{key}: must be 0 .* or a clock > 0 MHz, got -5"):
        resolve(dict(flat, **{key: -5.0}))


def test_validation_predicts_the_clock_and_ignores_the_measured_one(engines):
    rows = pd.DataFrame([dict(name="extra.sq2048", kind="gemm", M=2048, N=2048, K=2048, num_sms=n, sm_clock_mhz=c)
                         for n in (132, 66) for c in (600, 1980)])
    out = validate_kernels.simulate_rows(rows, {}, jobs=2)
    for n in (132, 66):
        sel = out[out.num_sms == n]
        assert set(sel.sim_clock_mhz) == {power.settled_clock_mhz(n, "tensor", P)}
        assert sel.sim_us.nunique() == 1  # the measured clock changes nothing
    fixed = validate_kernels.simulate_rows(rows.iloc[:1], {"clock_mhz": 990.0}, jobs=1)
    assert fixed.sim_clock_mhz.iloc[0] == 990.0
    assert fixed.sim_us.iloc[0] > out.sim_us.iloc[0]
