"""CI's result diff: the fast configuration (conf/experiment/ci_fast.yaml: sub-layer L1 of
model=tiny under every scheme) against the committed reference the simulator produced, and a
check that the diff fails when one scheme's result moves outside tolerance."""
from __future__ import annotations

import pandas as pd
import pytest

from harness import REPO_ROOT
from harness.diff import main as diff_main
from conftest import run_cli

REFERENCE = REPO_ROOT / "tests" / "reference" / "ci" / "ci_fast.csv"
RTOL = 0.01  # results are deterministic: this only lets harmless float noise through


def test_fast_configuration_matches_the_committed_reference(engines, tmp_path):
    out = tmp_path / "ci"
    run_cli("experiment=ci_fast", f"out_dir={out}", "cache.enabled=false", timeout=600)
    with pytest.raises(SystemExit) as done:
        diff_main([str(out / "results.csv"), str(REFERENCE), "--rtol", str(RTOL)])
    assert done.value.code == 0


def test_the_diff_fails_when_a_scheme_moves_outside_tolerance(tmp_path, capsys):
    moved = pd.read_csv(REFERENCE)
    moved.loc[moved["scheme"] == "coconet_nvls", "time_us"] *= 1.05
    path = tmp_path / "moved.csv"
    moved.to_csv(path, index=False)
    with pytest.raises(SystemExit) as done:
        diff_main([str(path), str(REFERENCE), "--rtol", str(RTOL)])
    assert done.value.code == 1
    out = capsys.readouterr().out
    assert "coconet_nvls" in out and "time_us" in out and "tp_nvls " not in out


def test_a_sweep_axis_keys_its_rows(tmp_path, capsys):
    """Rows told apart only by an integer sweep axis (Fig 14's table_kb) are matched on it: the
    file against itself agrees, and a moved point is reported at its own table size."""
    ref = pd.DataFrame({"scheme": ["cais"] * 3 + ["cais_wo_coord"] * 3, "table_kb": [10, 40, 160] * 2,
                        "time_us": [830.0, 627.0, 508.0, 798.0, 729.0, 685.0]})
    path = tmp_path / "ref.csv"
    ref.to_csv(path, index=False)
    with pytest.raises(SystemExit) as done:
        diff_main([str(path), str(path)])
    assert done.value.code == 0
    moved = ref.copy()
    moved.loc[4, "time_us"] = 800.0
    moved = moved.sample(frac=1, random_state=1)  # row order does not matter
    mpath = tmp_path / "moved.csv"
    moved.to_csv(mpath, index=False)
    with pytest.raises(SystemExit) as done:
        diff_main([str(mpath), str(path)])
    assert done.value.code == 1
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines() if ln.startswith("cais_wo_coord")]
    assert lines == [["cais_wo_coord", "40", "time_us", "800", "729", "0.0973937"]]


def test_rows_no_key_tells_apart_are_an_error(tmp_path, capsys):
    ref = pd.DataFrame({"scheme": ["cais", "cais"], "time_us": [1.0, 2.0]})
    path = tmp_path / "ref.csv"
    ref.to_csv(path, index=False)
    with pytest.raises(SystemExit) as done:
        diff_main([str(path), str(path)])
    assert done.value.code == 2
    assert "not unique by ['scheme']" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--rtol", "--atol"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "tight"])
def test_a_tolerance_must_be_a_finite_number_not_below_zero(option, value, capsys):
    with pytest.raises(SystemExit) as done:
        diff_main([str(REFERENCE), str(REFERENCE), option, value])
    assert done.value.code == 2
    assert f"argument {option}: must be a number >= 0, got '{value}'" in capsys.readouterr().err
