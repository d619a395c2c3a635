"""Result files: written atomically (temp file + rename), so a crash never leaves half a CSV.

Files get the mode an ordinary ``open()`` would give (0666 less the umask): the temp file is
created by ``os.open`` with 0666, so the kernel applies the umask, rather than by ``mkstemp``,
whose 0600 would make results unreadable to anyone else.

Wall-clock figures differ between two runs of the same inputs, so they never go to results.csv:
:func:`split_timing` moves every column named ``wall_s`` or ``*_wall_s`` (``sim_wall_s``,
``events_per_wall_s``) to timing.csv beside it, and results.csv is byte-identical for equal inputs.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

import pandas as pd

from harness.errors import ConfigError

TIMING_SUFFIX = "wall_s"


def write_text_atomic(path: Path, text: str) -> None:
    """Write text to path via a temp file in the same folder; OSError (disk full, no permission)
    is raised as a ConfigError naming the file, and no temp file is left behind."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            data = text.encode()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        _discard(tmp)
        raise ConfigError("out_dir", f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        _discard(tmp)
        raise


def _discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def write_csv_atomic(path: Path, df: pd.DataFrame, exact: bool = False) -> None:
    """Ten significant digits keep result tables readable; exact=True writes every float as the
    shortest text that reads back to the same double (statistics: counters, hashes)."""
    write_text_atomic(path, df.to_csv(index=False, float_format=None if exact else "%.10g", lineterminator="\n"))


def is_timing_column(name: str) -> bool:
    return name == TIMING_SUFFIX or name.endswith("_" + TIMING_SUFFIX)


def split_timing(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(results without wall-clock columns, timing frame or None). The timing frame has ``row``
    (the row's index in results.csv), ``name`` or ``figure`` when the results have one, then the
    wall-clock columns."""
    timing_cols = [c for c in df.columns if is_timing_column(str(c))]
    if not timing_cols:
        return df, None
    timing = pd.DataFrame({"row": range(len(df))})
    for key in ("name", "figure"):
        if key in df.columns:
            timing[key] = df[key].to_numpy()
    for c in timing_cols:
        timing[c] = df[c].to_numpy()
    return df.drop(columns=timing_cols), timing
