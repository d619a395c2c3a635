"""cais-diff and the atomic result writer."""
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
