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


def test_an_override_of_a_key_the_scheme_sets_is_never_answered_from_the_cache(engines, tmp_path):
    """The scheme's own file sets net.cais_merge.outstanding_cap; the compare run's top-level
    config looks the same with and without the override, so a whole compare run must not be
    cached under it (it once came back with the other run's numbers)."""
    cache = f"cache.dir={tmp_path / 'cache'}"
    args = [*TINY, "phase=training", "compare.schemes=[tp_nvls,cais]", cache]
    capped = read_results_of(run_cli(*args, f"out_dir={tmp_path / 'a'}"), tmp_path / "a")
    uncapped = read_results_of(run_cli(*args, "net.cais_merge.outstanding_cap=false", f"out_dir={tmp_path / 'b'}"),
                               tmp_path / "b")
    assert capped["tp_nvls"] == uncapped["tp_nvls"]
    assert capped["cais"] != uncapped["cais"]


def read_results_of(proc, out):
    assert "from the cache" not in proc.stdout
    return read_results(out).set_index("scheme")["time_us"].to_dict()


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
