"""The harness's time-series frame: built from arrays, it must equal the frame of one tuple per bin."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd

from harness.cosim.runner import SERIES_COLUMNS, series_frame


def test_series_from_arrays_writes_the_same_csv_as_one_tuple_per_bin():
    rng = np.random.default_rng(1)
    stats = [(f"gpu{g}.port{p}.util", 1000.0, rng.random(50)) for g in (3, 1, 2) for p in range(2)]
    stats += [("sw0.x", 250.0, rng.random(7)), ("gpu1.port0.util", 1000.0, rng.random(5))]  # a name twice
    rows = [(n, k, k * w, w, x) for n, w, v in stats for k, x in enumerate(v)]
    tuples = pd.DataFrame(rows, columns=SERIES_COLUMNS).sort_values(["name", "bin"], kind="stable")
    a, b = io.StringIO(), io.StringIO()
    tuples.to_csv(a, index=False)
    series_frame(stats).to_csv(b, index=False)
    assert a.getvalue() == b.getvalue()
    assert list(series_frame([]).columns) == SERIES_COLUMNS
