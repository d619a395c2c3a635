"""cais-diff, cais-report's input checks, the atomic result writer and scripts/collect_points.py."""
from __future__ import annotations

import pandas as pd
import pytest

from harness.diff import compare
from harness.results import write_csv_atomic


def test_diff_detects_changes_beyond_tolerance():
    ref = pd.DataFrame({"name": ["a", "b"], "sim_us": [100.0, 200.0]})
    ok = pd.DataFrame({"name": ["b", "a"], "sim_us": [201.0, 100.5]})
    assert compare(ok, ref, rtol=0.01, atol=0, keys=None) == []
    bad = pd.DataFrame({"name": ["a", "b"], "sim_us": [100.0, 230.0]})
    problems = compare(bad, ref, rtol=0.01, atol=0, keys=None)
    assert len(problems) == 1 and "name=b" in problems[0]
    missing = pd.DataFrame({"name": ["a"], "sim_us": [100.0]})
    assert any("row missing" in p for p in compare(missing, ref, 0.01, 0, None))
    # a row only the results have, or one they repeat, passed as agreement
    extra = pd.DataFrame({"name": ["a", "b", "c"], "sim_us": [100.0, 200.0, 300.0]})
    assert compare(extra, ref, 0.01, 0, None) == ["row not in the reference: name=c"]
    repeated = pd.DataFrame({"name": ["a", "b", "b"], "sim_us": [100.0, 200.0, 200.0]})
    assert compare(repeated, ref, 0.01, 0, None) == ["row repeated in results: name=b"]


def test_atomic_write_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "results.csv"

    class Boom(pd.DataFrame):
        def to_csv(self, *a, **k):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        write_csv_atomic(target, Boom({"x": [1]}))
    assert not target.exists() and list(tmp_path.iterdir()) == []
    write_csv_atomic(target, pd.DataFrame({"x": [1]}))
    assert target.read_text() == "x\n1\n"


def test_collect_points_concatenates_every_column_in_point_order(tmp_path):
    import subprocess
    import sys

    from harness import REPO_ROOT

    fig = tmp_path / "fig"
    for n, row in ((10, {"scheme": "cais", "time_us": 2.0, "merge_hits": 5}), (2, {"scheme": "tp_nvls", "time_us": 1.0})):
        (fig / str(n)).mkdir(parents=True)
        pd.DataFrame([row]).to_csv(fig / str(n) / "results.csv", index=False)
    (fig / "results.csv").write_text("not a point\n")  # the figure's own table is not a point
    out = tmp_path / "all.csv"
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "collect_points.py"), str(fig), str(out)], check=True)
    df = pd.read_csv(out)
    assert list(df["point"]) == [2, 10] and list(df["scheme"]) == ["tp_nvls", "cais"]
    assert df["merge_hits"].isna().tolist() == [True, False]  # a column one point lacks is left empty


@pytest.mark.parametrize("text,why", [
    ("{bad", "not a figure record (Expecting property name"),
    ("[1, 2]", "not a figure record (a JSON object is expected)"),
    ('{"name": "fig11", "title": "t", "png": "fig11.png", "failed": []}', "('points' missing or not a int)"),
    ('{"name": "fig11", "title": "t", "png": "fig11.png", "points": 3, "failed": "none"}',
     "('failed' missing or not a list)"),
])
def test_report_names_a_figure_record_it_cannot_read(tmp_path, capsys, text, why):
    from harness.report import main as report_main

    record = tmp_path / "fig11" / "figure.json"
    record.parent.mkdir()
    record.write_text(text)
    with pytest.raises(SystemExit) as done:
        report_main([str(tmp_path)])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"cais-report: error: {record}: ") and why in err[0], err
    assert not (tmp_path / "report.md").exists()


def test_report_keeps_integer_columns_integer_where_some_runs_lack_them(tmp_path):
    from harness.report import collect

    (tmp_path / "0").mkdir()
    (tmp_path / "1").mkdir()
    pd.DataFrame({"scheme": ["a"], "time_us": [1.5], "bytes_write": [524288]}).to_csv(tmp_path / "0/results.csv",
                                                                                     index=False)
    pd.DataFrame({"scheme": ["b"], "time_us": [2.0], "bytes_dma": [7]}).to_csv(tmp_path / "1/results.csv", index=False)
    df = collect([str(tmp_path)])
    assert str(df["bytes_write"].dtype) == "Int64" and str(df["bytes_dma"].dtype) == "Int64"
    assert df["bytes_write"].tolist()[0] == 524288 and pd.isna(df["bytes_write"].tolist()[1])
    assert "524288.0" not in df.to_csv(index=False)
    assert df["time_us"].dtype == float
