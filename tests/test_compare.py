"""experiment=compare (the README's first command): every scheme runs the same workload, the
baseline's speedup is 1, bytes and merge hits come from each run's statistics, a figure is
written, and bad lists are one-line errors."""
from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import read_results, run_cli

TINY = ["experiment=compare", "model=tiny"]


def test_compare_runs_each_scheme_on_the_same_workload(engines, tmp_path):
    out = tmp_path / "cmp"
    proc = run_cli(*TINY, "compare.schemes=[tp_nvls,t3_nvls]", f"out_dir={out}")
    df = read_results(out)
    assert list(df["scheme"]) == ["tp_nvls", "t3_nvls"]
    assert set(df["workload"]) == {"sublayer_l1"} and set(df["model"]) == {"tiny"}
    assert df.loc[0, "speedup"] == 1.0
    assert df.loc[1, "speedup"] == pytest.approx(df.loc[0, "time_us"] / df.loc[1, "time_us"], abs=1e-3)
    # each scheme's own run folder, and its numbers are those of its own statistics
    for scheme in df["scheme"]:
        stats = pd.read_csv(out / scheme / "stats.csv")
        tx = stats[stats["name"].str.fullmatch(r"gpu\d+\.tx\.[A-Z_]+\.bytes")]["value"].sum()
        assert df.set_index("scheme").loc[scheme, "moved_mb"] == pytest.approx(tx / 1e6, abs=1e-3)
    hits = df.set_index("scheme")["merge_hits"]
    assert hits["tp_nvls"] == 0 and hits["t3_nvls"] > 0  # only t3_nvls uses the merge unit
    assert (out / "compare.png").stat().st_size > 10_000
    assert "figure:" in proc.stderr
    header = next(l for l in proc.stdout.splitlines() if "scheme" in l).split()
    assert header == ["scheme", "time_us", "speedup", "moved_mb", "link_util", "merge_hits"]


@pytest.mark.parametrize("override,key", [
    ("compare.schemes=[tp_nvls,nope]", "compare.schemes"),
    ("compare.schemes=[]", "compare.schemes"),
    ("compare.baseline=coconet", "compare.baseline"),
    ("workload=traffic", "workload"),
])
def test_compare_bad_input_is_one_line(engines, tmp_path, override, key):
    proc = run_cli(*TINY, override, f"out_dir={tmp_path / 'x'}", check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], proc.stderr
    assert not (tmp_path / "x" / "results.csv").exists()
