"""scripts/warp_round_model.py: a CTA's warps as a closed queueing network against call 42's rows."""
import importlib.util

import pytest

from harness import REPO_ROOT

spec = importlib.util.spec_from_file_location("warp_round_model", REPO_ROOT / "scripts" / "warp_round_model.py")
model = importlib.util.module_from_spec(spec)
spec.loader.exec_module(model)


def test_one_warp_is_its_delay_plus_its_port_time():
    assert model.mva_rounds_per_us(1, 0.4, 0.1) == pytest.approx(1 / 0.5)


def test_many_warps_are_bound_by_the_port():
    # 64 warps of 0.5 us delay and 0.1 us at the port: the port's 10 rounds per us
    assert model.mva_rounds_per_us(64, 0.5, 0.1) == pytest.approx(10.0, rel=1e-3)
    # below the knee they queue: fewer rounds than either asymptote gives
    assert model.mva_rounds_per_us(5, 0.4, 0.1) < min(5 / 0.5, 10.0)


def test_the_description_holds_on_the_rows_it_was_not_fitted_to():
    """The fit takes the 1-warp and full-port rows; the 2-8-warp rows are the check
    (docs/MEASUREMENTS.md, "A warp's loads": 6.1 % mean |error|)."""
    r = model.rows(model.MEASURED)
    port_load, port_store = model.fit_port(r)
    warp = model.fit_warp(r, port_load, port_store)
    check = r[r.warps.between(2, 8)]
    errors = [abs(model.model_gbps(int(x.warps), int(x.unroll), model.SOURCES[x.kind], model.DESTS[x.kind],
                                   *warp[x.pool], port_load, port_store) / x.gbps_per_cta - 1)
              for _, x in check.iterrows()]
    assert len(errors) == 72
    assert sum(errors) / len(errors) < 0.07
    assert 20 < warp["hbm"][1] < 30 and 0.3 < warp["hbm"][0] < 0.5  # GB/s per warp, latency us


def test_it_is_the_analysis_the_engine_runs():
    """The engine's LocalMemory::warp_round_end (C++) and this script's MVA are one analysis
    written twice: both must give gtest LocalMemory.AWarpRoundIsItsWarpsQueueingAtThePort's
    figures (four warps of 10500 ps delay and 4000 ps at the port: 19138.9 ps a round; one
    warp: its delay plus its port time)."""
    ps = 1e-6  # us
    assert 4 / model.mva_rounds_per_us(4, 10500 * ps, 4000 * ps) / ps == pytest.approx(19138.9, abs=1.0)
    assert 1 / model.mva_rounds_per_us(1, 10500 * ps, 4000 * ps) / ps == pytest.approx(14500, abs=0.01)
    # 32 warps whose port time is 4000 ps each: the port's 128000 ps for the round
    assert 32 / model.mva_rounds_per_us(32, 10500 * ps, 4000 * ps) / ps == pytest.approx(128000, rel=0.01)
